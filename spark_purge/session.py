"""The SparkSession factory: local mode with Delta configured, or whatever the cluster already
has (Databricks, or ``spark-submit --packages io.delta:...``).

Where Delta's jars come from in local mode (the package never looks for a source checkout):
1. ``jars_dir``, the argument, else ``SPARK_PURGE_DELTA_JARS``: a folder of jars put on
   ``spark.jars`` (``./dev.sh`` exports it as the checkout's ``.cache/jars/delta``, which
   ``./dev.sh setup`` fills from Maven Central: no download at run time);
2. neither set: ``DELTA_PACKAGE`` on ``spark.jars.packages``, which Spark resolves (with its
   dependencies) from Maven Central through Ivy into ``~/.ivy2.5.2`` on first use: what a
   pip-installed wheel without a checkout uses. (delta-spark's ``configure_spark_with_delta_pip``
   would ask for the jar of the installed Python package's version, 4.4.1, which Maven Central
   does not have; the 4.4.0 jars are the newest and run under delta-spark 4.4.1.)
On a cluster (``spark-submit``, Databricks) nothing is added: Delta is already on the classpath.

Settings of a local session (each ``conf`` entry wins over them): loopback only, UTC, the UI
off, 2 shuffle partitions, 2 Delta snapshot partitions, and adaptive query execution off (a
batch's queries are small; with it, each of their shuffle and broadcast stages is a Spark job
of its own, and a streaming query's micro-batches run without it anyway), and room for
``CODEGEN_CACHE_ENTRIES`` generated classes in Spark's code cache (100 by default: fewer than a
batch compiles, so each batch compiled them all again), and ``IDLE_PYTHON_WORKERS`` idle Python
worker per kind kept for reuse (all of them by default), and no byte cap on the Arrow batches
a Python task reads (``ARROW_BATCH_BYTES``: with one, Spark measures each batch after every row,
quadratic in its rows where a list column is null), and local paths through Hadoop's raw local
file system (``RAW_LOCAL_FS``: no ``.crc`` side files, half the processes Hadoop starts per
written file and rename), or through the package's own (``NIO_LOCAL_FS``: no processes at all)
when ``SPARK_PURGE_LOCAL_FS_JAR`` names its jar (``local_fs``).

The local driver JVM runs the serial garbage collector (``GC_OPTION``: about 300 MB less
resident than G1 for the default 1 GB heap, no slower here), with a heap that follows its live
data (``HEAP_OPTIONS``), unless the options name a collector; and it gives the C heap's free
pages back to the OS every few seconds (``TRIM_OPTION``) when that JVM has the option (JDK
17.0.9 and later; ``java_accepts`` asks the ``java`` Spark's launcher runs) and the options do not
name it. It compiles Spark's large generated methods too (``HUGE_METHODS_OPTION``), unless the
options say otherwise. It maps its classes from a class data sharing archive, which the first local session's
JVM writes when its process ends (``spark_purge.class_archive``; ``SPARK_PURGE_CLASS_ARCHIVE``).

Logging in local mode: the driver JVM reads the package's ``log4j2.properties`` (Spark at WARN,
its known start-up noise at ERROR, on stderr) unless ``spark.driver.extraJavaOptions`` (in
``conf``) or ``SPARK_SUBMIT_OPTS`` / ``JAVA_TOOL_OPTIONS`` already name a
``-Dlog4j2.configurationFile``; on a cluster the cluster's own logging applies.

Extra jars (local mode too), e.g. Spark's Kafka connector for a test that runs a real Structured
Streaming consumer: ``extra_jars``, the argument, plus ``SPARK_PURGE_EXTRA_JARS`` (entries
separated by ``,`` or the OS path separator), each a jar file or a folder of jars.
"""
from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from importlib import resources
from pathlib import Path

from pyspark import SparkConf, SparkContext
from pyspark.sql import SparkSession

from spark_purge import class_archive, py4j_calls
from spark_purge.errors import ConfigError

