"""A class data sharing archive for the local driver JVM: Spark's, Delta's and the JDK's classes
as a started JVM holds them, mapped from one file instead of read from the jars, parsed and
verified at every start. A cold process's session starts about 1.5-2 s sooner with it here, and
the JVM's first queries run sooner too (README, "spark-submit, Airflow, Databricks", and docs/performance.md:
``bench/process_bench.py --env-variant no-archive=SPARK_PURGE_CLASS_ARCHIVE=off``).

The archive is a JDK 13+ dynamic archive (``-XX:ArchiveClassesAtExit``), made once per
installation by the first local session that finds none: its JVM writes the classes it loaded
when it exits (about 10 s here; the process waits for it at exit, see ``finish_at_exit``), and
every later session maps it (``-XX:SharedArchiveFile``). ``./dev.sh setup`` makes it before any
other session, with a short workload (``spark_purge.warm``). The folder:

- ``$SPARK_PURGE_CLASS_ARCHIVE`` when set (``off``, ``0``, ``false`` or ``no``: no archive at all);
- else ``$XDG_CACHE_HOME/spark-purge/class-archive``, or ``~/.cache/spark-purge/class-archive``.

One archive per JVM and classpath (``archive_key``, ``session.archive_classpath``): a new JDK or
PySpark makes a new one; the JVM checks its archive against its classpath too and, on a mismatch,
runs without it. Classes from jars Spark loads itself (``spark.jars``: Delta's) are used from the
archive only when the class file at hand has the archived one's size and checksum.
Nothing is added when the JVM options already name class data sharing (``NAMED``), nor when the
launcher's ``java`` lacks the option (before JDK 13).

A JVM maps the archive's regions as they are in the file, so it must never see a part of one: a
JVM writes its archive's header (its magic number) last, after every region (checked on JDK 17:
the first bytes stay zero until the file is complete), and only a file that starts with the
magic is renamed into place (``promote``); the JVM writes to a ``.part`` file of its own. A file
cut short under a JVM that maps it would stop that JVM (SIGBUS): archives are only ever renamed
into place or unlinked, never rewritten.

    plan = archive_plan(java, classpath, given_options, java_accepts)   # None: no archive
    plan.options                              # JVM options: map the archive, or write one
    ... start the session ...
    finish_at_exit(plan, gateway_process)     # when this JVM writes one (see session.get_spark)
"""
from __future__ import annotations

import atexit
import hashlib
import logging
import os
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from spark_purge.progress import progress

log = logging.getLogger(__name__)

ARCHIVE_ENV = "SPARK_PURGE_CLASS_ARCHIVE"
OFF = frozenset({"off", "0", "false", "no"})
# A dynamic archive's header magic (0xf00baba8) as the file holds it (little-endian: on a
# big-endian machine no archive is ever complete to this check, so none is used): written last.
MAGIC = bytes.fromhex("a8ab0bf0")
# JVM options that already choose what class data sharing does: then nothing is added.
NAMED = ("-XX:SharedArchiveFile", "-XX:ArchiveClassesAtExit", "-Xshare", "-XX:SharedClassListFile", "-XX:DumpLoadedClassList", "AutoCreateSharedArchive")
# The JVM's notes on classes it cannot archive (signed jars, old class files) and on an archive it
# cannot use go to its stdout, which a local session shares with the command's own output.
QUIET = "-Xlog:cds=off,cds+dynamic=off"
# The option that tells whether the JVM can write one (an empty value writes nothing).
PROBE = "-XX:ArchiveClassesAtExit="
# A ``.part`` file younger than this is another process's archive being written: no second one
# (its JVM writes it when its process ends, which may be a test session's or a long run's hours).
WRITING_S = 2 * 3600
# A ``.part`` file older than this is left over (its JVM was killed while writing): removed.
LEFT_OVER_S = 24 * 3600
# Archives kept per folder (other classpaths: another virtualenv, an older PySpark): the newest.
KEEP = 3
# Bumped when what goes into the key changes.
KEY_FORMAT = "1"


