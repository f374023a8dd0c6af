"""A long-lived driver for the command line: ``spark-purge serve`` keeps one Spark session warm
and runs the commands other ``spark-purge`` processes hand it over a Unix socket.

    spark-purge serve --socket /run/spark-purge/sock [-c conf/prod.yaml] [--master local[2]]
    spark-purge run --once -c conf/prod.yaml --server /run/spark-purge/sock   # or SPARK_PURGE_SERVER=...

Why: a scheduled purge (cron, Airflow, a Databricks task) that starts ``spark-purge`` as a
process pays for a new JVM every time: its start, and its JIT compiling Spark's and Delta's
code while the cycle runs. At 10,000 partitions x 10,000 groups on a 2-core machine that is most
of a cold ``plan``'s 19-29 s (issue 12; docs/performance.md). A command run by a server whose
session has planned before takes what a steady cycle takes. The server is the same idea as a
Databricks job on an all-purpose cluster, on one machine.

What a client gets, and what it does not:

- The command runs in the server's process, with the server's Spark session, its environment
  (``env:`` secrets are resolved from the *server's* environment, ``spark_conf:`` ones from its
  session) and its working directory. A client whose working directory is another is refused
  (exit 2), since relative paths in its config and arguments would resolve elsewhere.
- Output streams back as the command prints it: stdout to the client's stdout, our log lines
  and the command's messages to its stderr; the exit code is the command's. Spark's own log
  lines (log4j, in the JVM) stay in the server's log.
- Commands run one at a time, in the order they connect; a client waits for the one before it.
  ``run --follow`` is refused (it never ends: run it as a job of its own), and so is
  ``--master`` (the server's session has its master).
- A client that goes away (Ctrl-C, a killed task) interrupts its command as Ctrl-C interrupts a
  local one: a running cycle's stream is stopped, and the next run resumes from its checkpoint.
- A client and a server of different spark-purge versions refuse each other: the code that
  decides what is deleted is the server's, and the operator asked for the client's.
- The socket is created owner-only (mode 0600): only the server's user can hand it commands.
  The server stops on SIGINT or SIGTERM, removing its socket, or when its Spark context stops.

The protocol: the client sends one JSON line, ``{"v": PROTOCOL, "version": spark-purge's
version, "argv": [...], "cwd": "..."}``; the server answers with JSON lines ``{"o": text}``
(stdout), ``{"e": text}`` (stderr), and last ``{"x": exit code}``.
"""
from __future__ import annotations

import json
import logging
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from types import FrameType
from typing import IO, Any, cast

from spark_purge import __version__
from spark_purge.errors import ConfigError, SparkPurgeError
from spark_purge.logs import LEVELLED

log = logging.getLogger(__name__)

PROTOCOL = 1
ENV = "SPARK_PURGE_SERVER"
MAX_REQUEST = 1 << 20
REQUEST_TIMEOUT_S = 30
# sockaddr_un's sun_path is 108 bytes on Linux, with its terminating NUL.
MAX_SOCKET_PATH = 107
EXIT_USAGE, EXIT_OTHER, EXIT_INTERRUPTED = 2, 5, 130


class ServerError(SparkPurgeError):
    """The server could not be reached, or ended the connection before the command's exit code."""


def check_socket_path(path: str) -> str:
    """``path`` as an absolute path a Unix socket can have, else a ``ConfigError`` naming it."""
    if not path:
        raise ConfigError("--socket: expected the path of a Unix socket, got ''")
    absolute = os.path.abspath(path)
    if len(os.fsencode(absolute)) > MAX_SOCKET_PATH:
        raise ConfigError(f"--socket: {absolute!r} is {len(os.fsencode(absolute))} bytes; a Unix socket's path holds at most {MAX_SOCKET_PATH}")
    return absolute


# ---------------------------------------------------------------------------------------------
# client


def forward(path: str, argv: Sequence[str], stdout: IO[str] | None = None, stderr: IO[str] | None = None, cwd: str | None = None) -> int:
    """Run ``argv`` (a ``spark-purge`` command line) on the server at ``path``; its output to
    ``stdout`` / ``stderr`` as it comes; its exit code. Ctrl-C here interrupts the command."""
    out = stdout if stdout is not None else sys.stdout
    err = stderr if stderr is not None else sys.stderr
    target = check_socket_path(path)
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        try:
            conn.connect(target)
        except OSError as exc:
            raise ServerError(
                f"no spark-purge server answers at {target} ({exc.strerror or exc}); start one with "
                f"`spark-purge serve --socket {target}`, or run without --server / {ENV}"
            ) from None
        request = {"v": PROTOCOL, "version": __version__, "argv": list(argv), "cwd": os.path.realpath(cwd or os.getcwd())}
        conn.sendall(_line(request))
        for frame in _frames(conn):
            if "o" in frame:
                out.write(frame["o"])
                out.flush()
            elif "e" in frame:
                err.write(frame["e"])
                err.flush()
            elif "x" in frame:
                return int(frame["x"])
        raise ServerError(f"the spark-purge server at {target} closed the connection before the command ended (it stopped or failed: see its log)")
    finally:
        conn.close()  # on Ctrl-C too: the server sees the connection end and interrupts the command