DELTA_JARS_ENV = "SPARK_PURGE_DELTA_JARS"
EXTRA_JARS_ENV = "SPARK_PURGE_EXTRA_JARS"
DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"
# The Delta artifact a local session resolves when no jar folder is set; the same version as
# build/jvm/delta/pom.xml and the README's `spark-submit --packages` lines (a unit test checks).
DELTA_PACKAGE = "io.delta:delta-spark_4.2_2.13:4.4.0"
LOG4J2_OPTION = "-Dlog4j2.configurationFile"
# A local driver's collector. The default (G1) kept 1.6 GB resident for a 1 GB heap in a 1k x 1k
# cycle; the serial collector 1.3 GB, with less CPU and no slower cycle (``cycle_bench.py``, README).
GC_OPTION = "-XX:+UseSerialGC"
GC_CHOSEN = re.compile(r"-XX:\+Use\w*GC\b")
# With it, a heap that stays near its live data. By default the serial collector keeps a third of
# the heap as its young generation (all of it touched, so resident, between two collections),
# grows the heap while less than 40 % of it is free and gives memory back only when more than
# 70 % is: a 1 GB heap whose live data is about 260 MB (10k x 10k) stayed all resident. A sixth
# as young generation and 10 / 30 % free: the JVM's peak about 1.8 -> 1.5 GB at 10k x 10k
# (``cycle_bench.py``; either change alone measured no smaller; docs/performance.md, "Memory"). Each is added
# unless the JVM options name it already.
HEAP_OPTIONS = ("-XX:MinHeapFreeRatio=10", "-XX:MaxHeapFreeRatio=30", "-XX:NewRatio=5")
# The JVM's own C heap (the JIT's compiler arenas, symbol tables, Spark's and Delta's native
# buffers) is glibc's malloc, which keeps pages once freed: a compilation's arena is freed when
# it ends, but its pages stayed resident. Trimmed every 5 s (``malloc_trim``), the JVM's peak at
# 10k x 10k was 1,311 / 1,372 MB RSS against 1,458 / 1,425 MB without (the driver side's peak
# 1,916 / 1,976 against 2,066 / 2,050 MB PSS), the cycle no slower (``cycle_bench.py``; README,
# "Memory"). Only where the JVM has the option (JDK 17.0.9+, 21.0.1+): an older one refuses to
# start on an option it does not know.
TRIM_OPTION = "-XX:TrimNativeHeapInterval=5000"
# HotSpot leaves a method of more than 8,000 bytes of bytecode to the interpreter, however hot
# (``DontCompileHugeMethods``). Spark's generated code for a wide projection is such a method:
# the plan's rows (its ``detail`` text, one CASE of formatted strings) were read in 0.30 s at
# 10k x 10k, 0.17 s with this option (``bench/diag/plan_rows.py``, stop 85). Added unless the
# options name ``DontCompileHugeMethods`` already.
HUGE_METHODS_OPTION = "-XX:-DontCompileHugeMethods"
# The DataFrame debugging aids a session is built without, unless set (``quiet_debugging``).
DATAFRAME_DEBUGGING = "spark.python.sql.dataFrameDebugging.enabled"
QUERY_CONTEXT = "spark.sql.dataFrameQueryContext.enabled"
QUIET = (DATAFRAME_DEBUGGING, QUERY_CONTEXT)
# Spark's cache of compiled generated classes in a local session
# (``spark.sql.codegen.cache.maxEntries``, 100 by default): a purge batch compiles about 200.
CODEGEN_CACHE_ENTRIES = 1000
# Local paths (``file:``) through Hadoop's raw local file system, for both of Hadoop's APIs
# (``FileSystem``, which Spark's and the package's reads and writes use, and ``FileContext``,
# which Delta's log store and Spark's streaming checkpoint use), unless ``conf`` names either
# key. Hadoop's default for ``file:`` wraps it in a checksummed file system that writes a
# ``.crc`` file beside every file and renames both on every rename; and without Hadoop's native
# library (not in PySpark's jars) each new file's permissions are set by running ``chmod``, each
# rename's symbolic-link check by running ``readlink``: 22 processes started by the driver JVM
# for one Delta append (6 ``chmod``, 16 ``readlink``: ``strace``, stop 90), about 4 ms each on
# an idle machine. Raw, an append starts half as many (no side file to create or rename): a
# 10,000-row audit write 0.19 -> 0.13 s (median, stop 90). Files are read and written the same
# way; only Hadoop's ``.crc`` side files are neither written nor checked (Parquet and Delta keep
# their own checksums), and side files written before are left as they are (names that start
# with a dot, which Delta, Spark's checkpoint reader and ``spark_purge.external`` pass over).
RAW_LOCAL_FS = {
    "spark.hadoop.fs.file.impl": "org.apache.hadoop.fs.RawLocalFileSystem",
    "spark.hadoop.fs.AbstractFileSystem.file.impl": "org.apache.hadoop.fs.local.RawLocalFs",
}
# The same with no process at all: Hadoop's raw local file system with permissions set and links
# checked through ``java.nio`` (build/jvm/local-fs: ``./dev.sh setup`` compiles it against the
# installed PySpark's Hadoop API and exports ``SPARK_PURGE_LOCAL_FS_JAR``; a local driver loads the
# jar from its class path). At 10k x 10k the batch's Delta steps (lease, intents, outcomes,
# progress record) took 0.19-0.22 s a cycle against 0.50-0.56 s raw, Spark's checkpoint commits
# 0.01 s against 0.05 s, the cycle 4.93 / 5.03 s median against 5.92 / 5.68 s (stop 91,
# ``cycle_bench.py``, alternating). Without the jar (a wheel installed without this checkout):
# ``RAW_LOCAL_FS``.
LOCAL_FS_JAR_ENV = "SPARK_PURGE_LOCAL_FS_JAR"
NIO_LOCAL_FS = {
    "spark.hadoop.fs.file.impl": "io.sparkpurge.localfs.NioLocalFileSystem",
    "spark.hadoop.fs.AbstractFileSystem.file.impl": "io.sparkpurge.localfs.NioLocalFs",
}
DRIVER_CLASS_PATH = "spark.driver.extraClassPath"
# Idle Python workers Spark keeps per kind of worker (``spark.python.factory.idleWorkerMaxPoolSize``).
IDLE_PYTHON_WORKERS = 1
# Spark 4.2's Types Framework switch. Left unset, its default is computed at every read, and
# every read of an array element or struct field by an interpreted expression (the policy's
# array functions, ``policy.groups``) reads it: a ``System.getenv("SPARK_TESTING")`` per element
# (stop 62, a JFR profile of steady 1k x 1k cycles: 7 % of the task threads' samples). Set to
# that default's value (false outside Spark's own tests), it is a map lookup.
TYPES_FRAMEWORK = "spark.sql.types.framework.enabled"
# The byte cap on the Arrow batches Spark writes to a Python task (``mapInArrow``'s input). Below
# Java's Integer.MAX_VALUE (64 MB by default), Spark measures the batch after every row it writes,
# and measuring sets each list column's value count, which fills the list's offsets for every row
# since its last non-null one (Arrow's ``ListVector.setValueCount``): in the store match's input,
# the snapshot's rows and the store's in one union, each null in the other's lists, that is
# quadratic in the rows of a batch. At Integer.MAX_VALUE Spark skips the measure; a batch stays
# bounded by ``spark.sql.execution.arrow.maxRecordsPerBatch`` (10,000 rows). Stop 84: in a JFR
# profile of steady 10k x 10k cycles, 22 % of the task threads' samples were that fill; the
# match's job 0.92 / 0.99 -> 0.70 / 0.74 s median (``bench/diag/match_parts.py``).
ARROW_BATCH_BYTES = "spark.sql.execution.arrow.maxBytesPerBatch"
JAVA_INT_MAX = 2**31 - 1


