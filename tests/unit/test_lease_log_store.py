"""``lease.check_log_store``: a lease on S3 needs a Delta log store that serializes commits
across drivers; without one, the job refuses to start rather than let two jobs hold the lease."""
from __future__ import annotations

import pytest

from spark_purge.errors import ConfigError
from spark_purge.lease import SERIALIZING_S3_LOG_STORE, check_log_store


def conf_of(**settings: str):
    table = {k.replace("_", "."): v for k, v in settings.items()}
    return table.get


@pytest.mark.parametrize("scheme", ["s3", "s3a", "s3n", "S3A"])
def test_s3_with_the_default_log_store_is_refused_naming_the_setting(scheme: str) -> None:
    with pytest.raises(ConfigError) as err:
        check_log_store(f"{scheme}://bucket/audit_leases", conf_of(), "lease.path", environ={})
    text = str(err.value)
    assert text.startswith("lease.path: the lease table")
    assert f"spark.delta.logStore.{scheme.lower()}.impl={SERIALIZING_S3_LOG_STORE}" in text
    assert "lease.enabled: false" in text


def test_s3_with_the_dynamodb_log_store_for_its_scheme_or_for_every_scheme_is_accepted() -> None:
    check_log_store("s3a://b/l", {"spark.delta.logStore.s3a.impl": SERIALIZING_S3_LOG_STORE}.get, environ={})
    check_log_store("s3://b/l", {"spark.delta.logStore.class": SERIALIZING_S3_LOG_STORE}.get, environ={})
    # Set for another scheme only: the table's own scheme still has the default.
    with pytest.raises(ConfigError, match=r"audit.path \(the lease table beside it\): the lease table s3://b/l is on S3"):
        check_log_store(
            "s3://b/l", {"spark.delta.logStore.s3a.impl": SERIALIZING_S3_LOG_STORE}.get, "audit.path (the lease table beside it)", environ={}
        )


def test_other_storage_and_databricks_are_left_alone() -> None:
    for path in ("/tmp/a_leases", "file:/tmp/a_leases", "hdfs://nn/a_leases", "abfss://c@acct.dfs.core.windows.net/a", "gs://b/a"):
        check_log_store(path, conf_of(), environ={})
    check_log_store("s3a://b/l", conf_of(), environ={"DATABRICKS_RUNTIME_VERSION": "17.3"})


def test_a_pipeline_with_its_lease_table_on_s3_refuses_to_start(spark, tmp_path) -> None:
    from spark_purge.testing.workload import new_pipeline, purge_config

    cfg = purge_config(tmp_path, "127.0.0.1:9", "t", None, lease={"path": "s3a://bucket/purge_leases"})
    with pytest.raises(ConfigError, match=r"^lease.path: the lease table s3a://bucket/purge_leases is on S3"):
        new_pipeline(spark, cfg)
    # Without a lease there is nothing to refuse.
    import dataclasses

    unleased = dataclasses.replace(cfg, lease=dataclasses.replace(cfg.lease, enabled=False))
    new_pipeline(spark, unleased).close()