def _frames(conn: socket.socket) -> Iterator[dict[str, Any]]:
    """The JSON lines read from ``conn`` until it ends."""
    with conn.makefile("r", encoding="utf-8", newline="\n") as stream:
        for line in stream:
            if line.strip():
                yield json.loads(line)


# ---------------------------------------------------------------------------------------------
# server


class _FrameWriter:
    """A text stream whose lines go to the client as ``{key: text}`` frames (whole lines, or
    what is there at ``flush``); once the client is gone, to ``fallback`` (the server's own
    stream), so that nothing written is lost."""

    def __init__(self, conn: socket.socket, key: str, lock: threading.Lock, fallback: IO[str]) -> None:
        self._conn, self._key, self._lock, self._fallback = conn, key, lock, fallback
        self._pending = ""
        self.closed_client = False

    def write(self, text: str) -> int:
        with self._lock:
            self._pending += text
            cut = self._pending.rfind("\n") + 1
            if cut:
                self._send(self._pending[:cut])
                self._pending = self._pending[cut:]
        return len(text)

    def flush(self) -> None:
        with self._lock:
            if self._pending:
                self._send(self._pending)
                self._pending = ""

    def _send(self, text: str) -> None:
        if not self.closed_client:
            try:
                self._conn.sendall(_line({self._key: text}))
                return
            except OSError:
                self.closed_client = True
        self._fallback.write(text)
        self._fallback.flush()

    def isatty(self) -> bool:  # no spinner (spark_purge.progress) for a socket
        return False

    def writable(self) -> bool:
        return True

    @property
    def encoding(self) -> str:
        return "utf-8"


Runner = Callable[[Sequence[str]], int]


class Server:
    """Serves commands on a bound Unix socket, one at a time, in the calling (main) thread.

    ``run`` runs one command line in this process and gives its exit code (the CLI's
    ``main(argv, forward=False)``); ``alive`` says whether the server can go on serving (its
    Spark context still running)."""

    def __init__(
        self,
        path: str,
        run: Runner,
        alive: Callable[[], bool] = lambda: True,
        idle: Callable[[], object] | None = None,
        idle_every: float = 0.0,
    ) -> None:
        self.path = check_socket_path(path)
        self._run, self.alive = run, alive
        # ``idle`` runs after every ``idle_every`` seconds without a command (keepwarm.touch)
        self.idle, self.idle_every = idle, idle_every
        self._sock: socket.socket | None = None
        self._state = threading.Lock()
        self._current: socket.socket | None = None  # the connection whose command runs
        self._client_gone = False
        self._main = threading.get_ident()
        self.served = 0
        self.request_timeout: float = REQUEST_TIMEOUT_S

    def bind(self) -> None:
        """Create the socket (owner-only). A socket file nobody answers on is a stale one and is
        replaced; one a server answers on is an error naming the path."""
        if os.path.exists(self.path):
            probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                probe.connect(self.path)
            except OSError:
                os.unlink(self.path)  # stale: its server is gone
            else:
                raise ConfigError(f"--socket: a spark-purge server already answers at {self.path}")
            finally:
                probe.close()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            sock.bind(self.path)
        except OSError as exc:
            sock.close()
            raise ConfigError(f"--socket: cannot create a Unix socket at {self.path}: {exc.strerror or exc}") from None
        finally:
            os.umask(old)
        sock.listen(16)
        self._sock = sock

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass

    def serve_forever(self) -> None:
        """Accept and run commands until SIGINT / SIGTERM, or until ``alive()`` says no."""
        assert self._sock is not None, "bind() first"
        previous = signal.signal(signal.SIGTERM, _raise_interrupt)
        try:
            while self.alive():
                self._sock.settimeout(self.idle_every if self.idle is not None and self.idle_every > 0 else None)
                try:
                    conn, _ = self._sock.accept()
                except KeyboardInterrupt:
                    if self._take_client_interrupt():
                        continue  # a late interrupt meant for the command that just ended
                    raise
                except TimeoutError:
                    self._idle()
                    continue
                try:
                    self.handle(conn)
                    self._take_client_interrupt()  # one the command's own Ctrl-C handling took
                except KeyboardInterrupt:
                    if not self._take_client_interrupt():
                        raise
                finally:
                    _end(conn)
        finally:
            signal.signal(signal.SIGTERM, previous)
            self.close()

    def _idle(self) -> None:
        assert self.idle is not None
        try:
            self.idle()
        except Exception as exc:  # a failed keep-warm job costs the next command its warmth only
            log.warning("the keep-warm job failed: %s", str(exc).splitlines()[0] if str(exc) else type(exc).__name__)

    def _take_client_interrupt(self) -> bool:
        with self._state:
            gone, self._client_gone = self._client_gone, False
            return gone

    def handle(self, conn: socket.socket) -> None:
        """Read one request from ``conn``, run it, and send its output and exit code."""
        t0 = time.monotonic()
        conn.settimeout(self.request_timeout)  # a client that connects and says nothing holds no one up
        try:
            request = _read_request(conn)
            refusal = _refusal(request)
            if refusal:
                log.warning("refused %s: %s", " ".join(str(a) for a in request["argv"]), refusal)
        except TimeoutError:
            log.warning("a client sent no request in %g s; dropped", self.request_timeout)
            return
        except ValueError as exc:
            refusal = str(exc)
        if refusal:
            _send(conn, {"e": f"error: {refusal}\n"})
            _send(conn, {"x": EXIT_USAGE})
            return
        conn.settimeout(None)
        argv = [str(a) for a in request["argv"]]
        lock = threading.Lock()
        out = _FrameWriter(conn, "o", lock, sys.stdout)
        err = _FrameWriter(conn, "e", lock, sys.stderr)
        watcher = threading.Thread(target=self._watch, args=(conn,), name="spark-purge-client-watch", daemon=True)
        code = EXIT_OTHER
        try:
            with _redirected(cast(IO[str], out), cast(IO[str], err)):
                with self._state:
                    self._current = conn
                watcher.start()
                try:
                    code = self._run(argv)
                except SystemExit as exc:  # argparse's --help
                    code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else EXIT_USAGE)
                except KeyboardInterrupt:
                    code = EXIT_INTERRUPTED
                    if not self._take_client_interrupt():
                        raise
                finally:
                    with self._state:
                        self._current = None
        finally:
            out.flush()
            err.flush()
            self.served += 1
            gone = out.closed_client or err.closed_client
            log.info("served %s: exit %s in %.1f s%s", " ".join(argv), code, time.monotonic() - t0, " (client gone)" if gone else "")
        with lock:
            if not out.closed_client:
                _send(conn, {"x": code})

    def _watch(self, conn: socket.socket) -> None:
        """Interrupt the running command when its client goes away (its connection ends)."""
        try:
            while conn.recv(4096):
                pass
        except OSError:
            pass
        with self._state:
            if self._current is conn:
                self._client_gone = True
                signal.pthread_kill(self._main, signal.SIGINT)  # as Ctrl-C would, in the main thread