def delta_jars(jars_dir: str | os.PathLike[str] | None = None) -> list[str] | None:
    """Jar paths for Delta in local mode, from ``jars_dir`` or ``$SPARK_PURGE_DELTA_JARS``;
    None when neither is set (the caller then resolves ``DELTA_PACKAGE``).

    Raises ConfigError when the folder named holds no jar: a wrong path must not silently turn
    into a download.
    """
    named = jars_dir or os.environ.get(DELTA_JARS_ENV)
    if not named:
        return None
    jars = sorted(str(p) for p in Path(named).glob("*.jar"))
    if not jars:
        source = "jars_dir" if jars_dir else DELTA_JARS_ENV
        raise ConfigError(f"{source}: expected a folder holding Delta's jars, got {str(named)!r} (no *.jar in it)")
    return jars


def extra_jars(named: Sequence[str | os.PathLike[str]] | None = None) -> list[str]:
    """Jar paths from ``named`` and ``$SPARK_PURGE_EXTRA_JARS``: each entry a jar or a folder of
    jars. Raises ConfigError for an entry that is neither (a typo must not pass silently)."""
    entries: list[tuple[str, str]] = [("extra_jars", str(n)) for n in named or ()]
    env = os.environ.get(EXTRA_JARS_ENV, "")
    entries += [(EXTRA_JARS_ENV, e.strip()) for e in re.split(f"[,{re.escape(os.pathsep)}]", env) if e.strip()]
    jars: list[str] = []
    for source, entry in entries:
        path = Path(entry)
        found = sorted(str(p) for p in path.glob("*.jar")) if path.is_dir() else [str(path)] if path.suffix == ".jar" and path.is_file() else []
        if not found:
            raise ConfigError(f"{source}: expected a jar file or a folder holding jars, got {entry!r}")
        jars += [j for j in found if j not in jars]
    return jars


