"""``spark_purge.server`` without Spark: a server process whose runner is a small fake command
(it prints, fails, or sleeps until interrupted), and the real client. What a real Spark session
does behind it is ``tests/integration/test_server.py``'s."""
from __future__ import annotations

import io
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from spark_purge import __version__
from spark_purge.cli import main
from spark_purge.errors import ConfigError
from spark_purge.server import PROTOCOL, ServerError, check_socket_path, forward

# The fake server: ``Server`` with a runner that acts on its argv, in the main thread of a
# process of its own (the client-gone interrupt is a SIGINT to that thread, as in production).
FAKE = r"""
import logging, sys, time
from pathlib import Path
from spark_purge.server import Server

def run(argv):
    logging.basicConfig(stream=sys.stderr, format="%(levelname)s %(message)s")
    if argv[0] == "echo":
        print("out:" + " ".join(argv[1:]))
        print("err:" + " ".join(argv[1:]), file=sys.stderr)
        logging.getLogger("spark_purge.fake").warning("logged")
        return 0
    if argv[0] == "fail":
        return int(argv[1])
    if argv[0] == "sleep":
        try:  # before the print: the client goes away once it reads it
            print("sleeping", flush=True)
            time.sleep(120)
        except KeyboardInterrupt:
            Path(argv[1]).write_text("interrupted")
            raise
        return 0
    raise SystemExit(2)

def idle():  # with an idle log: every call appends a line; the second one fails
    with open(sys.argv[2], "a") as f:
        f.write("idle\n")
    if Path(sys.argv[2]).read_text().count("idle") == 2:
        raise RuntimeError("keep-warm broke")

server = Server(sys.argv[1], run, idle=idle if len(sys.argv) > 2 else None, idle_every=0.2)
server.request_timeout = 1.0
server.bind()
print("ready", flush=True)
try:
    server.serve_forever()
except KeyboardInterrupt:
    print(f"stopped after {server.served}", flush=True)
"""


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    # pytest's tmp_path may be longer than a Unix socket's 107 bytes
    import tempfile

    with tempfile.TemporaryDirectory(prefix="sp-sock-") as d:
        yield Path(d)


def start_fake(path: Path, cwd: Path, *extra: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", FAKE, str(path), *extra], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2])),
    )  # fmt: skip
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready", proc.stderr.read() if proc.stderr else ""
    return proc


@pytest.fixture
def fake(sock_dir: Path) -> Iterator[tuple[Path, subprocess.Popen[str]]]:
    path = sock_dir / "s"
    proc = start_fake(path, sock_dir)
    try:
        yield path, proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)


def test_output_streams_and_exit_code_come_back(fake: tuple[Path, subprocess.Popen[str]], sock_dir: Path) -> None:
    path, _ = fake
    out, err = io.StringIO(), io.StringIO()
    assert forward(str(path), ["echo", "a", "b"], out, err, cwd=str(sock_dir)) == 0
    assert out.getvalue() == "out:a b\n"
    assert err.getvalue() == "err:a b\nWARNING logged\n"
    assert forward(str(path), ["fail", "4"], io.StringIO(), io.StringIO(), cwd=str(sock_dir)) == 4
    assert forward(str(path), ["unknown"], io.StringIO(), io.StringIO(), cwd=str(sock_dir)) == 2  # SystemExit(2)


def test_the_socket_is_owner_only(fake: tuple[Path, subprocess.Popen[str]]) -> None:
    path, _ = fake
    assert path.stat().st_mode & 0o777 == 0o600


def test_another_working_directory_is_refused(fake: tuple[Path, subprocess.Popen[str]], tmp_path: Path, sock_dir: Path) -> None:
    path, _ = fake
    err = io.StringIO()
    assert forward(str(path), ["echo", "x"], io.StringIO(), err, cwd=str(tmp_path)) == 2
    assert f"the server works in {os.path.realpath(sock_dir)}, this command was run in {os.path.realpath(tmp_path)}" in err.getvalue()


def raw(path: Path, request: object) -> list[dict[str, object]]:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.connect(str(path))
        conn.sendall(json.dumps(request).encode() + b"\n")  # and stays open, as a client does
        frames = [json.loads(line) for line in conn.makefile("r")]
    return frames


def test_another_version_and_garbage_are_refused(fake: tuple[Path, subprocess.Popen[str]], sock_dir: Path) -> None:
    path, _ = fake
    cwd = os.path.realpath(sock_dir)
    frames = raw(path, {"v": PROTOCOL, "version": "0.0.0-other", "argv": ["echo"], "cwd": cwd})
    assert frames[-1] == {"x": 2}
    assert f"this server runs spark-purge {__version__}" in str(frames[0]["e"]) and "'0.0.0-other'" in str(frames[0]["e"])
    frames = raw(path, {"argv": "not a list"})
    assert frames == [{"e": "error: the request has no argv list (is the client a spark-purge?)\n"}, {"x": 2}]
    ok = raw(path, {"v": PROTOCOL, "version": __version__, "argv": ["echo", "still", "serving"], "cwd": cwd})
    assert ok[0] == {"o": "out:still serving\n"} and ok[-1] == {"x": 0}


