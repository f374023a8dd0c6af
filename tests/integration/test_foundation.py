"""The foundation works with real parts: a real broker honours DeleteRecords, and Spark
writes and reads a real Delta table."""
from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient
from kafka.structs import TopicPartition
from py4j.protocol import Py4JJavaError
from pyspark.sql import SparkSession

from spark_purge.fs import HadoopFiles
from spark_purge.session import (
    HEAP_OPTIONS,
    HUGE_METHODS_OPTION,
    IDLE_PYTHON_WORKERS,
    LOCAL_FS_JAR_ENV,
    NIO_LOCAL_FS,
    RAW_LOCAL_FS,
    TRIM_OPTION,
    java_accepts,
)
from spark_purge.testing.cluster import LocalKafka
from spark_purge.testing.workload import log_starts, produce


def test_delete_records_moves_log_start_offset(
    kafka_cluster: LocalKafka, admin: KafkaAdminClient, new_topic: Callable[..., str]
) -> None:
    # Small segments (via topic config; the broker-wide minimum is 1 MiB) so whole segments go.
    topic = new_topic("foundation", partitions=2, configs={"segment.bytes": "1048576"})
    produce(kafka_cluster.bootstrap_servers, topic, [100, 100])
    tp0 = TopicPartition(topic, 0)
    assert log_starts(admin, topic, 2) == [0, 0]

    result = admin.delete_records({tp0: 42})

    assert result[tp0]["low_watermark"] == 42
    assert log_starts(admin, topic, 2) == [42, 0]  # partition 1 untouched


def test_delta_round_trip(spark: SparkSession, tmp_path: Path) -> None:
    path = str(tmp_path / "table")
    rows = [("orders", 0, 42), ("orders", 1, 7)]
    spark.createDataFrame(rows, "topic string, partition int, cutoff long").write.format("delta").save(path)

    back = spark.read.format("delta").load(path).orderBy("partition").collect()

    assert [(r.topic, r.partition, r.cutoff) for r in back] == rows
    history = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").collect()
    assert history[0]["operation"] == "WRITE"


