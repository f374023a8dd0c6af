"""A local session's Delta artifact and log4j2 configuration: declared once, the user's own wins."""
from __future__ import annotations

import os
import re
from functools import reduce
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from spark_purge.cli import EXIT_USAGE, build_parser, main, verbosity_of
from spark_purge.errors import ConfigError
from spark_purge.logs import NORMAL, QUIET, VERBOSE
from spark_purge.session import (
    ARROW_BATCH_BYTES,
    CODEGEN_CACHE_ENTRIES,
    DATAFRAME_DEBUGGING,
    DELTA_PACKAGE,
    LOCAL_FS_JAR_ENV,
    QUERY_CONTEXT,
    RAW_LOCAL_FS,
    TRIM_OPTION,
    TYPES_FRAMEWORK,
    driver_java_options,
    jars_packages,
    java_accepts,
    launcher_java,
    local_fs,
    log4j2_config,
    quiet_debugging,
)

REPO = Path(__file__).resolve().parents[2]
OURS = f"-Dlog4j2.configurationFile={log4j2_config().as_uri()}"
GC = "-XX:+UseSerialGC -XX:MinHeapFreeRatio=10 -XX:MaxHeapFreeRatio=30 -XX:NewRatio=5"
TRIM = "-XX:TrimNativeHeapInterval=5000"
HUGE = "-XX:-DontCompileHugeMethods"


def test_delta_package_matches_the_pom_and_every_documented_spark_submit_line() -> None:
    pom = (REPO / "build" / "jvm" / "delta" / "pom.xml").read_text()
    version = re.search(r"<delta\.version>([^<]+)</delta\.version>", pom)
    assert version and f"io.delta:delta-spark_4.2_2.13:{version.group(1)}" == DELTA_PACKAGE
    documented = [
        (path.name, found)
        for path in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), *sorted((REPO / "jobs").rglob("*.py"))]
        for found in re.findall(r"io\.delta:delta-spark_[\w.]+:[\w.]+", path.read_text())
    ]
    assert documented and all(found == DELTA_PACKAGE for _, found in documented), documented


def test_the_log4j2_file_ships_with_the_package() -> None:
    assert log4j2_config().is_file()
    assert '"log4j2.properties"' in (REPO / "setup.py").read_text()  # package_data: in the wheel too
    text = log4j2_config().read_text()
    for noisy in ("org.apache.hadoop.util.NativeCodeLoader", "org.apache.spark.util.SparkStringUtils",
                  "org.apache.spark.sql.execution.streaming.runtime.ResolveWriteToStream", "org.apache.spark.rdd.MapPartitionsRDD"):
        name = re.search(rf"logger\.(\w+)\.name = {re.escape(noisy)}\n", text)
        assert name and f"logger.{name.group(1)}.level = error" in text, noisy


@pytest.mark.parametrize(
    "given,environ,expected",
    [
        ({}, {}, f"{OURS} {GC} {TRIM} {HUGE}"),
        ({"spark.driver.extraJavaOptions": "-Xss4m"}, {}, f"-Xss4m {OURS} {GC} {TRIM} {HUGE}"),
        ({"spark.driver.extraJavaOptions": "-Dlog4j2.configurationFile=/etc/mine.xml"}, {}, f"-Dlog4j2.configurationFile=/etc/mine.xml {GC} {TRIM} {HUGE}"),
        ({}, {"SPARK_SUBMIT_OPTS": "-Dlog4j2.configurationFile=/etc/mine.xml"}, f"{GC} {TRIM} {HUGE}"),
        ({"spark.driver.extraJavaOptions": "-Xss4m"}, {"JAVA_TOOL_OPTIONS": "-Dlog4j2.configurationFile=x"}, f"-Xss4m {GC} {TRIM} {HUGE}"),
        ({"spark.driver.extraJavaOptions": "-XX:+UseG1GC"}, {}, f"-XX:+UseG1GC {OURS} {TRIM} {HUGE}"),
        ({}, {"JAVA_TOOL_OPTIONS": "-XX:+UseParallelGC -Dlog4j2.configurationFile=x -XX:TrimNativeHeapInterval=0"}, HUGE),
        ({}, {"JAVA_TOOL_OPTIONS": "-XX:+UseParallelGC -Dlog4j2.configurationFile=x -XX:TrimNativeHeapInterval=0 -XX:+DontCompileHugeMethods"}, None),
        ({"spark.driver.extraJavaOptions": "-XX:+DontCompileHugeMethods"}, {}, f"-XX:+DontCompileHugeMethods {OURS} {GC} {TRIM}"),
        ({"spark.driver.extraJavaOptions": "-XX:MaxHeapFreeRatio=50"}, {}, f"-XX:MaxHeapFreeRatio=50 {OURS} -XX:+UseSerialGC -XX:MinHeapFreeRatio=10 -XX:NewRatio=5 {TRIM} {HUGE}"),
        ({}, {"SPARK_SUBMIT_OPTS": "-XX:MinHeapFreeRatio=20"}, f"{OURS} -XX:+UseSerialGC -XX:MaxHeapFreeRatio=30 -XX:NewRatio=5 {TRIM} {HUGE}"),
        ({"spark.driver.extraJavaOptions": "-XX:TrimNativeHeapInterval=1000"}, {}, f"-XX:TrimNativeHeapInterval=1000 {OURS} {GC} {HUGE}"),
    ],
    ids=[
        "ours", "added to the user's options", "the user's file wins", "named in SPARK_SUBMIT_OPTS",
        "named in JAVA_TOOL_OPTIONS", "the user's collector wins", "both chosen in JAVA_TOOL_OPTIONS",
        "everything named in JAVA_TOOL_OPTIONS", "the user's huge-method choice wins",
        "the user's heap ratio wins", "a heap ratio named in SPARK_SUBMIT_OPTS", "the user's trim interval wins",
    ],
)
def test_driver_java_options(given: dict[str, str], environ: dict[str, str], expected: str | None) -> None:
    asked: list[str] = []
    assert driver_java_options(given, environ, accepts=lambda option: asked.append(option) is None) == expected
    assert asked == ([] if "TrimNativeHeapInterval" in given.get("spark.driver.extraJavaOptions", "") + str(environ) else [TRIM_OPTION])


