"""Files through Hadoop's FileSystem, so ``file:``, ``s3a://``, ``abfss://``, ``gs://``, ``dbfs:/``
and plain paths behave the same wherever the driver runs.

``HadoopFiles(spark)`` reaches the JVM through the active session's py4j gateway and uses the
session's Hadoop configuration (credentials, endpoints): the same view of storage Spark's own
readers have. ``Files`` is the small interface the rest of the package types against, so pure
logic (parsing a Spark checkpoint, for example) is tested with a plain in-memory stand-in.
"""
from __future__ import annotations

from typing import Any, Protocol

from pyspark.sql import SparkSession

from spark_purge.py4j_calls import jvm_class, static


class Files(Protocol):
    """The few file operations the package needs; paths are URIs or plain paths."""

    def exists(self, path: str) -> bool: ...

    def list_names(self, directory: str) -> list[str]:
        """Names (not paths) of the plain files directly in ``directory``; [] when it is missing."""
        ...

    def read_text(self, path: str) -> str: ...


def join(directory: str, name: str) -> str:
    """``directory/name`` without doubling the separator (works for URIs and plain paths)."""
    return f"{directory.rstrip('/')}/{name}"


class HadoopFiles:
    """``Files`` over Hadoop's FileSystem of a live SparkSession (driver side only)."""

    def __init__(self, spark: SparkSession) -> None:
        jvm = spark.sparkContext._jvm
        if jvm is None:  # Spark Connect has no gateway: nothing here can work
            raise RuntimeError("HadoopFiles needs a classic SparkSession with a JVM gateway")
        self._jvm: Any = jvm
        self._conf: Any = spark.sparkContext._jsc.hadoopConfiguration()

    def _path_fs(self, path: str) -> tuple[Any, Any]:
        p = jvm_class(self._jvm, "org.apache.hadoop.fs.Path")(path)
        return p, p.getFileSystem(self._conf)

    def exists(self, path: str) -> bool:
        p, fs = self._path_fs(path)
        return bool(fs.exists(p))

    def list_names(self, directory: str) -> list[str]:
        p, fs = self._path_fs(directory)
        if not fs.exists(p):
            return []
        return sorted(str(s.getPath().getName()) for s in fs.listStatus(p) if s.isFile())

    def read_text(self, path: str) -> str:
        p, fs = self._path_fs(path)
        stream = fs.open(p)
        try:
            return str(static(self._jvm, "org.apache.commons.io.IOUtils", "toString")(stream, "UTF-8"))
        finally:
            stream.close()

    def write_text(self, path: str, text: str) -> None:
        """Replace ``path`` with ``text`` (UTF-8): written beside it, then renamed over it, so a
        reader sees the old file, the new one, or (for a moment) none; never half of one."""
        import uuid

        p, fs = self._path_fs(path)
        tmp = jvm_class(self._jvm, "org.apache.hadoop.fs.Path")(f"{path}.{uuid.uuid4().hex}.tmp")
        stream = fs.create(tmp, True)
        try:
            stream.write(bytearray(text.encode("utf-8")))
        finally:
            stream.close()
        if fs.exists(p):
            fs.delete(p, False)
        if not fs.rename(tmp, p):
            fs.delete(tmp, False)
            raise OSError(f"cannot write {path}: renaming {tmp} over it failed")

    def qualify(self, path: str) -> str:
        """``path`` as its file system's fully qualified URI (``/a/b`` and ``file:/a/b`` both
        give ``file:/a/b``; ``s3a://bucket/x`` keeps its bucket): one spelling per location."""
        p, fs = self._path_fs(path)
        return str(fs.makeQualified(p).toString())