def _end(conn: socket.socket) -> None:
    """Close ``conn``; shut down first, which also wakes its watcher's ``recv``."""
    try:
        conn.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    conn.close()


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _read_request(conn: socket.socket) -> dict[str, Any]:
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(65536)
        if not chunk:
            break
        data += chunk
        if len(data) > MAX_REQUEST:
            raise ValueError(f"a request of over {MAX_REQUEST} bytes")
    try:
        request = json.loads(data)
    except ValueError:
        raise ValueError("the request is not one JSON line (is the client a spark-purge?)") from None
    if not isinstance(request, dict) or not isinstance(request.get("argv"), list):
        raise ValueError("the request has no argv list (is the client a spark-purge?)")
    return request


def _refusal(request: dict[str, Any]) -> str | None:
    """Why the server will not run ``request``, or None."""
    if request.get("v") != PROTOCOL or request.get("version") != __version__:
        return (
            f"this server runs spark-purge {__version__} (protocol {PROTOCOL}); the client is "
            f"{request.get('version')!r} (protocol {request.get('v')!r}): use the same version on both sides"
        )
    here = os.path.realpath(os.getcwd())
    there = request.get("cwd")
    if there != here:
        return (
            f"the server works in {here}, this command was run in {there}: relative paths in its config and "
            f"arguments would resolve elsewhere; run it from {here}, or start a server there"
        )
    return None


def _line(message: dict[str, Any]) -> bytes:
    """``message`` as one line of the protocol (module docstring)."""
    return json.dumps(message).encode() + b"\n"


def _send(conn: socket.socket, frame: dict[str, Any]) -> None:
    try:
        conn.sendall(_line(frame))
    except OSError:
        pass


@contextmanager
def _redirected(out: IO[str], err: IO[str]) -> Iterator[None]:
    """sys.stdout / sys.stderr to ``out`` / ``err``, and the root logger's handlers removed so that
    the command's ``configure_logging`` writes to ``err``; all put back after."""
    root = logging.getLogger()
    handlers, levels = root.handlers[:], {name: logging.getLogger(name).level for name in LEVELLED}
    saved = sys.stdout, sys.stderr
    for handler in handlers:
        root.removeHandler(handler)
    sys.stdout, sys.stderr = out, err
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved
        for handler in root.handlers[:]:
            root.removeHandler(handler)
        for handler in handlers:
            root.addHandler(handler)
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)