def test_the_trim_option_is_left_out_for_a_jvm_without_it() -> None:
    assert TRIM_OPTION == TRIM
    assert driver_java_options({}, {}, accepts=lambda option: False) == f"{OURS} {GC} {HUGE}"


def _fake_java(home: Path, knows: str) -> Path:
    """A ``java`` that starts (exit 0) only with options it knows, as a JVM refuses an unknown -XX."""
    java = home / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text(f'#!/bin/sh\nfor a in "$@"; do case "$a" in -XX:{knows}=*|-version) ;; *) echo "Unrecognized VM option" >&2; exit 1;; esac; done\n')
    java.chmod(0o755)
    return java


def test_java_accepts_asks_the_launchers_java(tmp_path: Path) -> None:
    """The probe runs $JAVA_HOME/bin/java (else the one on PATH): it answers for the JVM Spark starts."""
    new, old = _fake_java(tmp_path / "new", "TrimNativeHeapInterval"), _fake_java(tmp_path / "old", "Nothing")
    assert launcher_java({"JAVA_HOME": str(tmp_path / "new")}) == str(new)
    assert launcher_java({"PATH": str(old.parent)}) == str(old)
    assert launcher_java({"PATH": str(tmp_path / "none")}) is None
    assert java_accepts(TRIM_OPTION, {"JAVA_HOME": str(tmp_path / "new")})
    assert not java_accepts(TRIM_OPTION, {"JAVA_HOME": str(tmp_path / "old")})
    assert not java_accepts(TRIM_OPTION, {"PATH": str(tmp_path / "none")})
    assert not java_accepts(TRIM_OPTION, {"JAVA_HOME": str(tmp_path / "missing")})  # no such file: no JVM to start
    assert driver_java_options({}, {"JAVA_HOME": str(tmp_path / "old")}) == f"{OURS} {GC} {HUGE}"
    assert driver_java_options({}, {"JAVA_HOME": str(tmp_path / "new")}) == f"{OURS} {GC} {TRIM} {HUGE}"


def test_jars_packages_adds_delta_unless_named() -> None:
    assert jars_packages({}) == DELTA_PACKAGE
    assert jars_packages({"spark.jars.packages": "org.x:y:1"}) == f"org.x:y:1,{DELTA_PACKAGE}"
    mine = "io.delta:delta-spark_4.2_2.13:9.9.9"
    assert jars_packages({"spark.jars.packages": mine}) == mine


def test_local_paths_go_raw_without_the_jar_unless_the_caller_names_a_local_file_system() -> None:
    assert local_fs({}, {}) == {
        "spark.hadoop.fs.file.impl": "org.apache.hadoop.fs.RawLocalFileSystem",
        "spark.hadoop.fs.AbstractFileSystem.file.impl": "org.apache.hadoop.fs.local.RawLocalFs",
    }
    # Either key named: both left to the caller (and to Hadoop's defaults for the other).
    for key in RAW_LOCAL_FS:
        assert local_fs({key: "org.example.Mine"}, {}) == {}
    assert local_fs({"spark.hadoop.fs.s3a.impl": "x"}, {}) == RAW_LOCAL_FS