def log4j2_config() -> Path:
    """The package's own log4j2 configuration (package data)."""
    return Path(str(resources.files("spark_purge") / "log4j2.properties"))


def launcher_java(environ: Mapping[str, str] = os.environ) -> str | None:
    """The ``java`` Spark's launcher (``spark-class``) runs: ``$JAVA_HOME/bin/java``, else the
    one on ``PATH``; None when there is none."""
    home = environ.get("JAVA_HOME")
    return os.path.join(home, "bin", "java") if home else shutil.which("java", path=environ.get("PATH"))


@functools.cache
def _java_starts_with(java: str, *options: str) -> bool:
    if len(options) == 1 and options[0] in PROBED_TOGETHER and _java_starts_with_all(java):
        return True
    try:
        done = subprocess.run([java, *options, "-version"], capture_output=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


# The options a local session start asks about (``TRIM_OPTION``, the class archive's): asked
# together first, one JVM start (about 60 ms) instead of one each; one by one when that fails.
PROBED_TOGETHER = (TRIM_OPTION, class_archive.PROBE)


@functools.cache
def _java_starts_with_all(java: str) -> bool:
    return _java_starts_with(java, *PROBED_TOGETHER)


def java_accepts(option: str, environ: Mapping[str, str] = os.environ) -> bool:
    """Whether the launcher's ``java`` starts with ``option`` (asked once per process: ``java
    <option> -version``, about 60 ms; ``PROBED_TOGETHER`` in one start when ``java`` takes them
    all). False when there is no ``java`` to ask."""
    java = launcher_java(environ)
    return java is not None and _java_starts_with(java, option)


def _named(option: str, named: Sequence[str]) -> bool:
    return any(option.split("=")[0] in options for options in named)


def given_java_options(conf: Mapping[str, str], environ: Mapping[str, str] = os.environ) -> tuple[str, str, str]:
    """The JVM options a local driver gets besides ours: ``spark.driver.extraJavaOptions`` (in
    ``conf``), and ``SPARK_SUBMIT_OPTS`` / ``JAVA_TOOL_OPTIONS``, which the launcher reads."""
    return conf.get("spark.driver.extraJavaOptions", ""), environ.get("SPARK_SUBMIT_OPTS", ""), environ.get("JAVA_TOOL_OPTIONS", "")


def driver_java_options(
    conf: Mapping[str, str],
    environ: Mapping[str, str] = os.environ,
    accepts: Callable[[str], bool] | None = None,
    extra: Sequence[str] = (),
) -> str | None:
    """``spark.driver.extraJavaOptions`` for a local session: the user's, plus our log4j2 file
    unless a log4j2 configuration is named already, plus ``GC_OPTION`` and ``HEAP_OPTIONS``
    unless a garbage collector is chosen already (either there, or in the JVM options the
    launcher reads from the environment: two collectors would stop the JVM from starting), plus
    ``TRIM_OPTION`` unless named already or the JVM does not have it (``accepts``, by default
    ``java_accepts`` with ``environ``), plus ``HUGE_METHODS_OPTION`` unless the options name
    ``DontCompileHugeMethods``, plus ``extra`` (the class archive's options,
    ``class_archive.ArchivePlan.options``). None when there is nothing to set."""
    named = given_java_options(conf, environ)
    given = named[0]
    ours = list(extra)
    if not any(LOG4J2_OPTION in options for options in named):
        ours.append(f"{LOG4J2_OPTION}={log4j2_config().as_uri()}")
    if not any(GC_CHOSEN.search(options) for options in named):
        ours.append(GC_OPTION)
        ours.extend(o for o in HEAP_OPTIONS if not _named(o, named))
    if not _named(TRIM_OPTION, named):
        has_it = accepts(TRIM_OPTION) if accepts is not None else java_accepts(TRIM_OPTION, environ)
        if has_it:
            ours.append(TRIM_OPTION)
    if not any("DontCompileHugeMethods" in options for options in named):
        ours.append(HUGE_METHODS_OPTION)
    return " ".join([given, *ours]).strip() or None


def local_fs(conf: Mapping[str, str], environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The settings that choose a local session's file system for ``file:`` paths:
    ``NIO_LOCAL_FS``, with its jar added to ``spark.driver.extraClassPath`` (after the caller's
    entries), when ``$SPARK_PURGE_LOCAL_FS_JAR`` names the jar; else ``RAW_LOCAL_FS``. Nothing
    when ``conf`` names either file-system key: both are left to it (a file system chosen for
    one API only stays the caller's choice).

    Raises ConfigError when the variable names no file: a wrong path must not silently turn into
    a slower file system."""
    if any(key in conf for key in RAW_LOCAL_FS):
        return {}
    jar = environ.get(LOCAL_FS_JAR_ENV)
    if not jar:
        return dict(RAW_LOCAL_FS)
    if not Path(jar).is_file():
        raise ConfigError(f"{LOCAL_FS_JAR_ENV}: expected the local file system's jar (./dev.sh setup builds it), got {jar!r} (no such file)")
    given = [e for e in conf.get(DRIVER_CLASS_PATH, "").split(os.pathsep) if e]
    return {**NIO_LOCAL_FS, DRIVER_CLASS_PATH: os.pathsep.join([*given, jar] if jar not in given else given)}


def jars_packages(conf: Mapping[str, str]) -> str:
    """``spark.jars.packages`` with ``DELTA_PACKAGE`` added, unless the user names a Delta artifact."""
    given = [p.strip() for p in conf.get("spark.jars.packages", "").split(",") if p.strip()]
    if not any(p.startswith("io.delta:delta-spark_") for p in given):
        given.append(DELTA_PACKAGE)
    return ",".join(given)


def get_spark(
    app_name: str = "spark-purge",
    master: str | None = None,
    conf: Mapping[str, str] | None = None,
    jars_dir: str | os.PathLike[str] | None = None,
    extra: Sequence[str | os.PathLike[str]] | None = None,
) -> SparkSession:
    """Return the active SparkSession, or build one with Delta configured.

    On a cluster (an active session exists, or ``spark-submit`` set ``spark.master``) nothing
    is forced; locally (``master`` given or none configured) the session binds to loopback,
    uses UTC, keeps the UI off and puts Delta and the ``extra`` jars (see ``extra_jars``) on
    the classpath (see the module docstring).
    """
    py4j_calls.install()  # fewer Py4J round trips to build DataFrames (issue 12)
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    conf = dict(conf or {})
    # Python workers must run this interpreter (it has pyarrow), not whatever is on PATH.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    # spark-submit starts the JVM first and hands Python its gateway: master is set there.
    local = master is not None or "PYSPARK_GATEWAY_PORT" not in os.environ
    archive: class_archive.ArchivePlan | None = None
    if local:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        builder = (
            builder.master(master or "local[2]")
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.ui.enabled", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.sql.ansi.enabled", "true")
            .config("spark.ui.showConsoleProgress", "false")
            # Delta's default of 50 snapshot partitions makes every small-table read slow locally.
            .config("spark.databricks.delta.snapshotPartitions", "2")
            # The batch's snapshot is hashed by (topic, partition) (``pipeline.kept``): joins on
            # those keys plus a group id may then reuse that partitioning instead of shuffling.
            .config("spark.sql.requireAllClusterKeysForCoPartition", "false")
            # A batch's queries are small, and adaptive execution runs each of their shuffle
            # and broadcast stages as a Spark job of its own (a 1k x 1k cycle: 48 jobs with it,
            # 25 without). A streaming query turns it off for its micro-batch DataFrames anyway;
            # off here, the Delta writes and the one-shot commands plan the same way.
            .config("spark.sql.adaptive.enabled", "false")
            # A batch compiles about 200 generated classes (its plan, the Delta writes and
            # reads); Spark's cache of them holds 100 by default, so every batch compiled them
            # all again (3-4 s of a 100 x 100 cycle). With room for them, a steady batch reuses
            # them and compiles only what its new literals change.
            .config("spark.sql.codegen.cache.maxEntries", str(CODEGEN_CACHE_ENTRIES))
            # Spark keeps every idle Python worker of a kind for reuse: at 10k x 10k four task
            # workers of about 100 MB each stayed resident for two tasks at a time. One idle
            # worker per kind (a second task forks another from its daemon, as a first does).
            .config("spark.python.factory.idleWorkerMaxPoolSize", str(IDLE_PYTHON_WORKERS))
            .config(TYPES_FRAMEWORK, "false")
            .config(ARROW_BATCH_BYTES, str(JAVA_INT_MAX))
        )
        conf.update(local_fs(conf))  # in ``conf``: the class archive's key reads its class path
        jars = delta_jars(jars_dir)
        more = extra_jars(extra)
        if jars is not None or more:
            builder = builder.config("spark.jars", ",".join((jars or []) + more))
        if jars is None:
            conf["spark.jars.packages"] = jars_packages(conf)
        archive = class_archive.archive_plan(
            launcher_java(), archive_classpath(conf), given_java_options(conf), java_accepts
        )
        java_options = driver_java_options(conf, extra=archive.options if archive is not None else ())
        if java_options is not None:
            conf["spark.driver.extraJavaOptions"] = java_options
    builder = builder.config("spark.sql.extensions", DELTA_EXTENSION).config(
        "spark.sql.catalog.spark_catalog", DELTA_CATALOG
    )
    for key, value in {**quiet_debugging(local, conf), **conf}.items():
        builder = builder.config(key, value)
    try:
        session = builder.getOrCreate()
    except BaseException:
        class_archive.abandon(archive)
        raise
    if archive is not None:
        class_archive.finish_at_exit(archive, getattr(session.sparkContext._gateway, "proc", None))
    return session


def quiet_debugging(local: bool, conf: Mapping[str, str]) -> dict[str, str]:
    """The DataFrame debugging aids off for a session this process builds (``QUIET``), each
    unless the caller set it (``get_spark(conf=...)``, ``spark-submit --conf``,
    ``PYSPARK_SUBMIT_ARGS``).

    - PySpark's DataFrame debugging wraps every ``functions`` call and Column method: each asks
      the JVM for the active session and the setting, then sets and clears the Python call site
      there, about a dozen Py4J round trips a call. A batch's plan makes a few hundred such
      calls, about half of the driver's Py4J calls a batch (issue 12). A static setting, so
      given to the builder.
    - Spark's DataFrame query context collects a stack trace for each Column and DataFrame step
      the JVM builds ("a non-trivial performance overhead", its documentation says).

    What they give is the Python line and the JVM's call site in an error's query context; the
    purge's own errors name their key or value. Built interleaved in one process (a 1k x 1k
    plan, analysed, not run: ``bench/build_bench.py``), the plan took 0.58 s with both on and
    0.26 s with both off and ``py4j_calls``, 2,668 -> 505 Py4J calls."""
    submitted = os.environ.get("PYSPARK_SUBMIT_ARGS", "")
    wanted = [key for key in QUIET if key not in conf and key not in submitted]
    if wanted and not local:  # spark-submit started the JVM with its settings: connect and read them
        SparkContext._ensure_initialized()
        given = SparkConf()
        wanted = [key for key in wanted if not given.contains(key)]
    return {key: "false" for key in wanted}


def activate(spark: SparkSession) -> None:
    """Make ``spark`` the active session again: PySpark's (one for the process) and the JVM's for
    this thread, as PySpark's ``createDataFrame`` does.

    A streaming batch (``foreachBatch``) makes its query's cloned session the active one, and
    its conf is the one of the query's start. Until stop 59 every batch's audit writes went
    through ``createDataFrame`` of the pipeline's session, which set that session back as a side
    effect; they no longer do (``txn_append.DriverRows``). Whatever reads the active session
    after a batch (a ``{spark_conf: key}`` secret, ``get_spark``) must see the caller's session
    and its conf as it is now: ``PurgePipeline.process_batch`` calls this when a batch ends."""
    SparkSession._activeSession = spark
    jvm = spark.sparkContext._jvm
    if jvm is not None:
        py4j_calls.static(jvm, "org.apache.spark.sql.SparkSession", "setActiveSession")(spark._jsparkSession)


def archive_classpath(conf: Mapping[str, str]) -> list[str]:
    """A local driver JVM's classpath, for its class archive's key: PySpark's own jars folder and
    ``spark.driver.extraClassPath``. Not ``spark.jars`` (Delta's, the extra jars): Spark loads
    those through a class loader of its own, whose archived classes the JVM uses only when the
    class file it is given has the archived one's size and checksum; so sessions with other
    ``spark.jars`` share one archive."""
    from pyspark.find_spark_home import _find_spark_home

    home = os.environ.get("SPARK_HOME") or _find_spark_home()
    extra = [e for e in conf.get(DRIVER_CLASS_PATH, "").split(os.pathsep) if e]
    return [os.path.join(home, "jars"), *extra]

