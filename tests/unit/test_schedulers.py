"""The scheduler definitions shipped in jobs/ (Airflow DAG, Databricks job) run the CLI the way
the package defines it: their command lines parse with spark-purge's own argparse, their entry
script exists, their Delta artifact is the session's, and they never overlap."""
from __future__ import annotations

import ast
import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from spark_purge.cli import build_parser
from spark_purge.session import DELTA_PACKAGE

REPO = Path(__file__).resolve().parents[2]
DAG_FILE = REPO / "jobs" / "airflow" / "spark_purge_dag.py"
DATABRICKS_JOB = REPO / "jobs" / "databricks" / "spark_purge_job.json"
AIRFLOW_PYTHON_ENV = "SPARK_PURGE_AIRFLOW_PYTHON"  # ./dev.sh exports it: .cache/airflow-venv/bin/python
# The Jobs API 2.1 fields the job definition may use (JobSettings, Task, JobCluster, CronSchedule).
JOB_KEYS = {"name", "description", "max_concurrent_runs", "schedule", "tasks", "job_clusters", "email_notifications", "tags", "timeout_seconds"}
TASK_KEYS = {"task_key", "description", "job_cluster_key", "existing_cluster_id", "spark_python_task", "python_wheel_task",
             "libraries", "max_retries", "min_retry_interval_millis", "retry_on_timeout", "timeout_seconds"}
SCHEDULE_KEYS = {"quartz_cron_expression", "timezone_id", "pause_status"}
CLUSTER_KEYS = {"spark_version", "node_type_id", "num_workers", "spark_conf", "custom_tags", "autoscale"}


def entry_script_args(script: str, params: list[str]) -> list[str]:
    """The CLI arguments a jobs/ entry script hands to ``spark_purge.cli.main``."""
    fixed = {"purge_once.py": ["run", "--once"], "purge_stream.py": ["run", "--follow"]}
    assert script in fixed, f"unknown entry script {script!r}"
    assert (REPO / "jobs" / script).is_file()
    assert f"main({json.dumps(fixed[script])[:-1]}, *sys.argv[1:]])" in (REPO / "jobs" / script).read_text()
    return fixed[script] + params


def wheel_name() -> str:
    setup = (REPO / "setup.py").read_text()
    name = re.search(r'name="([^"]+)"', setup)
    version = re.search(r'version="([^"]+)"', setup)
    assert name and version
    return f"{name.group(1).replace('-', '_')}-{version.group(1)}-py3-none-any.whl"


# ---- Databricks ----------------------------------------------------------------------------


def test_databricks_job_uses_only_known_jobs_api_fields() -> None:
    job = json.loads(DATABRICKS_JOB.read_text())
    assert set(job) <= JOB_KEYS, set(job) - JOB_KEYS
    assert set(job["schedule"]) <= SCHEDULE_KEYS and job["schedule"]["pause_status"] in ("PAUSED", "UNPAUSED")
    # Quartz: seconds minutes hours day-of-month month day-of-week (one of the day fields '?').
    assert len(job["schedule"]["quartz_cron_expression"].split()) in (6, 7) and "?" in job["schedule"]["quartz_cron_expression"]
    clusters = {c["job_cluster_key"]: c for c in job["job_clusters"]}
    for cluster in clusters.values():
        assert set(cluster) == {"job_cluster_key", "new_cluster"} and set(cluster["new_cluster"]) <= CLUSTER_KEYS
    for task in job["tasks"]:
        assert set(task) <= TASK_KEYS, set(task) - TASK_KEYS
        assert task["job_cluster_key"] in clusters
        assert task["max_retries"] >= 1 and isinstance(task["min_retry_interval_millis"], int)


def test_databricks_job_runs_one_cycle_at_a_time_with_the_package_wheel() -> None:
    job = json.loads(DATABRICKS_JOB.read_text())
    assert job["max_concurrent_runs"] == 1
    (task,) = job["tasks"]
    python = task["spark_python_task"]
    args = build_parser().parse_args(entry_script_args(Path(python["python_file"]).name, python["parameters"]))
    assert (args.command, args.once, args.follow, args.dry_run) == ("run", True, False, False)
    assert args.config.endswith(".yaml")
    assert [Path(lib["whl"]).name for lib in task["libraries"]] == [wheel_name()]


def test_databricks_job_parses_as_sdk_job_settings() -> None:
    from databricks.sdk.service import jobs  # a test dependency: this check always runs

    job = json.loads(DATABRICKS_JOB.read_text())
    settings = jobs.JobSettings.from_dict(job)
    assert settings.as_dict() == job  # nothing dropped: every field is one the SDK knows
    (task,) = settings.tasks or []
    assert isinstance(task.spark_python_task, jobs.SparkPythonTask) and task.max_retries == 2
    assert settings.max_concurrent_runs == 1 and isinstance(settings.schedule, jobs.CronSchedule)


