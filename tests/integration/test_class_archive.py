"""The local driver JVM's class archive with real JVMs (``spark_purge.class_archive``): the first
local session's JVM writes it when its process ends, the next one loads Spark's classes from it,
and neither prints the JVM's class-sharing notes into the command's output; or the warm-up
(``python -m spark_purge.warm``, what ``./dev.sh setup`` runs) writes it before any session
(the one setup wrote is checked, when it is in place)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from spark_purge import class_archive as ca
from spark_purge import warm as warm_mod

# A process with a local session, as a one-shot `spark-purge plan` is; argv[1]: extra JVM
# options; argv[2]: "stop" to stop the session (the demo and a plain script may not).
SESSION = """
import sys
from spark_purge.session import get_spark
spark = get_spark("class-archive-test", master="local[1]", conf={"spark.driver.extraJavaOptions": sys.argv[1]} if sys.argv[1] else None)
print("sum", spark.range(10).selectExpr("sum(id)").collect()[0][0])
if len(sys.argv) > 3:  # a Delta table's folder: write and read one
    spark.range(10).write.format("delta").save(sys.argv[3])
    print("delta", spark.read.format("delta").load(sys.argv[3]).count())
if sys.argv[2] == "stop":
    spark.stop()
"""


def session(folder: Path, options: str = "", stop: bool = True, delta: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, ca.ARCHIVE_ENV: str(folder)}
    args = [sys.executable, "-c", SESSION, options, "stop" if stop else "keep", *([str(delta)] if delta else [])]
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=600)
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


def warm(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, ca.ARCHIVE_ENV: str(folder)}
    done = subprocess.run([sys.executable, "-m", "spark_purge.warm", *args], env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "[cds" not in done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "warm-up failed" not in done.stderr, done.stderr[-3000:]
    return done


def test_the_warm_up_writes_the_archive_before_any_session_and_sessions_load_delta_from_it(tmp_path: Path) -> None:
    """The archive this installation's setup wrote (``./dev.sh setup`` runs the warm-up before
    any session: on CI's clean checkout, just before the tests) is checked as it is, rather than
    written again: the warm-up's Spark and Delta workload is one of the suite's longest steps on
    this 2-core machine (114 s in a fresh setup here, 158-167 s inside the suite). Without one in
    place (pytest run without ``./dev.sh``, archives not set up), the warm-up writes one here."""
    status, archive = warm_mod.archive_status()
    if status == warm_mod.IN_PLACE:
        assert archive is not None
        folder = archive.parent
        archives = [archive]
    else:
        folder = tmp_path / "archives"
        first = warm(folder)
        archives = list(folder.glob("spark-*.jsa"))
        assert len(archives) == 1, sorted(p.name for p in folder.iterdir())
        assert f"driver JVM class archive written: {archives[0]}" in first.stdout, first.stdout
    assert ca.is_complete(archives[0]) and archives[0].stat().st_size > 10_000_000
    assert not list(folder.glob("*.part"))

    again = warm(folder, "--if-needed")  # what every ./dev.sh command runs: no JVM, no output
    assert again.stdout == "" and "class archive" not in again.stderr, again.stderr[-2000:]
    assert warm(folder).stdout.startswith(f"driver JVM class archive in place: {archives[0]}")

    present = sorted(folder.glob("spark-*.jsa"))  # (the setup's folder may keep older installations' too)
    loaded = tmp_path / "classes.log"
    done = session(folder, f"-Xlog:class+load=info:file={loaded}", delta=tmp_path / "table")
    assert "delta 10" in done.stdout
    log = loaded.read_text()
    # Delta's classes come through Spark's own class loader (spark.jars): archived all the same.
    assert re.search(r"org\.apache\.spark\.sql\.delta\.DeltaLog source: shared objects file \(top\)", log), log[:2000]
    assert len(re.findall(r"source: shared objects file \(top\)", log)) > 5_000
    assert sorted(folder.glob("spark-*.jsa")) == present and archives[0] in present  # mapped, not written again
