#!/usr/bin/env bash
# spark-purge developer entry point. Needs only Python 3.10+, Java 17+ and Maven on PATH.
#
#   ./dev.sh demo      set everything up, start a local Kafka, run a real purge, show the audit
#   ./dev.sh test      set everything up, lint + type-check, run the whole test suite (pytest args pass through)
#   ./dev.sh setup     only set up: .venv with the package, Kafka + Delta jars from Maven Central, the JVM's class archive
#   ./dev.sh bench     set up (+ kafka-tools, the kafka-delete-records.sh baseline), run bench/
#   ./dev.sh py ARGS   run the project's Python (e.g. ./dev.sh py -m spark_purge.cli plan ...)
#   ./dev.sh airflow-env  create .cache/airflow-venv (Airflow + the Spark provider) for `test -m airflow`
#
# Caches (ignored by git): .venv/ (Python packages), .cache/m2 (Maven repository),
# .cache/jars/{kafka,delta,spark-kafka} (the jars the launcher and Spark use), .cache/jars/kafka-streams
# (Kafka Streams 4.3.1, the streams-group member helper's classpath), .cache/jars/tiered-storage
# (Kafka's LocalTieredStorage, from the 4.3.1 storage test jar, for the tiered test broker), .cache/jars/tools (kafka-tools
# 4.3.1 for the benchmarks' kafka-delete-records.sh baseline; only `bench` resolves it),
# .cache/jars/local-fs (the local file system a local session uses for file: paths, compiled by
# javac from build/jvm/local-fs), .cache/airflow-venv (Airflow and its Spark provider, apart from .venv: only `airflow-env`, or
# `test` with an airflow marker, creates it), .cache/class-archive (the local driver JVM's class
# archive, written once: spark_purge/warm.py). A second
# run downloads nothing: each step is skipped while the stamp of its inputs (setup.py, the poms, the local file system's sources)
# is unchanged. The package itself never looks for this checkout: every command below exports
# SPARK_PURGE_KAFKA_JARS (the test cluster launcher's broker jars), SPARK_PURGE_DELTA_JARS
# (Delta's jars for a local SparkSession) and SPARK_PURGE_SPARK_KAFKA_JARS (Spark's Kafka
# connector, which the tests' session adds), SPARK_PURGE_KAFKA_STREAMS_JARS and
# SPARK_PURGE_TIERED_STORAGE_JARS pointing into .cache/jars, and SPARK_PURGE_LOCAL_FS_JAR.
set -euo pipefail
cd "$(dirname "$0")"
ROOT=$(pwd)
PY=${PYTHON:-python3}
VENV=$ROOT/.venv

say() { printf '\033[1m[dev.sh]\033[0m %s\n' "$*" >&2; }
digest() { cat "$@" | sha256sum | cut -c1-16; }

setup_python() {
  local want; want=$(digest setup.py)
  if [[ -f $VENV/.stamp && $(cat "$VENV/.stamp") == "$want" ]]; then return; fi
  command -v "$PY" >/dev/null || { say "python3 not found on PATH"; exit 2; }
  say "creating .venv and installing spark-purge with test extras (first run only)"
  [[ -x $VENV/bin/python ]] || "$PY" -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet --upgrade pip
  "$VENV/bin/python" -m pip install --quiet -e ".[test]"
  echo "$want" > "$VENV/.stamp"
}

setup_jars() {
  local name=$1; shift
  local pom=build/jvm/$name/pom.xml dest=.cache/jars/$name
  local want; want=$(digest "$pom")
  if [[ -f $dest/.stamp && $(cat "$dest/.stamp") == "$want" ]]; then return; fi
  command -v mvn >/dev/null || { say "mvn not found on PATH: install Maven"; exit 2; }
  say "resolving $name jars from Maven Central into $dest (first run only)"
  rm -rf "$dest.tmp"
  mvn -B -q -Dstyle.color=never -f "$pom" -Dmaven.repo.local="$ROOT/.cache/m2" \
      dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$ROOT/$dest.tmp" "$@"
  rm -rf "$dest"; mv "$dest.tmp" "$dest"
  echo "$want" > "$dest/.stamp"
}

# The local file system without chmod/readlink processes (build/jvm/local-fs/README.md): compiled
# with javac against the Hadoop API jar of the installed PySpark (no download), one small jar.
LOCAL_FS_JAR=$ROOT/.cache/jars/local-fs/spark-purge-local-fs.jar