# ---- Airflow -------------------------------------------------------------------------------


def dag_tree() -> ast.Module:
    source = DAG_FILE.read_text()
    compile(source, str(DAG_FILE), "exec")
    return ast.parse(source)


def call(tree: ast.Module, name: str) -> ast.Call:
    found = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == name]
    assert len(found) == 1, f"expected one {name}(...) in {DAG_FILE.name}"
    return found[0]


def literal(node: ast.expr, constants: dict[str, Any]) -> Any:
    """A literal, a module constant, or a list/dict of those; timedelta(...) as its keywords."""
    if isinstance(node, ast.Name):
        return constants[node.id]
    if isinstance(node, ast.List):
        return [literal(e, constants) for e in node.elts]
    if isinstance(node, ast.Dict):
        return {literal(k, constants): literal(v, constants) for k, v in zip(node.keys, node.values) if k is not None}
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        return (node.func.id, {k.arg: literal(k.value, constants) for k in node.keywords})
    return ast.literal_eval(node)


def kwargs(node: ast.Call, constants: dict[str, Any]) -> dict[str, Any]:
    return {k.arg: literal(k.value, constants) for k in node.keywords if k.arg is not None}


def module_constants(tree: ast.Module) -> dict[str, Any]:
    return {
        target.id: ast.literal_eval(stmt.value)
        for stmt in tree.body if isinstance(stmt, ast.Assign)
        for target in stmt.targets if isinstance(target, ast.Name)
    }


def test_airflow_dag_never_overlaps_and_retries() -> None:
    tree = dag_tree()
    dag = kwargs(call(tree, "DAG"), module_constants(tree))
    assert dag["max_active_runs"] == 1 and dag["catchup"] is False
    assert dag["default_args"]["retries"] >= 1
    assert dag["default_args"]["retry_delay"][0] == "timedelta"


def test_airflow_dag_submits_the_one_shot_entry_script_with_arguments_our_cli_accepts() -> None:
    tree = dag_tree()
    constants = module_constants(tree)
    task = kwargs(call(tree, "SparkSubmitOperator"), constants)
    script = re.search(r"'([^']+\.py)'", task["application"])  # the Variable's default path
    assert script, task["application"]
    args = build_parser().parse_args(entry_script_args(Path(script.group(1)).name, task["application_args"]))
    assert (args.command, args.once, args.follow) == ("run", True, False)
    assert args.config == constants["CONFIG"] and "var.value.get('spark_purge_config'" in args.config
    assert task["packages"] == DELTA_PACKAGE
    assert task["conf"]["spark.sql.extensions"] == "io.delta.sql.DeltaSparkSessionExtension"


# Loads the DAG in a real DagBag inside the Airflow environment (``./dev.sh airflow-env``) and
# prints what the test checks, as JSON on the last line.
DAGBAG_PROBE = """
import json, sys
from airflow.models import DagBag
bag = DagBag(dag_folder=sys.argv[1])
dag = bag.dags.get("spark_purge")
tasks = [] if dag is None else [[t.task_id, type(t).__name__, type(t).__module__, t.retries, t._conn_id] for t in dag.tasks]
print(json.dumps({"import_errors": {str(k): str(v) for k, v in bag.import_errors.items()}, "dags": sorted(bag.dag_ids),
                  "tasks": tasks, "max_active_runs": getattr(dag, "max_active_runs", None), "catchup": getattr(dag, "catchup", None)}))
"""


@pytest.mark.airflow
def test_airflow_dag_loads_in_a_real_dagbag(tmp_path: Path) -> None:
    python = os.environ.get(AIRFLOW_PYTHON_ENV)
    assert python and Path(python).is_file(), (
        f"{AIRFLOW_PYTHON_ENV} must name the Airflow environment's python: run ./dev.sh airflow-env (or ./dev.sh test -m airflow)"
    )
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
           "AIRFLOW__CORE__DAGS_FOLDER": str(DAG_FILE.parent)}
    done = subprocess.run([python, "-c", DAGBAG_PROBE, str(DAG_FILE)], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["import_errors"] == {}
    assert found["dags"] == ["spark_purge"]
    assert found["tasks"] == [
        ["purge_once", "SparkSubmitOperator", "airflow.providers.apache.spark.operators.spark_submit", 2, "spark_default"]
    ]
    assert (found["max_active_runs"], found["catchup"]) == (1, False)
