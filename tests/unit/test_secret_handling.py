"""Secrets stay on the driver: pickled readers carry none; ``{spark_conf: key}`` references resolve.

The pickling checks replay what PySpark does (pyspark/sql/worker/plan_data_source_read.py): the
data source is pickled where it is created and unpickled in a driver-side planning process (it
must still hold the passwords there: ``partitions()`` / ``latestOffset()`` connect), which asks
it for a reader and pickles the read function -- a closure over that reader *and* the data
source -- for the executors. Those bytes must hold no secret.
"""
from __future__ import annotations

import logging
import pickle
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pyspark import cloudpickle

from spark_purge import config as c
from spark_purge import schemas
from spark_purge.errors import ConfigError
from spark_purge.kafka.model import ClusterSnapshot, PartitionState
from spark_purge.kafka.settings import ConnectionSettings, is_secret_option
from spark_purge.source import (
    KafkaStateDataSource,
    KafkaStateReader,
    KafkaStateStreamReader,
)
from spark_purge.source_arrow import SnapshotChunk, plan_chunks

SASL_PASSWORD = f"sasl-{uuid.uuid4().hex}"
KEY_PASSWORD = f"key-{uuid.uuid4().hex}"
SECRETS = (SASL_PASSWORD, KEY_PASSWORD)


def _options(**extra: str) -> dict[str, str]:
    settings = ConnectionSettings(
        bootstrap_servers=("127.0.0.1:9092",),
        security_protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_plain_username="purger",
        sasl_plain_password=SASL_PASSWORD,
        ssl_cafile="/etc/ca.pem",
        ssl_password=KEY_PASSWORD,
    )
    return {**settings.to_options(), **extra}


def _assert_no_secret(blob: bytes) -> None:
    for secret in SECRETS:
        assert secret.encode() not in blob, f"secret {secret[:4]}... found in pickled bytes"


def _read_function(reader: Any, data_source: Any) -> Callable[[SnapshotChunk], Iterator[Any]]:
    def data_source_read_func(partition: SnapshotChunk) -> Iterator[Any]:  # as PySpark's
        assert data_source.name() == "kafka_state"
        return iter(reader.read(partition))

    return data_source_read_func


@pytest.mark.parametrize("streaming", [False, True], ids=["batch", "stream"])
def test_executor_bound_pickle_holds_no_secret(streaming: bool, tmp_path: Any) -> None:
    created = KafkaStateDataSource(_options())
    to_planner = cloudpickle.dumps(created)
    assert SASL_PASSWORD.encode() in to_planner  # the driver-side planner connects: it needs them
    planner_side: KafkaStateDataSource = pickle.loads(to_planner)
    assert planner_side.parsed.client.connection.secrets == SECRETS
    reader = planner_side.streamReader(schemas.SNAPSHOT) if streaming else planner_side.reader(schemas.SNAPSHOT)
    to_executors = cloudpickle.dumps(_read_function(reader, planner_side))
    _assert_no_secret(to_executors)
    _assert_no_secret(pickle.dumps(reader))
    # The planner side keeps its secrets in memory (it connects after pickling the read function).
    assert reader.options.client.connection.secrets == SECRETS  # type: ignore[attr-defined]
    # ...and the executor side still reads: rows come from the partition only.
    read = pickle.loads(to_executors)
    snapshot = ClusterSnapshot("s1", 0, (PartitionState("t", 0, 1, (1,), (1,), 0, 5, 5, False, "delete", None, None),), ())
    (chunk,) = plan_chunks(snapshot, "snapshot", 10)
    assert [r["high_watermark"] for b in read(chunk) for r in b.to_pylist()] == [5]


def test_unpickled_reader_keeps_everything_but_secrets() -> None:
    parsed = KafkaStateDataSource(_options(topics="a,b")).parsed
    clone: KafkaStateReader = pickle.loads(pickle.dumps(KafkaStateReader(parsed)))
    assert clone.options == parsed.without_secrets()
    assert clone.options.client.topics == ("a", "b") and clone.options.client.connection.sasl_plain_username == "purger"
    assert clone.options.client.connection.secrets == ()
    stream_clone = pickle.loads(pickle.dumps(KafkaStateStreamReader(KafkaStateDataSource(_options()).parsed)))
    assert stream_clone.options.client.connection.secrets == ()
    assert stream_clone.options.client.connection.sasl_plain_username == "purger"