@dataclass(frozen=True)
class ArchivePlan:
    """What a local session does about its archive: map ``final`` (``part`` None), or write
    ``part`` at exit, to be renamed to ``final``."""

    final: Path
    part: Path | None
    key: str

    @property
    def options(self) -> list[str]:
        if self.part is None:
            return [f"-XX:SharedArchiveFile={self.final}", QUIET]
        return [f"-XX:ArchiveClassesAtExit={self.part}", QUIET]


def archive_folder(environ: Mapping[str, str] = os.environ) -> Path | None:
    """The folder archives are kept in (module docstring), or None when they are turned off."""
    named = environ.get(ARCHIVE_ENV, "").strip()
    if named.lower() in OFF:
        return None
    if named:
        return Path(named).expanduser()
    cache = environ.get("XDG_CACHE_HOME") or os.path.join(environ.get("HOME") or os.path.expanduser("~"), ".cache")
    return Path(cache) / "spark-purge" / "class-archive"


def named(options: Iterable[str]) -> bool:
    """Whether any of ``options`` (JVM option strings) already chooses class data sharing."""
    return any(name in given for given in options for name in NAMED)


def _stamp(path: str) -> str:
    try:
        st = os.stat(path)
    except OSError:
        return f"{path}:missing"
    return f"{path}:{st.st_size}:{st.st_mtime_ns}"


def archive_key(java: str, classpath: Sequence[str]) -> str:
    """A key for the JVM (``java``, resolved) and the jars its classes come from (each file's
    path, size and modification time; a folder stands for the jars in it)."""
    parts = [KEY_FORMAT, _stamp(os.path.realpath(java))]
    for entry in classpath:
        path = Path(entry)
        jars = sorted(path.glob("*.jar")) if path.is_dir() else [path]
        parts += [_stamp(str(j)) for j in jars]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def is_complete(path: Path) -> bool:
    """Whether ``path`` is a whole archive: it starts with the header magic a JVM writes last."""
    try:
        with open(path, "rb") as f:
            return f.read(len(MAGIC)) == MAGIC
    except OSError:
        return False


def final_path(folder: Path, key: str) -> Path:
    """Where ``key``'s archive is kept in ``folder`` (its writers' ``.part`` files beside it)."""
    return folder / f"spark-{key}.jsa"


def promote(folder: Path, key: str) -> bool:
    """Rename a complete ``.part`` archive of ``key`` into place (an incomplete one is left for
    its JVM to finish, or for ``tidy`` once left over). True when the archive is in place."""
    final = final_path(folder, key)
    if final.exists():
        return True
    for part in sorted(folder.glob(f"spark-{key}.*.part")):
        if is_complete(part):
            try:
                os.replace(part, final)
            except OSError as exc:  # another process renamed it first, or the folder is read-only
                log.debug("could not move %s into place: %s", part, exc)
            if final.exists():
                log.info("driver JVM class archive in place: %s", final)
                return True
    return False


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:  # another process removed it meanwhile
        return 0.0


def _abandoned(part: Path) -> bool:
    """An empty claim whose process is gone (killed with its JVM): nobody will write it. (A JVM
    left writing alone recreates the file when it writes: it is moved into place all the same.)"""
    try:
        pid = int(part.name.split(".")[-2])
        if part.stat().st_size:
            return False
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except (OSError, ValueError, IndexError):  # unreadable, not ours to signal, or not our name
        return False
    return False


def tidy(folder: Path, key: str, now: float | None = None) -> bool:
    """Remove left-over ``.part`` files (older than ``LEFT_OVER_S``, or empty claims of processes
    gone: ``_abandoned``) and all but the newest
    ``KEEP`` archives; True when a ``.part`` of ``key`` is being written (younger than
    ``WRITING_S``)."""
    now = time.time() if now is None else now
    writing = False
    for part in folder.glob("spark-*.part"):
        try:
            age = now - part.stat().st_mtime
        except OSError:
            continue
        if age > LEFT_OVER_S or _abandoned(part):
            part.unlink(missing_ok=True)
        elif age < WRITING_S and part.name.startswith(f"spark-{key}."):
            writing = True
    archives = sorted(folder.glob("spark-*.jsa"), key=_mtime, reverse=True)
    for old in archives[KEEP:]:
        old.unlink(missing_ok=True)  # a JVM mapping it keeps its pages: unlinked, not cut short
    return writing


