"""What the operator sees on stderr: our own log lines, and Spark's and kafka-python's only
when they matter. stdout is the command's output alone (tables, JSON lines).

The CLI's ``-q`` / (nothing) / ``-v`` pick one ``Verbosity``:

    quiet    spark_purge WARNING   Spark ERROR   kafka-python ERROR
    normal   spark_purge INFO      Spark WARN    kafka-python ERROR
    verbose  spark_purge DEBUG     Spark INFO    kafka-python WARNING

Spark's level is the driver's root log4j level (``SparkContext.setLogLevel``); its known
start-up noise stays at ERROR whatever the verbosity (``spark_purge/log4j2.properties``, which
``spark_purge.session`` hands to a local driver JVM). kafka-python warns about every retriable
error it retries by itself (NotCoordinator, NotLeaderForPartition); spark-purge reports the
failures that remain.
"""
from __future__ import annotations

import logging
import sys
from dataclasses import dataclass

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


@dataclass(frozen=True)
class Verbosity:
    """The log levels of one verbosity: ours (Python), Spark's (a log4j level name), kafka-python's."""

    ours: int
    spark: str
    kafka: int


QUIET = Verbosity(ours=logging.WARNING, spark="ERROR", kafka=logging.ERROR)
NORMAL = Verbosity(ours=logging.INFO, spark="WARN", kafka=logging.ERROR)
VERBOSE = Verbosity(ours=logging.DEBUG, spark="INFO", kafka=logging.WARNING)


# The loggers whose levels ``configure_logging`` sets (a caller that must put them back, such as
# the server around a served command, saves these).
LEVELLED = ("spark_purge", "kafka", "py4j", "py4j.clientserver")


def configure_logging(verbosity: Verbosity) -> None:
    """Our loggers (``spark_purge.*``) to stderr in ``LOG_FORMAT`` at the verbosity's level.

    A handler already on the root logger (an embedding application's, pytest's) is kept: then
    only the levels are set.
    """
    logging.basicConfig(format=LOG_FORMAT, stream=sys.stderr)
    logging.getLogger("spark_purge").setLevel(verbosity.ours)
    logging.getLogger("kafka").setLevel(verbosity.kafka)
    logging.getLogger("py4j").setLevel(logging.WARNING)
    # py4j logs every exception raised in foreachBatch with its whole traceback; we report it.
    logging.getLogger("py4j.clientserver").setLevel(logging.CRITICAL)