def test_local_paths_go_through_the_package_file_system_when_its_jar_is_named(tmp_path: Path) -> None:
    jar = tmp_path / "local-fs.jar"
    jar.write_bytes(b"PK")
    env = {LOCAL_FS_JAR_ENV: str(jar)}
    assert local_fs({}, env) == {
        "spark.hadoop.fs.file.impl": "io.sparkpurge.localfs.NioLocalFileSystem",
        "spark.hadoop.fs.AbstractFileSystem.file.impl": "io.sparkpurge.localfs.NioLocalFs",
        "spark.driver.extraClassPath": str(jar),
    }
    # The caller's class path is kept, the jar after it, once.
    mine = os.pathsep.join(["/opt/a.jar", "/opt/b"])
    assert local_fs({"spark.driver.extraClassPath": mine}, env)["spark.driver.extraClassPath"] == os.pathsep.join([mine, str(jar)])
    both = os.pathsep.join([str(jar), "/opt/a.jar"])
    assert local_fs({"spark.driver.extraClassPath": both}, env)["spark.driver.extraClassPath"] == both
    # The caller's file system wins over the jar too; then the class path is left alone.
    assert local_fs({"spark.hadoop.fs.file.impl": "org.example.Mine"}, env) == {}
    # A wrong path is an error that names the variable and the value, not a silent fallback.
    missing = str(tmp_path / "nope.jar")
    with pytest.raises(ConfigError, match=rf"SPARK_PURGE_LOCAL_FS_JAR: .*{re.escape(repr(missing))}"):
        local_fs({}, {LOCAL_FS_JAR_ENV: missing})


def test_verbosity_flags() -> None:
    parse = build_parser().parse_args
    assert verbosity_of(parse(["plan", "-c", "x.yaml"])) == NORMAL
    assert verbosity_of(parse(["-q", "plan", "-c", "x.yaml"])) == QUIET
    assert verbosity_of(parse(["--verbose", "plan", "-c", "x.yaml"])) == VERBOSE
    assert (NORMAL.spark, QUIET.spark, VERBOSE.spark) == ("WARN", "ERROR", "INFO")


def test_conflicting_flags_are_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["-q", "-v", "plan", "-c", "x.yaml"]) == EXIT_USAGE
    assert "not allowed with argument" in capsys.readouterr().err
    assert main(["run", "--once", "--follow", "-c", "x.yaml"]) == EXIT_USAGE
    assert "--follow: not allowed with argument --once" in capsys.readouterr().err


def test_dataframe_debugging_is_off_unless_the_caller_sets_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYSPARK_SUBMIT_ARGS", raising=False)
    assert quiet_debugging(True, {}) == {DATAFRAME_DEBUGGING: "false", QUERY_CONTEXT: "false"}
    assert quiet_debugging(True, {DATAFRAME_DEBUGGING: "true"}) == {QUERY_CONTEXT: "false"}
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", f"--conf {QUERY_CONTEXT}=true pyspark-shell")
    assert quiet_debugging(True, {}) == {DATAFRAME_DEBUGGING: "false"}


def test_a_local_session_runs_a_join_and_aggregate_as_one_job(spark: SparkSession) -> None:
    """Adaptive execution off locally: a query with a shuffle and a broadcast is one job (with
    it on, each stage would be a job of its own), as a streaming micro-batch runs it."""
    assert spark.conf.get("spark.sql.adaptive.enabled") == "false"
    store = spark.sparkContext._jsc.sc().statusStore()  # type: ignore[union-attr]
    left = spark.range(100).selectExpr("id % 7 AS k", "id")
    right = spark.range(7).selectExpr("id AS k", "id * 10 AS v")
    query = left.join(right.hint("broadcast"), "k").groupBy("k").agg({"v": "sum"})
    before = store.jobsList(None).size()
    assert len(query.collect()) == 7
    assert store.jobsList(None).size() - before <= 2  # the broadcast's own job and the query's


def test_a_local_session_sets_the_types_framework_to_sparks_own_default(spark: SparkSession) -> None:
    """Set, so that reading it is a lookup, not Spark's default function (an environment read
    per array element in interpreted expressions); set to the value that function gives, so
    nothing else changes. A Spark whose default turns the framework on fails here."""
    assert spark.conf.get(TYPES_FRAMEWORK) == "false"
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    internal = jvm.org.apache.spark.sql.internal
    entry = internal.SQLConf.TYPES_FRAMEWORK_ENABLED()
    assert entry.key() == TYPES_FRAMEWORK
    assert internal.SQLConf().getConf(entry) is False  # a fresh conf: Spark's own default