@pytest.mark.parametrize(
    ("key", "secret"),
    [("kafka.sasl_plain_password", True), ("KAFKA.SSL.PASSWORD", True), ("kafka.sasl_plain_username", False), ("password", False)],
)
def test_secret_option_keys(key: str, secret: bool) -> None:
    assert is_secret_option(key) is secret


# ---- {spark_conf: key} -------------------------------------------------------------------------


def _sasl_config(ref: dict[str, str]) -> c.PurgeConfig:
    return c.from_dict(
        {
            "kafka": {
                "bootstrap_servers": "k1:9092",
                "security": {"protocol": "SASL_PLAINTEXT", "sasl_mechanism": "SCRAM-SHA-512", "sasl_username": "purger", "sasl_password": ref},
            },
            "rules": [{"name": "all", "topics": "t.*", "required_groups": ["g"]}],
            "audit": {"path": "/tmp/audit"},
            "stream": {"checkpoint_location": "/tmp/ckpt"},
        }
    )


def test_spark_conf_reference_defaults_to_the_active_session(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = _sasl_config({"spark_conf": "spark.purge.kafka.password"})
    monkeypatch.setattr(c, "active_spark_conf", lambda: {"spark.purge.kafka.password": SASL_PASSWORD})
    assert c.connection_settings(cfg, env={}).sasl_plain_password == SASL_PASSWORD
    monkeypatch.setattr(c, "active_spark_conf", lambda: None)
    with pytest.raises(ConfigError, match=r"^kafka\.security\.sasl_password: secret reference spark_conf 'spark\.purge\.kafka\.password' needs an active Spark session"):
        c.connection_settings(cfg, env={})


def test_spark_conf_reference_missing_names_both_keys_not_the_value() -> None:
    cfg = _sasl_config({"spark_conf": "spark.purge.kafka.password"})
    with pytest.raises(ConfigError, match=r"^kafka\.security\.sasl_password: secret reference spark_conf 'spark\.purge\.kafka\.password' is not set"):
        c.connection_settings(cfg, env={}, spark_conf={"spark.purge.other.password": SASL_PASSWORD})


def test_spark_conf_secret_key_must_be_redacted_by_spark() -> None:
    cfg = _sasl_config({"spark_conf": "spark.purge.kafka.creds"})
    with pytest.raises(ConfigError, match=r"^kafka\.security\.sasl_password: Spark conf key 'spark\.purge\.kafka\.creds' is not matched by spark\.redaction\.regex") as err:
        c.connection_settings(cfg, env={}, spark_conf={"spark.purge.kafka.creds": SASL_PASSWORD})
    assert SASL_PASSWORD not in str(err.value)
    # A session whose redaction regex covers the key is fine.
    conf = {"spark.purge.kafka.creds": SASL_PASSWORD, "spark.redaction.regex": "(?i)creds|password"}
    assert c.connection_settings(cfg, env={}, spark_conf=conf).sasl_plain_password == SASL_PASSWORD


def test_reading_a_spark_conf_secret_silences_py4j_debug(caplog: pytest.LogCaptureFixture) -> None:
    """py4j logs each JVM answer at DEBUG ("Answer received: !ys<value>"): not while a secret is read."""

    class Py4jConf(dict[str, str]):
        def get(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
            value = super().get(key, default)
            logging.getLogger("py4j.clientserver").debug("Answer received: !ys%s", value)
            return value

    cfg = _sasl_config({"spark_conf": "spark.purge.kafka.password"})
    with caplog.at_level(logging.DEBUG), caplog.at_level(logging.DEBUG, logger="py4j.clientserver"):
        settings = c.connection_settings(cfg, env={}, spark_conf=Py4jConf({"spark.purge.kafka.password": SASL_PASSWORD}))
        logging.getLogger("py4j.clientserver").debug("after: %s", "visible")
    assert settings.sasl_plain_password == SASL_PASSWORD
    assert SASL_PASSWORD not in caplog.text and "after: visible" in caplog.text  # the level is restored