setup_local_fs() {
  local src=build/jvm/local-fs dest; dest=$(dirname "$LOCAL_FS_JAR")
  local jars api; jars=$("$VENV/bin/python" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')
  api=$(compgen -G "$jars/hadoop-client-api-*.jar" | head -1 || true)
  [[ -n $api ]] || { say "no hadoop-client-api jar in $jars (the .venv's PySpark)"; exit 2; }
  local want; want=$( (cat "$src"/io/sparkpurge/localfs/*.java; basename "$api") | sha256sum | cut -c1-16)
  if [[ -f $dest/.stamp && $(cat "$dest/.stamp") == "$want" && -f $LOCAL_FS_JAR ]]; then return; fi
  command -v javac >/dev/null || { say "javac not found on PATH: install a JDK 17+ (Maven needs one too)"; exit 2; }
  say "compiling the local file system ($src) into $dest"
  rm -rf "$dest.tmp"; mkdir -p "$dest.tmp/classes"
  javac --release 17 -nowarn -d "$dest.tmp/classes" -cp "$api" "$src"/io/sparkpurge/localfs/*.java
  jar cf "$dest.tmp/$(basename "$LOCAL_FS_JAR")" -C "$dest.tmp/classes" .
  rm -rf "$dest.tmp/classes" "$dest"; mv "$dest.tmp" "$dest"
  echo "$want" > "$dest/.stamp"
}

# Airflow is large and pins its own dependency tree (pandas 3, its own pyarrow): it gets a
# virtualenv of its own, with plain PyPI versions that resolve without Airflow's constraints file.
AIRFLOW_VENV=$ROOT/.cache/airflow-venv
AIRFLOW_PINS=(apache-airflow==3.3.2 apache-airflow-providers-apache-spark==6.3.4)

setup_airflow() {
  local want; want=$(echo "${AIRFLOW_PINS[*]}" | sha256sum | cut -c1-16)
  if [[ -f $AIRFLOW_VENV/.stamp && $(cat "$AIRFLOW_VENV/.stamp") == "$want" ]]; then return; fi
  say "creating $AIRFLOW_VENV with ${AIRFLOW_PINS[*]} (first run only, a few minutes)"
  rm -rf "$AIRFLOW_VENV"
  "$PY" -m venv "$AIRFLOW_VENV"
  "$AIRFLOW_VENV/bin/python" -m pip install --quiet --upgrade pip
  "$AIRFLOW_VENV/bin/python" -m pip install --quiet "${AIRFLOW_PINS[@]}"
  echo "$want" > "$AIRFLOW_VENV/.stamp"
}

setup() {
  command -v java >/dev/null || { say "java not found on PATH: install Java 17+"; exit 2; }
  setup_python
  setup_jars kafka
  # Spark already ships Scala, Hadoop, log4j and SLF4J; take only what Delta adds.
  setup_jars delta -DexcludeGroupIds=org.scala-lang,org.apache.logging.log4j,org.slf4j,org.apache.hadoop
  # Spark's Kafka connector, for tests that run a real Structured Streaming consumer.
  setup_jars spark-kafka -DexcludeGroupIds=org.scala-lang,org.apache.logging.log4j,org.slf4j,org.apache.hadoop \
      -DexcludeArtifactIds=lz4-java,snappy-java,jsr305,spark-tags_2.13
  # Kafka Streams (own kafka-clients), for tests that run a real streams-group member.
  setup_jars kafka-streams
  # Kafka's LocalTieredStorage (the storage test jar, 4.3.1) alone, for the tiered-storage test broker.
  setup_jars tiered-storage -DexcludeTransitive=true
  # The local file system a local session's driver loads for file: paths (before the class archive:
  # the jar is on the driver's classpath, a part of the archive's key).
  setup_local_fs
  # The local driver JVM's class archive (spark_purge/warm.py): written once (about a minute),
  # so that every session, the first one included, maps it; 0.2 s when it is in place.
  "$VENV/bin/python" -m spark_purge.warm --if-needed \
    || say "the class archive's warm-up failed (above): sessions start without it, the first writes it at its exit"
}

export SPARK_LOCAL_IP=127.0.0.1
export PYSPARK_PYTHON=$VENV/bin/python
export SPARK_PURGE_KAFKA_JARS=$ROOT/.cache/jars/kafka
export SPARK_PURGE_DELTA_JARS=$ROOT/.cache/jars/delta
# The local driver JVM's class archive (spark_purge/class_archive.py) kept in the checkout.
export SPARK_PURGE_CLASS_ARCHIVE=${SPARK_PURGE_CLASS_ARCHIVE:-$ROOT/.cache/class-archive}
# Spark's Kafka connector: the tests' session adds it, to run a real Structured Streaming consumer.
export SPARK_PURGE_SPARK_KAFKA_JARS=$ROOT/.cache/jars/spark-kafka
# Kafka Streams' jars: the streams-group member helper's classpath (spark_purge/testing/streams.py).
export SPARK_PURGE_KAFKA_STREAMS_JARS=$ROOT/.cache/jars/kafka-streams
# The Airflow environment's interpreter, for the DagBag test (tests/unit/test_schedulers.py, -m airflow).
export SPARK_PURGE_AIRFLOW_PYTHON=$AIRFLOW_VENV/bin/python
# LocalTieredStorage's jar: a plugin on the tiered test broker's classpath (LocalKafka(tiered=True)).
export SPARK_PURGE_TIERED_STORAGE_JARS=$ROOT/.cache/jars/tiered-storage
# The local file system without chmod/readlink processes, on a local driver's classpath (spark_purge/session.py).
export SPARK_PURGE_LOCAL_FS_JAR=$LOCAL_FS_JAR
cmd=${1:-help}; [[ $# -gt 0 ]] && shift
case $cmd in
  setup) setup ;;
  demo)  setup; exec "$VENV/bin/python" -m spark_purge.testing.demo "$@" ;;
  test)  setup
         [[ " $* " == *airflow* ]] && setup_airflow
         say "ruff (lint) and mypy --strict (types) on the package"
         "$VENV/bin/ruff" check --quiet . && "$VENV/bin/mypy" --no-error-summary
         # Two workers (pytest-xdist, grouped by the cluster their tests share: tests/conftest.py);
         # SPARK_PURGE_TEST_WORKERS=0 runs everything in this one process.
         exec "$VENV/bin/python" -m pytest -n "${SPARK_PURGE_TEST_WORKERS:-2}" --dist loadgroup "$@" ;;
  bench) setup; setup_jars tools; for b in bench/*_bench.py; do "$VENV/bin/python" "$b" "$@"; done ;;
  py)    setup; exec "$VENV/bin/python" "$@" ;;
  airflow-env) setup_airflow; say "Airflow environment ready: $AIRFLOW_VENV" ;;
  *) sed -n '2,9p' "$0"; exit 2 ;;
esac
