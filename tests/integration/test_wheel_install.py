"""A built wheel, installed into a fresh virtualenv outside the checkout, runs ``spark-purge plan``
against the real broker: Delta comes from Maven Central through ``spark.jars.packages`` (no jar
folder, nothing from the repository).

Minutes, not seconds (a virtualenv with PySpark, Ivy's first resolution), so it runs only when
selected: ``./dev.sh test tests/integration/test_wheel_install.py -m wheel``. pip's cache and
Ivy's (``~/.ivy2.5.2``) are reused between runs.
"""
from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from kafka import KafkaAdminClient

from spark_purge.session import DELTA_JARS_ENV, EXTRA_JARS_ENV
from spark_purge.testing.cluster import LocalKafka
from spark_purge.testing.processes import python_env, run_reaped
from spark_purge.testing.workload import commit_topic, produce, purge_config_dict

pytestmark = pytest.mark.wheel
REPO_ROOT = Path(__file__).resolve().parents[2]
STEP_TIMEOUT_S = 900


def step(argv: list[str], cwd: Path, **env: str | None) -> str:
    done = run_reaped(argv, cwd=cwd, env=python_env(**env), timeout_s=STEP_TIMEOUT_S)
    assert done.returncode == 0, f"{argv} exited {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_wheel_in_a_fresh_venv_plans_against_the_broker(
    kafka_cluster: LocalKafka, admin: KafkaAdminClient, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    step([sys.executable, "-m", "pip", "wheel", ".", "--no-deps", "--quiet", "-w", str(tmp_path / "dist")], REPO_ROOT)
    (wheel,) = (tmp_path / "dist").glob("spark_purge-*.whl")
    venv = tmp_path / "venv"
    step([sys.executable, "-m", "venv", str(venv)], tmp_path)
    python = str(venv / "bin" / "python")
    step([python, "-m", "pip", "install", "--quiet", str(wheel)], tmp_path)
    # The package is the wheel's, not the checkout's; no jar folder is set.
    where = step([python, "-c", "import spark_purge; print(spark_purge.__file__)"], tmp_path, PYTHONPATH=None)
    assert where.startswith(str(venv)), where

    topic = new_topic("wheel")
    produce(kafka_cluster.bootstrap_servers, topic, [10])
    commit_topic(admin, f"{topic}-g", topic, [7])
    config = tmp_path / "plan.yaml"
    config.write_text(yaml.safe_dump(purge_config_dict(tmp_path, kafka_cluster.bootstrap_servers, re.escape(topic), [f"{topic}-g"])))
    out = step(
        [str(venv / "bin" / "spark-purge"), "plan", "-c", str(config)],
        tmp_path,
        PYTHONPATH=None, PYSPARK_PYTHON=python, **{DELTA_JARS_ENV: None, EXTRA_JARS_ENV: None},
    )
    lines = out.splitlines()
    assert lines[-2] == "1 partitions planned, 1 actionable, 7 records would be deleted (0 with nothing to do hidden; --all shows them)", out
    assert lines[-1].startswith("lease: purger cluster-") and "never leased" in lines[-1], out  # plan takes no lease
    assert re.match(rf"{re.escape(topic)} +0 +\d+ +0 +10 +7 +7 +group +{re.escape(topic)}-g +yes ", lines[2]), out