def test_a_client_that_goes_away_interrupts_its_command_and_the_server_serves_on(
    fake: tuple[Path, subprocess.Popen[str]], sock_dir: Path
) -> None:
    path, proc = fake
    marker = sock_dir / "marker"
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(str(path))
    conn.sendall(json.dumps({"v": PROTOCOL, "version": __version__, "argv": ["sleep", str(marker)], "cwd": os.path.realpath(sock_dir)}).encode() + b"\n")
    assert json.loads(conn.makefile("r").readline()) == {"o": "sleeping\n"}  # the command runs
    conn.close()  # as a killed client's connection ends
    deadline = time.monotonic() + 60
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    if not marker.exists():  # seen once in a full suite (stop 83): say what the server printed
        proc.kill()
        out, err = proc.communicate(timeout=30)
        pytest.fail(f"the command was not interrupted within 60 s of its client going away; the server's stdout {out!r}, stderr {err!r}")
    assert marker.read_text() == "interrupted"
    out = io.StringIO()
    assert forward(str(path), ["echo", "next"], out, io.StringIO(), cwd=str(sock_dir)) == 0  # the server is still up
    assert out.getvalue() == "out:next\n"
    assert proc.poll() is None


def test_sigterm_stops_the_server_and_removes_its_socket(fake: tuple[Path, subprocess.Popen[str]], sock_dir: Path) -> None:
    path, proc = fake
    assert forward(str(path), ["echo"], io.StringIO(), io.StringIO(), cwd=str(sock_dir)) == 0
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=30)
    assert out.strip() == "stopped after 1"
    assert not path.exists()


def test_a_stale_socket_is_replaced_and_a_live_one_refused(sock_dir: Path) -> None:
    path = sock_dir / "s"
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(path))
    stale.close()  # the file stays, nobody listens
    proc = start_fake(path, sock_dir)
    try:
        second = subprocess.run([sys.executable, "-c", FAKE, str(path)], cwd=sock_dir, capture_output=True, text=True, timeout=60)
        assert second.returncode == 1
        assert f"--socket: a spark-purge server already answers at {path}" in second.stderr
        assert forward(str(path), ["echo"], io.StringIO(), io.StringIO(), cwd=str(sock_dir)) == 0
    finally:
        proc.kill()
        proc.wait(timeout=30)


def test_no_server_is_a_clear_error(sock_dir: Path) -> None:
    with pytest.raises(ServerError, match=r"no spark-purge server answers at .*/nobody \(No such file or directory\); start one with"):
        forward(str(sock_dir / "nobody"), ["plan"], io.StringIO(), io.StringIO())


def test_socket_path_checks() -> None:
    with pytest.raises(ConfigError, match="a Unix socket's path holds at most 107"):
        check_socket_path("/" + "x" * 200)
    with pytest.raises(ConfigError, match="--socket: expected the path"):
        check_socket_path("")
    assert check_socket_path("rel/s") == os.path.join(os.getcwd(), "rel/s")


def test_cli_forwards_and_refuses_what_a_server_cannot_run(sock_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPARK_PURGE_SERVER", raising=False)
    assert main(["run", "--follow", "-c", "x.yaml", "--server", str(sock_dir / "s")]) == 2
    assert "run --follow never ends" in capsys.readouterr().err
    assert main(["plan", "-c", "x.yaml", "--master", "local[1]", "--server", str(sock_dir / "s")]) == 2
    assert "--master: a command run on a server" in capsys.readouterr().err
    monkeypatch.setenv("SPARK_PURGE_SERVER", str(sock_dir / "nobody"))
    assert main(["plan", "-c", "x.yaml"]) == 5  # the environment's server, which is not there
    assert f"no spark-purge server answers at {sock_dir / 'nobody'}" in capsys.readouterr().err


def test_idle_runs_the_keep_warm_job_between_commands_and_survives_its_failure(sock_dir: Path) -> None:
    path, idle_log = sock_dir / "s", sock_dir / "idle.log"
    proc = start_fake(path, sock_dir, str(idle_log))
    try:
        deadline = time.monotonic() + 30
        while (not idle_log.exists() or idle_log.read_text().count("idle") < 3) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert idle_log.read_text().count("idle") >= 3  # on, after the failing second call
        assert forward(str(path), ["fail", "3"], io.StringIO(), io.StringIO(), cwd=str(sock_dir)) == 3
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
        assert "the keep-warm job failed: keep-warm broke" in err
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)


def test_serve_checks_its_arguments_before_binding_or_starting_spark(sock_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = sock_dir / "bad.yaml"
    bad.write_text("kafka: {}\n")
    assert main(["serve", "--socket", str(sock_dir / "s"), "-c", str(bad)]) == 2
    assert "kafka.bootstrap_servers: required key is missing" in capsys.readouterr().err
    assert main(["serve", "--socket", str(sock_dir / "s"), "--keep-warm", "-1"]) == 2
    assert "--keep-warm: expected seconds >= 0, got -1.0" in capsys.readouterr().err
    assert main(["serve", "--socket", "/" + "x" * 200]) == 2
    assert "a Unix socket's path holds at most 107" in capsys.readouterr().err
    assert not (sock_dir / "s").exists()


def test_a_server_runs_no_server_of_its_own(sock_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from spark_purge.cli import _served

    assert _served(["serve", "--socket", str(sock_dir / "inner")]) == 2
    assert "serve: a server runs no server of its own" in capsys.readouterr().err
    assert not (sock_dir / "inner").exists()


def test_a_silent_client_is_dropped_and_holds_no_one_up(fake: tuple[Path, subprocess.Popen[str]], sock_dir: Path) -> None:
    path, proc = fake
    silent = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    silent.connect(str(path))  # says nothing; the fake server waits 1 s for a request
    try:
        t0 = time.monotonic()
        out = io.StringIO()
        assert forward(str(path), ["echo", "after"], out, io.StringIO(), cwd=str(sock_dir)) == 0
        assert out.getvalue() == "out:after\n"
        assert time.monotonic() - t0 < 30
        assert silent.recv(1) == b""  # dropped
    finally:
        silent.close()
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert "a client sent no request in 1 s; dropped" in err