def archive_plan(
    java: str | None,
    classpath: Sequence[str],
    options: Iterable[str],
    accepts: Callable[[str], bool],
    environ: Mapping[str, str] = os.environ,
) -> ArchivePlan | None:
    """What the next local session does about its archive (module docstring); None: nothing
    (turned off, options naming class data sharing, no ``java``, one that cannot write an
    archive, an unusable folder, or another process writing this archive now)."""
    folder = archive_folder(environ)
    if folder is None or java is None or named(options) or not accepts(PROBE):
        return None
    key = archive_key(java, classpath)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        final = final_path(folder, key)
        if promote(folder, key):
            try:
                os.utime(final)  # the newest used: kept by ``tidy``
            except OSError:  # a folder shared read-only: used as it is
                pass
            return ArchivePlan(final, None, key)
        if tidy(folder, key):
            return None
        part = folder / f"spark-{key}.{os.getpid()}.part"
        part.touch()  # claims the writing (``tidy``); the JVM writes it anew at exit
    except OSError as exc:
        log.warning("no driver JVM class archive (%s: %s); sessions start without one", folder, exc)
        return None
    return ArchivePlan(final, part, key)


def abandon(plan: ArchivePlan | None) -> None:
    """Give up the ``.part`` claimed for a session that did not start."""
    if plan is not None and plan.part is not None:
        plan.part.unlink(missing_ok=True)


_pending: list[tuple[ArchivePlan, subprocess.Popen[bytes], float]] = []


def finish_at_exit(plan: ArchivePlan, jvm: subprocess.Popen[bytes] | None, timeout_s: float = 300.0) -> None:
    """When this process's JVM writes the archive: at exit (or at ``finish_pending``), end the
    JVM (its stdin closed, as PySpark's gateway ends when Python does), wait for it to write the
    archive, then move it into place. Another process moves it otherwise (``promote``): a process
    that ends without running its exit handlers leaves its JVM to write it alone."""
    if plan.part is None or jvm is None:
        return
    if not _pending:
        atexit.register(finish_pending)
    _pending.append((plan, jvm, timeout_s))


def writing() -> bool:
    """Whether a JVM of this process writes an archive when it ends (``finish_at_exit``)."""
    return bool(_pending)


def finish_pending() -> None:
    """Now rather than at exit: end the JVMs that write an archive, wait for them, and move their
    archives into place (a test session's teardown, whose worker process may end without its
    exit handlers). Their Spark sessions must be stopped: the JVM ends."""
    while _pending:
        _finish(*_pending.pop())


def _stop_spark(jvm: subprocess.Popen[bytes]) -> None:
    """Stop the Spark context still active on ``jvm`` (this process's gateway JVM) before that
    JVM ends: otherwise PySpark's accumulator server, still connected to it, prints an
    EOFError's traceback. A context on another JVM is left alone."""
    try:
        from pyspark import SparkContext

        active = SparkContext._active_spark_context
        if active is not None and getattr(SparkContext._gateway, "proc", None) is jvm:
            active.stop()
    except Exception as exc:  # the JVM ends next anyway
        log.debug("could not stop the Spark context before its JVM ends: %s", exc)


def _finish(plan: ArchivePlan, jvm: subprocess.Popen[bytes], timeout_s: float) -> None:
    assert plan.part is not None
    if jvm.poll() is None:
        _stop_spark(jvm)
        log.info("writing the driver JVM's class archive for faster starts (once): %s", plan.final)
        try:
            if jvm.stdin is not None:
                jvm.stdin.close()
            with progress("writing the driver JVM's class archive"):
                jvm.wait(timeout_s)
        except (OSError, subprocess.TimeoutExpired) as exc:
            log.warning("the driver JVM did not end within %.0f s while writing its class archive (%s)", timeout_s, exc)
            return
    if not promote(plan.final.parent, plan.key) and not is_complete(plan.part):
        plan.part.unlink(missing_ok=True)  # its JVM is gone without writing it: let another try


__all__ = [
    "ARCHIVE_ENV",
    "MAGIC",
    "NAMED",
    "ArchivePlan",
    "abandon",
    "archive_folder",
    "archive_key",
    "archive_plan",
    "final_path",
    "finish_at_exit",
    "finish_pending",
    "is_complete",
    "named",
    "promote",
    "tidy",
    "writing",
]
