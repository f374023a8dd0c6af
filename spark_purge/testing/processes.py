"""Run a command (a CLI, a fresh virtualenv's tool) as its own process group, and reap it.

A Python process that started a SparkSession has a JVM child; the group lets both be stopped
by the command's own id (``os.killpg(pid)``) when the command overruns or the test fails.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path


def python_env(**overrides: str | None) -> dict[str, str]:
    """This process's environment for a Python child running Spark locally: loopback, this
    interpreter for the Python workers, unbuffered output; ``overrides`` set (None: removed)."""
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable, PYTHONUNBUFFERED="1")
    for key, value in overrides.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def run_reaped(
    argv: Sequence[str], *, cwd: str | os.PathLike[str], env: Mapping[str, str], timeout_s: float
) -> subprocess.CompletedProcess[str]:
    """``argv`` in its own session, output captured; whatever is left of its group is killed
    (by the command's id) once it exits or after ``timeout_s`` (then ``TimeoutExpired``)."""
    proc = subprocess.Popen(
        list(argv), cwd=Path(cwd), env=dict(env), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout_s)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=30)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def spawn(argv: Sequence[str], *, cwd: str | os.PathLike[str], env: Mapping[str, str], log: Path) -> subprocess.Popen[bytes]:
    """``argv`` started in its own session (its group id is its pid), stdout and stderr to
    ``log``; stop it with :func:`kill_group`, also on failure."""
    with open(log, "wb") as out:
        return subprocess.Popen(list(argv), cwd=Path(cwd), env=dict(env), stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def kill_group(proc: subprocess.Popen[bytes], sig: signal.Signals = signal.SIGKILL) -> None:
    """Send ``sig`` to ``proc``'s process group (by its own id) and reap it."""
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass
    proc.wait(timeout=30)
