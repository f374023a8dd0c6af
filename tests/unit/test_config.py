"""Config loading: every ConfigError names its key path and the expectation; secrets stay hidden."""
from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from spark_purge import config as c
from spark_purge._time import parse_duration
from spark_purge.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]
SECRET = "s3cr3t-Hunter2!"


def base() -> dict[str, Any]:
    return {
        "kafka": {"bootstrap_servers": ["k1:9092", "k2:9092"]},
        "rules": [
            {"name": "orders", "topics": r"demo\.orders", "required_groups": ["billing", "analytics"]},
            {"name": "clicks", "topics": r"demo\.clicks\..*", "min_retention": "1h"},
        ],
        "audit": {"path": "var/audit"},
    }


def with_(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """Set a dotted/indexed key path (``rules[1].min_retention``) in the config dict."""

    def apply(d: dict[str, Any]) -> None:
        parts = re.findall(r"[^.\[\]]+|\[\d+\]", path)
        node: Any = d
        for part in parts[:-1]:
            node = node[int(part[1:-1])] if part.startswith("[") else node.setdefault(part, {})
        last = parts[-1]
        if last.startswith("["):
            node[int(last[1:-1])] = value
        else:
            node[last] = value

    return apply


def without(path: str) -> Callable[[dict[str, Any]], None]:
    def apply(d: dict[str, Any]) -> None:
        *head, last = path.split(".")
        node: Any = d
        for part in head:
            node = node[part]
        del node[last]

    return apply


def build(*changes: Callable[[dict[str, Any]], None]) -> c.PurgeConfig:
    d = copy.deepcopy(base())
    for change in changes:
        change(d)
    return c.from_dict(d)


def sasl(password: Any) -> Callable[[dict[str, Any]], None]:
    return with_(
        "kafka.security",
        {"protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512", "sasl_username": "svc", "sasl_password": password},
    )


# (id, changes, key path expected at the start of the message, fragments expected in it)
CASES: list[tuple[str, list[Callable[[dict[str, Any]], None]], str, list[str]]] = [
    ("unknown root key", [with_("rule", [])], "rule:", ["unknown key", "did you mean 'rules'"]),
    ("unknown rule key", [with_("rules[0].min_retension", "1h")], "rules[0].min_retension:", ["did you mean 'min_retention'"]),
    ("unknown kafka key", [with_("kafka.bootstrap_server", "x:1")], "kafka.bootstrap_server:", ["did you mean 'bootstrap_servers'"]),
    ("unknown key no hint", [with_("audit.zzz", 1)], "audit.zzz:", ["unknown key", "expected one of: path, table_name"]),
    ("unknown security key", [with_("kafka.security", {"password": {"env": "X"}})], "kafka.security.password:", ["unknown key", "did you mean"]),
    ("unknown manual key", [with_("manual", [{"topic": "t", "offset": 1, "forced": True}])], "manual[0].forced:", ["did you mean 'force'"]),
    ("section not mapping", [with_("audit", "var/audit")], "audit:", ["expected a mapping"]),
    ("missing kafka", [without("kafka")], "kafka:", ["required key is missing"]),
    ("missing audit path", [with_("audit", {"table_name": "x"})], "audit.path:", ["required key is missing"]),
    ("missing rule topics", [with_("rules[1]", {"name": "x"})], "rules[1].topics:", ["required key is missing"]),
    ("min_step not int", [with_("rules[0].min_step", "ten")], "rules[0].min_step:", ["expected an integer", "'ten'"]),
    ("min_step bool", [with_("defaults.min_step", True)], "defaults.min_step:", ["expected an integer"]),
    ("min_step zero", [with_("rules[0].min_step", 0)], "rules[0].min_step:", ["expected an integer >= 1"]),
    ("dry_run not bool", [with_("dry_run", "yes")], "dry_run:", ["expected true or false"]),
    ("name not str", [with_("rules[0].name", 5)], "rules[0].name:", ["expected a non-empty string"]),
    ("bad duration unit", [with_("rules[1].min_retention", "3 dayz")], "rules[1].min_retention:", ["expected a duration", "'3 dayz'", "unknown unit 'dayz'"]),
    ("month-or-minute unit", [with_("rules[1].min_retention", "1M")], "rules[1].min_retention:", ["'1M'", "unit 'M' is ambiguous", "'30d'"]),
    ("bad duration type", [with_("defaults.stale_after", [1])], "defaults.stale_after:", ["expected a duration"]),
    ("negative duration", [with_("rules[0].stale_after", -5)], "rules[0].stale_after:", ["non-negative duration"]),
    ("zero trigger", [with_("stream", {"checkpoint_location": "cp", "trigger_interval": 0})], "stream.trigger_interval:", ["positive duration"]),
    ("zero snapshot age", [with_("stream", {"checkpoint_location": "cp", "max_snapshot_age": "0s"})], "stream.max_snapshot_age:", ["positive duration"]),
    ("bad snapshot age", [with_("stream", {"checkpoint_location": "cp", "max_snapshot_age": "ten"})], "stream.max_snapshot_age:", ["duration"]),
    ("negative keep-warm", [with_("stream", {"checkpoint_location": "cp", "keep_warm": -1})], "stream.keep_warm:", ["non-negative duration"]),
    ("bad keep-warm", [with_("stream", {"checkpoint_location": "cp", "keep_warm": "often"})], "stream.keep_warm:", ["duration"]),
    ("missing checkpoint", [with_("stream", {"trigger_interval": "5s"})], "stream.checkpoint_location:", ["required key is missing"]),
    ("short lease ttl", [with_("lease", {"ttl": "100ms"})], "lease.ttl:", ["at least 1s", "100ms"]),
    ("zero request timeout", [with_("kafka.request_timeout", 0)], "kafka.request_timeout:", ["positive duration"]),
    ("negative retries", [with_("kafka.retries", -1)], "kafka.retries:", ["non-negative integer"]),
    ("bad policy", [with_("rules[0].on_missing_commit", "skip")], "rules[0].on_missing_commit:", ["expected 'block' or 'ignore'", "'skip'"]),
    ("bad stale policy", [with_("defaults.on_stale_group", "drop")], "defaults.on_stale_group:", ["expected 'block' or 'ignore'"]),
    ("bad topic regex", [with_("rules[1].topics", "demo.(clicks")], "rules[1].topics:", ["invalid regular expression", "'demo.(clicks'"]),
    ("bad protected regex", [with_("protected_topics", ["ok", "[a-"])], "protected_topics[1]:", ["invalid regular expression"]),
    ("bad group_exclude regex", [with_("group_exclude", ["*x"])], "group_exclude[0]:", ["invalid regular expression"]),
    ("bad exclude_groups regex", [with_("rules[1].exclude_groups", ["(a"])], "rules[1].exclude_groups[0]:", ["invalid regular expression"]),
    ("protected not list", [with_("protected_topics", "x")], "protected_topics:", ["expected a list"]),
    ("empty required groups", [with_("rules[0].required_groups", [])], "rules[0].required_groups:", ["at least one group id", "omit the key to discover"]),
    ("required groups as string", [with_("rules[0].required_groups", "billing")], "rules[0].required_groups:", ["expected a list of group ids"]),
    ("duplicate required group", [with_("rules[0].required_groups", ["a", "a"])], "rules[0].required_groups[1]:", ["listed twice"]),
    ("exclude with listed groups", [with_("rules[0].exclude_groups", ["x.*"])], "rules[0].exclude_groups:", ["only applies when groups are discovered"]),
    ("duplicate rule names", [with_("rules[1].name", "orders")], "rules[1].name:", ["duplicate rule name 'orders'"]),
    ("no rules", [with_("rules", [])], "rules:", ["at least one topic rule"]),
    (
        "ambiguous literal rules",
        [with_("rules", [{"name": "a", "topics": r"demo\.orders", "min_retention": "0s"}, {"name": "b", "topics": "demo.orders", "min_retention": "0s"}])],
        "rules[1].topics:",
        ["'demo.orders' would match both rules[0] ('a') and rules[1] ('b')", "exactly one rule"],
    ),
    (
        "literal shadowed by regex",
        [with_("rules", [{"name": "wide", "topics": r"demo\..*", "min_retention": "0s"}, {"name": "narrow", "topics": r"demo\.orders", "min_retention": "0s"}])],
        "rules[1].topics:",
        ["would match both rules[0] ('wide') and rules[1] ('narrow')"],
    ),
    (
        "discovering rule without min_retention",
        [with_("rules[1]", {"name": "clicks", "topics": r"demo\.clicks\..*"})],
        "rules[1].min_retention:",
        ["required for a rule that discovers groups", "protected only by this time floor", "'0s'"],
    ),
    ("negative manual offset", [with_("manual", [{"topic": "demo.orders", "partition": 0, "offset": -5}])], "manual[0].offset:", ["expected an offset >= 0, 'end' (-1)", "-5"]),
    ("manual offset type", [with_("manual", [{"topic": "demo.orders", "offset": "latest"}])], "manual[0].offset:", ["'end'", "'latest'"]),
    ("manual bad timestamp", [with_("manual", [{"topic": "demo.orders", "offset": "@yesterday"}])], "manual[0].offset:", ["ISO 8601", "'yesterday'"]),
    ("manual missing offset", [with_("manual", [{"topic": "demo.orders"}])], "manual[0].offset:", ["required key is missing"]),
    ("manual negative partition", [with_("manual", [{"topic": "demo.orders", "partition": -2, "offset": 1}])], "manual[0].partition:", [">= 0 or 'all'"]),
    ("manual partition type", [with_("manual", [{"topic": "demo.orders", "partition": "0", "offset": 1}])], "manual[0].partition:", ["expected an integer"]),
    ("manual bad topic", [with_("manual", [{"topic": "demo.*", "offset": 1}])], "manual[0].topic:", ["expected a topic name"]),
    ("manual force not bool", [with_("manual", [{"topic": "demo.orders", "offset": 1, "force": "yes"}])], "manual[0].force:", ["expected true or false"]),
    (
        "manual duplicate",
        [with_("manual", [{"topic": "demo.orders", "offset": 1}, {"topic": "demo.orders", "partition": "all", "offset": "end"}])],
        "manual[1]:",
        ["already has an entry (manual[0])"],
    ),
    ("bootstrap empty", [with_("kafka.bootstrap_servers", [])], "kafka.bootstrap_servers:", ["at least one host:port"]),
    ("bootstrap no port", [with_("kafka.bootstrap_servers", ["k1:9092", "k2"])], "kafka.bootstrap_servers[1]:", ["expected host:port", "'k2'"]),
    ("bad protocol", [with_("kafka.security", {"protocol": "TLS"})], "kafka.security.protocol:", ["expected one of PLAINTEXT, SSL"]),
    (
        "sasl without mechanism",
        [with_("kafka.security", {"protocol": "SASL_SSL", "sasl_username": "u", "sasl_password": {"env": "P"}})],
        "kafka.security.sasl_mechanism:",
        ["expected one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512"],
    ),
    (
        "sasl without password",
        [with_("kafka.security", {"protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN", "sasl_username": "u"})],
        "kafka.security.sasl_password:",
        ["required with protocol SASL_PLAINTEXT"],
    ),
    ("sasl key on plaintext", [with_("kafka.security", {"sasl_mechanism": "PLAIN"})], "kafka.security.sasl_mechanism:", ["only used with protocol SASL_"]),
    ("ssl key on plaintext", [with_("kafka.security", {"ssl_cafile": "/ca.pem"})], "kafka.security.ssl_cafile:", ["only used with protocol SSL or SASL_SSL"]),
    ("literal password", [sasl(SECRET)], "kafka.security.sasl_password:", ["expected a secret reference", "not a literal value"]),
    ("two secret kinds", [sasl({"env": "A", "spark_conf": "b"})], "kafka.security.sasl_password:", ["exactly one of env, spark_conf, file"]),
    ("unknown secret kind", [sasl({"vault": "x"})], "kafka.security.sasl_password.vault:", ["unknown key", "env, spark_conf, file"]),
    ("empty secret name", [sasl({"env": ""})], "kafka.security.sasl_password.env:", ["non-empty string"]),
]


@pytest.mark.parametrize("changes,where,fragments", [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_config_error_names_key_and_expectation(changes: list[Callable[[dict[str, Any]], None]], where: str, fragments: list[str]) -> None:
    with pytest.raises(ConfigError) as info:
        build(*changes)
    message = str(info.value)
    assert message.startswith(where), message
    for fragment in fragments:
        assert fragment in message, message


def test_root_must_be_mapping() -> None:
    with pytest.raises(ConfigError, match=r"^<root>: expected a mapping with keys kafka, audit, rules"):
        c.from_dict([1, 2])  # type: ignore[arg-type]


def test_literal_password_is_never_echoed() -> None:
    with pytest.raises(ConfigError) as info:
        build(sasl(SECRET))
    assert SECRET not in str(info.value)
    with pytest.raises(ConfigError) as info2:
        c.SecurityConfig(protocol="SASL_SSL", sasl_mechanism="PLAIN", sasl_username="u", sasl_password=SECRET)  # type: ignore[arg-type]
    assert str(info2.value).startswith("sasl_password:") and SECRET not in str(info2.value)


def test_rule_for_detects_ambiguity_per_actual_topic() -> None:
    # Neither pattern is a literal name, so only a real topic reveals the overlap.
    cfg = build(with_("rules", [{"name": "a", "topics": r"demo\..*", "min_retention": "0s"}, {"name": "b", "topics": r".*\.orders", "min_retention": "0s"}]))
    assert cfg.rule_for("demo.clicks").name == "a"  # type: ignore[union-attr]
    assert cfg.rule_for("prod.orders").name == "b"  # type: ignore[union-attr]
    assert cfg.rule_for("other") is None
    with pytest.raises(ConfigError, match=r"^rules: topic 'demo\.orders' matches rules\[0\] \('a'.*rules\[1\] \('b'.*exactly one rule"):
        cfg.rule_for("demo.orders")


def test_direct_construction_is_validated() -> None:
    with pytest.raises(ConfigError, match=r"^min_step: expected an integer >= 1"):
        c.TopicRule(name="r", topics="t", min_step=0)
    with pytest.raises(ConfigError, match=r"^offset: expected exactly one of"):
        c.ManualEntry(topic="t")
    with pytest.raises(ConfigError, match=r"^required_groups: expected at least one group id"):
        c.TopicRule(name="r", topics="t", required_groups=())


@pytest.mark.parametrize(
    "text,ms",
    [("90s", 90_000), ("15m", 900_000), ("2h", 7_200_000), ("3 days", 259_200_000), ("500ms", 500), (1500, 1500), ("1h30m", 5_400_000), ("1.5h", 5_400_000), ("0s", 0), ("2 weeks", 1_209_600_000), ("250", 250)],
)
def test_durations(text: object, ms: int) -> None:
    assert parse_duration(text, "x") == ms


def test_manual_offsets_parse() -> None:
    cfg = build(
        with_(
            "manual",
            [
                {"topic": "demo.orders", "partition": 0, "offset": 1200},
                {"topic": "demo.orders", "offset": "end", "force": True},
                {"topic": "demo.clicks.web", "partition": 1, "offset": -1},
                {"topic": "demo.clicks.web", "partition": 2, "offset": "@2024-05-01T00:00:00Z"},
                {"topic": "demo.clicks.web", "partition": 3, "offset": "@1714521600000"},
            ],
        )
    )
    entries = cfg.manual
    assert (entries[0].partition, entries[0].offset, entries[0].force) == (0, 1200, False)
    assert entries[1].partition is None and entries[1].is_end and entries[1].force
    assert entries[2].is_end
    may_first = datetime(2024, 5, 1, tzinfo=timezone.utc)
    assert entries[3].timestamp == may_first and entries[3].offset is None
    assert entries[4].timestamp == may_first
    # A partition-specific entry beats the topic-wide one.
    assert cfg.manual_for("demo.orders", 0) == entries[0]
    assert cfg.manual_for("demo.orders", 7) == entries[1]
    assert cfg.manual_for("demo.clicks.web", 0) is None


def test_manual_only_topic_gets_a_synthetic_rule_with_defaults() -> None:
    cfg = build(with_("defaults", {"min_step": 50}), with_("manual", [{"topic": "scratch", "offset": "end"}]))
    rule = cfg.rule_for("scratch")
    assert rule is not None and rule.name == "manual" and rule.required_groups is None and rule.min_step == 50


def test_defaults_apply_unless_rule_overrides() -> None:
    cfg = build(with_("defaults", {"min_retention": "2h", "min_step": 7, "on_stale_group": "ignore"}))
    orders, clicks = cfg.rules
    assert (orders.min_retention, orders.min_step, orders.on_stale_group) == (7_200_000, 7, "ignore")
    assert clicks.min_retention == 3_600_000  # rule's own value wins


def test_bootstrap_accepts_comma_string() -> None:
    cfg = build(with_("kafka.bootstrap_servers", "a:1, b:2"))
    assert cfg.kafka.bootstrap_servers == ("a:1", "b:2")


def test_secrets_resolve_but_never_show() -> None:
    cfg = build(
        with_(
            "kafka.security",
            {
                "protocol": "SASL_SSL",
                "sasl_mechanism": "SCRAM-SHA-256",
                "sasl_username": {"spark_conf": "spark.purge.user"},
                "sasl_password": {"env": "KAFKA_PASSWORD"},
                "ssl_cafile": "/etc/ca.pem",
                "ssl_keyfile": "/etc/client.key",
                "ssl_password": {"env": "KEY_PASSWORD"},
            },
        )
    )
    kwargs = c.kafka_client_kwargs(cfg, env={"KAFKA_PASSWORD": SECRET, "KEY_PASSWORD": SECRET + "k"}, spark_conf={"spark.purge.user": "svc"})
    assert kwargs["sasl_plain_password"] == SECRET and kwargs["ssl_password"] == SECRET + "k"
    assert kwargs["sasl_plain_username"] == "svc" and kwargs["security_protocol"] == "SASL_SSL"
    assert kwargs["bootstrap_servers"] == ["k1:9092", "k2:9092"] and kwargs["ssl_cafile"] == "/etc/ca.pem"
    for shown in (repr(kwargs), str(kwargs), f"{kwargs}", repr(cfg), str(cfg), c.canonical_json(cfg)):
        assert SECRET not in shown
    assert "KAFKA_PASSWORD" in repr(cfg)  # the reference is visible, the value is not
    assert "***" in repr(kwargs)


def test_secret_from_file(tmp_path: Path) -> None:
    secret_file = tmp_path / "pw"
    secret_file.write_text(SECRET + "\n")
    cfg = build(sasl({"file": str(secret_file)}))
    assert c.kafka_client_kwargs(cfg, env={})["sasl_plain_password"] == SECRET


def test_unset_secret_names_key_not_value() -> None:
    cfg = build(sasl({"env": "KAFKA_PASSWORD"}))
    with pytest.raises(ConfigError, match=r"^kafka\.security\.sasl_password: secret reference env 'KAFKA_PASSWORD' is not set"):
        c.kafka_client_kwargs(cfg, env={})
    cfg2 = build(sasl({"spark_conf": "spark.purge.pw"}))
    with pytest.raises(ConfigError, match=r"^kafka\.security\.sasl_password: secret reference spark_conf 'spark\.purge\.pw' is not set"):
        c.kafka_client_kwargs(cfg2, env={}, spark_conf={})
    cfg3 = build(sasl({"file": "/nonexistent/pw"}))
    with pytest.raises(ConfigError, match=r"^kafka\.security\.sasl_password: cannot read secret file '/nonexistent/pw'"):
        c.kafka_client_kwargs(cfg3, env={})


def test_plaintext_kwargs_have_no_security_extras() -> None:
    kwargs = c.kafka_client_kwargs(build(), env={})
    assert kwargs == {
        "bootstrap_servers": ["k1:9092", "k2:9092"],
        "client_id": "spark-purge",
        "request_timeout_ms": 30_000,
        "retry_backoff_ms": 500,
        "security_protocol": "PLAINTEXT",
    }


def test_one_connection_settings_value_carries_every_kafka_setting() -> None:
    cfg = build(with_("kafka.client_id", "purger-7"), with_("kafka.retries", 5), with_("kafka.request_timeout", "12s"))
    settings = c.connection_settings(cfg, env={})
    assert (settings.bootstrap_servers, settings.client_id, settings.retries) == (("k1:9092", "k2:9092"), "purger-7", 5)
    assert (settings.request_timeout_ms, settings.retry_backoff_ms, settings.security_protocol) == (12_000, 500, "PLAINTEXT")
    assert c.kafka_client_kwargs(cfg, env={}) == settings.kafka_kwargs()


def test_connection_settings_resolve_secrets_and_hide_them() -> None:
    cfg = build(sasl({"env": "KAFKA_PASSWORD"}))
    settings = c.connection_settings(cfg, env={"KAFKA_PASSWORD": SECRET})
    assert settings.sasl_plain_password == SECRET and settings.secrets == (SECRET,)
    assert SECRET not in repr(settings) and SECRET not in str(settings)


def test_fingerprint_is_stable_and_sensitive() -> None:
    a, b = build(), build()
    assert c.config_fingerprint(a) == c.config_fingerprint(b)
    assert re.fullmatch(r"[0-9a-f]{64}", c.config_fingerprint(a))
    assert c.config_fingerprint(build(with_("rules[0].min_step", 2))) != c.config_fingerprint(a)
    # Same reference, any value: the fingerprint never depends on a secret's value.
    s1, s2 = build(sasl({"env": "P"})), build(sasl({"env": "Q"}))
    assert c.config_fingerprint(s1) != c.config_fingerprint(s2)
    assert '"env":"P"' in c.canonical_json(s1)


@pytest.mark.parametrize("name", ["example.yaml", "demo.yaml"])
def test_shipped_configs_load(name: str) -> None:
    cfg = c.load(REPO / "conf" / name)
    assert cfg.rules and cfg.audit.path and cfg.stream is not None


def test_keep_warm_defaults_to_30s_and_0s_turns_it_off() -> None:
    assert c.load(REPO / "conf" / "example.yaml").stream.keep_warm == 30_000  # type: ignore[union-attr]
    for given, expected in (({}, 30_000), ({"keep_warm": "0s"}, 0), ({"keep_warm": "2m"}, 120_000)):
        d = base()
        with_("stream", {"checkpoint_location": "cp", **given})(d)
        assert c.from_dict(d).stream.keep_warm == expected  # type: ignore[union-attr]


def test_demo_config_contents() -> None:
    cfg = c.load(REPO / "conf" / "demo.yaml")
    orders, clicks = cfg.rule_for("demo.orders"), cfg.rule_for("demo.clicks")
    assert orders is not None and orders.required_groups == ("billing", "analytics")
    assert clicks is not None and clicks.required_groups is None
    assert orders.min_retention == 0 and clicks.min_retention == 0
    assert cfg.audit.path == "var/demo/audit" and cfg.stream is not None and cfg.stream.checkpoint_location == "var/demo/checkpoint"
    assert cfg.kafka.bootstrap_servers == ("127.0.0.1:9092",)


def test_example_config_needs_only_referenced_secrets() -> None:
    cfg = c.load(REPO / "conf" / "example.yaml")
    assert cfg.kafka.security.sasl_password == c.SecretRef(env="KAFKA_PASSWORD")
    assert c.kafka_client_kwargs(cfg, env={"KAFKA_PASSWORD": SECRET})["sasl_plain_password"] == SECRET


def test_load_json_and_file_errors(tmp_path: Path) -> None:
    good = tmp_path / "c.json"
    good.write_text(json.dumps(base()))
    assert c.load(good).rules[0].name == "orders"
    bad_yaml = tmp_path / "bad.yaml"
    bad_yaml.write_text("kafka: [unclosed\n")
    with pytest.raises(ConfigError, match=r"bad\.yaml: not valid YAML"):
        c.load(bad_yaml)
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    with pytest.raises(ConfigError, match=r"empty\.yaml: empty config file; expected a mapping"):
        c.load(empty)
    with pytest.raises(ConfigError, match=r"missing\.yaml: cannot read config file"):
        c.load(tmp_path / "missing.yaml")


def test_min_retention_for_discovery_may_come_from_defaults_and_listed_rules_need_none() -> None:
    cfg = build(with_("rules[1]", {"name": "clicks", "topics": r"demo\.clicks\..*"}), with_("defaults.min_retention", "2h"))
    assert cfg.rules[1].min_retention == 2 * 3600 * 1000
    listed_only = build(with_("rules", base()["rules"][:1]))  # listed groups, no min_retention anywhere
    assert listed_only.rules[0].min_retention == 0


def test_clock_probe_topic_is_optional_and_must_be_a_topic_name() -> None:
    assert c.from_dict(base()).kafka.clock_probe_topic is None  # not measured unless asked
    ok = base()
    ok["kafka"]["clock_probe_topic"] = "spark-purge.clock_1"
    assert c.from_dict(ok).kafka.clock_probe_topic == "spark-purge.clock_1"
    bad = base()
    bad["kafka"]["clock_probe_topic"] = "no spaces"
    with pytest.raises(ConfigError, match=r"^kafka\.clock_probe_topic: expected a Kafka topic name .*'no spaces'"):
        c.from_dict(bad)


def test_lease_section_defaults_and_bad_values_name_their_key() -> None:
    cfg = c.from_dict(base())
    assert (cfg.lease.enabled, cfg.lease.ttl, cfg.lease.wait, cfg.lease.path) == (True, 60_000, 120_000, None)
    # Derived from the cluster, whatever order the servers are listed in.
    assert c.purger_id_of(cfg) == c.purger_id_of(build(with_("kafka.bootstrap_servers", ["K2:9092", "k1:9092"])))
    assert re.fullmatch(r"cluster-[0-9a-f]{12}", c.purger_id_of(cfg))
    named = build(with_("lease", {"purger_id": "prod-purge", "ttl": "5s", "wait": "0s", "path": "s3a://b/leases"}))
    assert (c.purger_id_of(named), named.lease.ttl, named.lease.wait, named.lease.path) == ("prod-purge", 5000, 0, "s3a://b/leases")
    for key, value, expected in [
        ("lease.ttl", "500ms", r"^lease\.ttl: expected a duration of at least 1s, got 500ms"),
        ("lease.purger_id", "has space", r"^lease\.purger_id: expected 1-200 characters of .*'has space'"),
        ("lease.wait", "soon", r"^lease\.wait: expected a duration"),
        ("lease.enabled", "yes", r"^lease\.enabled: expected"),
    ]:
        with pytest.raises(ConfigError, match=expected):
            build(with_(key, value))
    with pytest.raises(ConfigError, match=r"^lease\.tll: unknown key; did you mean 'ttl'"):
        build(with_("lease", {"tll": "5s"}))
