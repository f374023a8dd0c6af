"""The local driver JVM's class archive with real JVMs (``spark_purge.class_archive``): the first
local session's JVM writes it when its process ends, the next one loads Spark's classes from it,
and neither prints the JVM's class-sharing notes into the command's output."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from spark_purge import class_archive as ca

# A process with a local session, as a one-shot `spark-purge plan` is; argv[1]: extra JVM
# options; argv[2]: "stop" to stop the session (the demo and a plain script may not).
SESSION = """
import sys
from spark_purge.session import get_spark
spark = get_spark("class-archive-test", master="local[1]", conf={"spark.driver.extraJavaOptions": sys.argv[1]} if sys.argv[1] else None)
print("sum", spark.range(10).selectExpr("sum(id)").collect()[0][0])
if sys.argv[2] == "stop":
    spark.stop()
"""


def session(folder: Path, options: str = "", stop: bool = True) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, ca.ARCHIVE_ENV: str(folder)}
    done = subprocess.run(
        [sys.executable, "-c", SESSION, options, "stop" if stop else "keep"], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "sum 45" in done.stdout
    assert "[cds" not in done.stdout + done.stderr  # the JVM's notes on what it could not archive
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    return done


def test_the_first_session_writes_the_archive_and_the_next_loads_spark_from_it(tmp_path: Path) -> None:
    folder = tmp_path / "archives"
    session(folder, stop=False)  # its session still active when the process ends and waits for the JVM
    archives = list(folder.glob("spark-*.jsa"))
    assert len(archives) == 1, sorted(p.name for p in folder.iterdir())
    assert ca.is_complete(archives[0]) and archives[0].stat().st_size > 10_000_000
    assert not list(folder.glob("*.part"))

    loaded = tmp_path / "classes.log"
    session(folder, f"-Xlog:class+load=info:file={loaded}")
    log = loaded.read_text()
    assert re.search(r"org\.apache\.spark\.SparkContext source: shared objects file \(top\)", log), log[:2000]
    shared = len(re.findall(r"source: shared objects file \(top\)", log))
    assert shared > 5_000, shared  # Spark's classes by the thousand, not one by chance
    assert list(folder.glob("spark-*.jsa")) == archives  # mapped, not written again