def test_a_local_session_leaves_python_tasks_arrow_batches_capped_by_rows_only(spark: SparkSession) -> None:
    """The byte cap is Java's Integer.MAX_VALUE exactly: the one value at which Spark skips
    measuring a Python task's input batch after every row (any other value measures, quadratic
    in a batch's rows where a list column is null). The batches stay bounded by
    ``maxRecordsPerBatch``: 25,000 rows with a list column null in most reach the task as
    batches of at most 10,000."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    assert spark.conf.get(ARROW_BATCH_BYTES) == str(jvm.java.lang.Integer.MAX_VALUE)
    assert spark.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch") == "10000"

    def sizes(batches):  # type: ignore[no-untyped-def]
        for batch in batches:
            yield pa.RecordBatch.from_pydict({"rows": [batch.num_rows]})

    rows = spark.range(25000).select(
        "id", F.when(F.col("id") % 1000 == 0, F.array(F.col("id"))).alias("sparse")
    ).coalesce(1)
    got = [r["rows"] for r in rows.mapInArrow(sizes, "rows long").collect()]
    assert sum(got) == 25000
    assert max(got) <= 10000 and len(got) >= 3


def test_a_local_session_keeps_more_generated_classes_than_a_batch_compiles(spark: SparkSession) -> None:
    """A query's generated code compiled once is reused after 110 other classes were compiled:
    more than Spark's default cache holds (100), fewer than a purge batch's ~200 (with the
    default, the query below compiles again: checked by hand)."""
    assert spark.conf.get("spark.sql.codegen.cache.maxEntries") == str(CODEGEN_CACHE_ENTRIES)
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    compiles = jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME()

    def build(df: DataFrame) -> None:  # plans and compiles on the driver, runs no job
        df._jdf.queryExecution().executedPlan().execute()

    def probe() -> DataFrame:
        return spark.range(5).selectExpr("id * 3 AS x").where("x > 1")

    build(probe())
    before = compiles.getCount()
    build(reduce(DataFrame.unionAll, [spark.range(2).selectExpr(f"id + {i} AS y") for i in range(110)]))
    assert compiles.getCount() - before >= 101  # each its own class
    after = compiles.getCount()
    build(probe())
    assert compiles.getCount() == after


def _counting_java(home: Path, knows: str) -> tuple[Path, Path]:
    """A stand-in ``java`` that knows the -XX options matching ``knows`` (a shell pattern) and
    logs each start's arguments."""
    java, calls = home / "bin" / "java", home / "calls"
    java.parent.mkdir(parents=True)
    java.write_text(
        f'#!/bin/sh\necho "$@" >> {calls}\n'
        f'for a in "$@"; do case "$a" in {knows}|-version) ;; *) exit 1;; esac; done\n'
    )
    java.chmod(0o755)
    return java, calls


def test_one_java_start_answers_both_probes_when_it_takes_both(tmp_path: Path) -> None:
    from spark_purge import class_archive

    _, calls = _counting_java(tmp_path / "both", "-XX:TrimNativeHeapInterval=*|-XX:ArchiveClassesAtExit=*")
    environ = {"JAVA_HOME": str(tmp_path / "both")}
    assert java_accepts(TRIM_OPTION, environ) and java_accepts(class_archive.PROBE, environ)
    assert calls.read_text().splitlines() == [f"{TRIM_OPTION} {class_archive.PROBE} -version"]


def test_each_probe_is_asked_alone_when_java_refuses_them_together(tmp_path: Path) -> None:
    from spark_purge import class_archive

    _, calls = _counting_java(tmp_path / "one", "-XX:ArchiveClassesAtExit=*")  # a JDK before 17.0.9
    environ = {"JAVA_HOME": str(tmp_path / "one")}
    assert not java_accepts(TRIM_OPTION, environ)
    assert java_accepts(class_archive.PROBE, environ)
    assert calls.read_text().splitlines() == [
        f"{TRIM_OPTION} {class_archive.PROBE} -version",
        f"{TRIM_OPTION} -version",
        f"{class_archive.PROBE} -version",
    ]


def test_an_option_not_probed_together_is_asked_alone(tmp_path: Path) -> None:
    """The joint answer speaks for ``PROBED_TOGETHER`` only, never for another option."""
    _, calls = _counting_java(tmp_path / "both", "-XX:TrimNativeHeapInterval=*|-XX:ArchiveClassesAtExit=*")
    environ = {"JAVA_HOME": str(tmp_path / "both")}
    assert java_accepts(TRIM_OPTION, environ)
    assert not java_accepts("-XX:+NoSuchOption", environ)
    assert calls.read_text().splitlines()[-1] == "-XX:+NoSuchOption -version"