def test_a_local_session_writes_local_files_through_a_raw_local_file_system(spark: SparkSession, tmp_path: Path) -> None:
    """session.local_fs reaches both of Hadoop's APIs (the package's own file system when
    ``SPARK_PURGE_LOCAL_FS_JAR`` names its jar, as ``./dev.sh`` does; else Hadoop's raw one): a
    Delta append, a streaming checkpoint's commit and a file the package writes leave no Hadoop
    ``.crc`` side file, and Delta and the checkpoint read back what they wrote."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()  # type: ignore[union-attr]
    uri = jvm.java.net.URI(tmp_path.as_uri())
    chosen = NIO_LOCAL_FS if os.environ.get(LOCAL_FS_JAR_ENV) else RAW_LOCAL_FS
    assert jvm.org.apache.hadoop.fs.FileSystem.get(uri, hadoop).getClass().getName() == chosen["spark.hadoop.fs.file.impl"]
    context = jvm.org.apache.hadoop.fs.FileContext.getFileContext(uri, hadoop)
    assert context.getDefaultFileSystem().getClass().getName() == chosen["spark.hadoop.fs.AbstractFileSystem.file.impl"]
    path = str(tmp_path / "table")
    for cutoff in (1, 2):
        spark.createDataFrame([("orders", 0, cutoff)], "topic string, partition int, cutoff long").write.format("delta").mode("append").save(path)
    assert sorted(r.cutoff for r in spark.read.format("delta").load(path).collect()) == [1, 2]
    query = spark.readStream.format("rate").option("rowsPerSecond", 10).load().writeStream.format("noop")
    running = query.option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start()
    try:
        assert running.awaitTermination(120)
    finally:
        running.stop()  # not left running in the shared session when it did not end in time
    assert running.exception() is None
    assert (tmp_path / "ck" / "commits" / "0").is_file()
    HadoopFiles(spark).write_text(str(tmp_path / "note.txt"), "written")
    assert (tmp_path / "note.txt").read_text() == "written"
    assert (tmp_path / "table" / "_delta_log" / "00000000000000000001.json").is_file()
    assert not [str(p) for p in tmp_path.rglob("*.crc") if p.name.startswith(".")]


def _file_systems(spark: SparkSession) -> tuple[Any, Any]:
    """Hadoop's raw local file system and the package's (``NIO_LOCAL_FS``), each initialized on
    its own (not through Hadoop's cache): the pair whose answers must agree."""
    if not os.environ.get(LOCAL_FS_JAR_ENV):
        # tests/conftest.py names the checkout's jar unless the variable is set: only one set
        # empty on purpose (a run of the raw file system's fallback) leaves the class out.
        pytest.skip(f"{LOCAL_FS_JAR_ENV} is set empty: the package's local file system is not on this session's class path")
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()  # type: ignore[union-attr]
    root = jvm.java.net.URI("file:///")
    raw, nio = jvm.org.apache.hadoop.fs.RawLocalFileSystem(), jvm.io.sparkpurge.localfs.NioLocalFileSystem()
    for fs in (raw, nio):
        fs.initialize(root, hadoop)
    return raw, nio


def _java_error(call: Callable[[], Any]) -> str:
    with pytest.raises(Py4JJavaError) as caught:
        call()
    return str(caught.value.java_exception.getClass().getName())


def test_the_package_local_file_system_sets_the_modes_chmod_set(spark: SparkSession, tmp_path: Path) -> None:
    """NioLocalFileSystem.setPermission leaves the mode Hadoop's ``chmod`` process leaves, on twin
    files and folders: a plain mode, set-user-ID cleared on a file, set-group-ID kept on a folder
    (``chmod`` with four digits keeps it), the sticky bit, through a symbolic link; and a missing
    path is an error (``FileNotFoundException``)."""
    raw, nio = _file_systems(spark)
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    cases = [  # (a folder?, the mode before, the mode set)
        (False, 0o644, 0o600), (False, 0o4755, 0o755), (False, 0o600, 0o1644),
        (True, 0o2775, 0o755), (True, 0o755, 0o1777), (True, 0o4700, 0o750),
    ]
    for i, (folder, before, wanted) in enumerate(cases):
        modes = []
        for name, fs in (("raw", raw), ("nio", nio)):
            path = tmp_path / f"{name}-{i}"
            path.mkdir() if folder else path.write_text("x")
            os.chmod(path, before)
            fs.setPermission(jvm.org.apache.hadoop.fs.Path(str(path)), jvm.org.apache.hadoop.fs.permission.FsPermission(wanted))
            modes.append(oct(path.stat().st_mode & 0o7777))
        assert modes[0] == modes[1], (folder, oct(before), oct(wanted), modes)
    # Through a symbolic link: the target's mode changes, as chmod's does.
    for name, fs in (("raw", raw), ("nio", nio)):
        target, link = tmp_path / f"{name}-target", tmp_path / f"{name}-link"
        target.write_text("x")
        os.chmod(target, 0o644)
        link.symlink_to(target)
        fs.setPermission(jvm.org.apache.hadoop.fs.Path(str(link)), jvm.org.apache.hadoop.fs.permission.FsPermission(0o640))
        assert oct(target.stat().st_mode & 0o7777) == oct(0o640), name
    missing = jvm.org.apache.hadoop.fs.Path(str(tmp_path / "missing"))
    perm = jvm.org.apache.hadoop.fs.permission.FsPermission(0o644)
    _java_error(lambda: raw.setPermission(missing, perm))  # chmod's exit status
    assert _java_error(lambda: nio.setPermission(missing, perm)) == "java.io.FileNotFoundException"


def test_the_package_local_file_system_answers_link_status_as_hadoop_does(spark: SparkSession, tmp_path: Path) -> None:
    """NioLocalFileSystem.getFileLinkStatus answers as RawLocalFileSystem's (which runs
    ``readlink`` on the path's text) for a file, a folder, a symbolic link to each and a dangling
    one, each as a plain and as a ``file:`` path; and a missing path is FileNotFoundException."""
    raw, nio = _file_systems(spark)
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    (tmp_path / "file").write_text("twelve bytes")
    (tmp_path / "folder").mkdir()
    (tmp_path / "to-file").symlink_to(tmp_path / "file")
    (tmp_path / "to-folder").symlink_to(tmp_path / "folder")
    (tmp_path / "dangling").symlink_to(tmp_path / "gone")

    def status(fs: Any, text: str) -> tuple[Any, ...]:
        got = fs.getFileLinkStatus(jvm.org.apache.hadoop.fs.Path(text))
        link = str(got.getSymlink()) if got.isSymlink() else None
        return (str(got.getPath()), got.isFile(), got.isDirectory(), got.isSymlink(), link, got.getLen(), str(got.getPermission()))

    links = 0
    for name in ("file", "folder", "to-file", "to-folder", "dangling"):
        for text in (str(tmp_path / name), (tmp_path / name).as_uri()):
            if name == "dangling" and text.startswith("file:"):
                # readlink of "file:/..." names no link: Hadoop then stats the link's target
                for fs in (raw, nio):
                    assert _java_error(lambda fs=fs, text=text: status(fs, text)) == "java.io.FileNotFoundException"
                continue
            answers = status(raw, text), status(nio, text)
            assert answers[0] == answers[1], (text, answers)
            links += answers[1][3]
    assert links == 3  # the plain paths of the three links: a check that can tell them apart
    missing = str(tmp_path / "missing")
    for fs in (raw, nio):
        assert _java_error(lambda fs=fs: status(fs, missing)) == "java.io.FileNotFoundException"


def test_a_local_session_runs_the_serial_collector(spark: SparkSession) -> None:
    """session.GC_OPTION reaches the driver JVM (its collectors are the serial pair)."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    beans = jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()
    assert sorted(str(beans.get(i).getName()) for i in range(beans.size())) == ["Copy", "MarkSweepCompact"]


def test_a_local_session_gives_back_heap_and_idle_python_workers(spark: SparkSession) -> None:
    """session.HEAP_OPTIONS reach the driver JVM, TRIM_OPTION too when its JVM has it (this
    machine's JDK 17.0.15 does), HUGE_METHODS_OPTION (its JIT compiles huge methods), and Spark keeps IDLE_PYTHON_WORKERS idle Python worker(s) per kind."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    args = list(jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
    assert all(option in args for option in HEAP_OPTIONS), args
    trims = java_accepts(TRIM_OPTION)
    assert (TRIM_OPTION in args) == trims, args
    flags = jvm.java.lang.management.ManagementFactory.getPlatformMXBean(jvm.com.sun.management.HotSpotDiagnosticMXBean._java_lang_class)
    if trims:
        assert str(flags.getVMOption("TrimNativeHeapInterval").getValue()) == TRIM_OPTION.split("=")[1]
    assert HUGE_METHODS_OPTION in args, args
    assert str(flags.getVMOption("DontCompileHugeMethods").getValue()) == "false"
    assert spark.conf.get("spark.python.factory.idleWorkerMaxPoolSize") == str(IDLE_PYTHON_WORKERS)


def test_local_kafka_moves_to_new_ports_when_a_port_it_picked_is_taken(tmp_path: Path) -> None:
    """A port picked free can be taken before the broker binds it (it happened to a test
    session's cluster: every test of it errored). The start moves the cluster to new ports."""
    cluster = LocalKafka(nodes=1, workdir=tmp_path / "k")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        cluster.node(1).controller_port = taken.getsockname()[1]  # as if another process took it
        try:
            cluster.start()
            assert cluster.node(1).controller_port != taken.getsockname()[1]
            clashes = list((tmp_path / "k" / "node-1").glob("*.port-clash-*"))
            assert clashes and any("Address already in use" in f.read_text(errors="replace") for f in clashes)
            admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
            try:
                assert [b.get("broker_id", b.get("node_id")) for b in admin.describe_cluster()["brokers"]] == [1]
            finally:
                admin.close()
        finally:
            cluster.stop()


def test_local_kafka_stops_its_jvm_by_pid(tmp_path: Path) -> None:
    cluster = LocalKafka(nodes=1, workdir=tmp_path / "k")
    cluster.start()
    pids = cluster.pids()
    assert len(pids) == 1
    cluster.stop()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and Path(f"/proc/{pids[0]}").exists():
        time.sleep(0.1)
    stat = Path(f"/proc/{pids[0]}/stat")
    # Gone, or at most a zombie awaiting reaping.
    assert not stat.exists() or stat.read_text().split()[2] == "Z"
