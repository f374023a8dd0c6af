"""A config with several problems reports every one, each with its key path and the value at fault."""
from __future__ import annotations

from pathlib import Path

import pytest

from spark_purge import config as c
from spark_purge.errors import ConfigError, ConfigProblems

SECRET = "s3cr3t-Hunter2!"

MANY = """\
kafka:
  bootstrap_servers: [k1:9092]
  retries: many
  request_timeout: 3 dayz
  clientid: x
defaults:
  on_stale_group: forget
rules:
  - name: orders
    topics: 'demo\\.orders'
    min_step: lots
    on_missing_commit: maybe
  - name: clicks
    topics: 'demo\\.(clicks'
  - topics: 'demo\\.views'
manual:
  - topic: demo.orders
    partition: first
    offset: soon
audit: {}
stream: {trigger_interval: -5, checkpoint_location: var/ck}
dry_run: 'yes'
colour: blue
"""

EXPECTED = [
    "colour: unknown key",
    "defaults.on_stale_group: expected 'block' or 'ignore', got 'forget'",
    "rules[0].min_step: expected an integer, got str 'lots'",
    "rules[0].on_missing_commit: expected 'block' or 'ignore', got 'maybe'",
    "rules[1].topics: invalid regular expression 'demo\\\\.(clicks'",
    "rules[2].name: required key is missing",
    "kafka.clientid: unknown key; did you mean 'client_id'?",
    "audit.path: required key is missing",
    "manual[0].partition: expected an integer, got str 'first'",
    "manual[0].offset: expected an offset >= 0, 'end' (-1) or '@<ISO timestamp or epoch ms>', got 'soon'",
    "stream.trigger_interval: ",
    "dry_run: expected true or false, got str 'yes'",
]


def problems_of(path: Path) -> tuple[str, ...]:
    with pytest.raises(ConfigProblems) as info:
        c.load(path)
    err = info.value
    assert isinstance(err, ConfigError)  # callers catching ConfigError (the CLI: exit 2) see it too
    assert str(err).splitlines() == [f"{len(err.problems)} problems:", *(f"  {p}" for p in err.problems)]
    return err.problems


def test_every_problem_of_a_file_is_reported_with_its_key_path_and_value(tmp_path: Path) -> None:
    path = tmp_path / "many.yaml"
    path.write_text(MANY)
    problems = problems_of(path)
    for expected in EXPECTED:
        assert sum(p.startswith(expected) for p in problems) == 1, (expected, problems)
    # The bad `defaults:` did not stop the rules from being checked, nor one bad key its section.
    kafka = [p for p in problems if p.startswith("kafka.")]
    assert [p.split(":")[0] for p in kafka] == ["kafka.clientid"]  # unknown keys of a section come first
    assert len(problems) == len(EXPECTED), problems


def test_one_section_with_several_bad_keys(tmp_path: Path) -> None:
    path = tmp_path / "kafka.yaml"
    path.write_text(
        "kafka: {bootstrap_servers: [k1:9092], retries: many, request_timeout: 3 dayz, client_id: ''}\n"
        "rules: [{name: r, topics: t, min_retention: 0s}]\naudit: {path: var/a}\n"
    )
    problems = problems_of(path)
    assert [p.split(":")[0] for p in problems] == ["kafka.client_id", "kafka.request_timeout", "kafka.retries"]
    assert "got str ''" in problems[0] and "'3 dayz'" in problems[1] and "got str 'many'" in problems[2]


def test_list_items_each_reported(tmp_path: Path) -> None:
    path = tmp_path / "lists.json"
    path.write_text(
        '{"kafka": {"bootstrap_servers": "k1:9092"}, "audit": {"path": "a"},'
        ' "rules": [{"name": "r", "topics": "t", "min_retention": "0s"}],'
        ' "protected_topics": ["ok", "(bad", 7], "group_exclude": ["[x"]}'
    )
    problems = problems_of(path)
    assert [p.split(":")[0] for p in problems] == ["protected_topics[1]", "protected_topics[2]", "group_exclude[0]"]
    assert "'(bad'" in problems[0] and "got 7" in problems[1] and "'[x'" in problems[2]


def test_cross_field_checks_run_once_the_keys_are_valid() -> None:
    # A rule's own __post_init__ check (listed twice) is reported next to another section's problem.
    with pytest.raises(ConfigProblems) as info:
        c.from_dict({
            "kafka": {"bootstrap_servers": ["k1:9092"], "retries": -1},
            "rules": [{"name": "r", "topics": "t", "required_groups": ["a", "a"]}],
            "audit": {"path": "a"},
        })
    assert info.value.problems == (
        "rules[0].required_groups[1]: group 'a' is listed twice",
        "kafka.retries: expected a non-negative integer, got -1",
    )


def test_a_single_problem_is_still_a_plain_message() -> None:
    with pytest.raises(ConfigError) as info:
        c.from_dict({"kafka": {"bootstrap_servers": ["k1:9092"]}, "rules": [{"name": "r", "topics": "t", "min_step": 0, "min_retention": "0s"}], "audit": {"path": "a"}})
    assert not isinstance(info.value, ConfigProblems)
    assert str(info.value) == "rules[0].min_step: expected an integer >= 1 (records), got 0"
    assert info.value.problems == (str(info.value),)


def test_secrets_stay_hidden_among_several_problems() -> None:
    with pytest.raises(ConfigProblems) as info:
        c.from_dict({
            "kafka": {"bootstrap_servers": ["k1:9092"], "retries": "x",
                      "security": {"protocol": "SASL_SSL", "sasl_mechanism": "PLAIN", "sasl_username": "u", "sasl_password": SECRET}},
            "rules": [{"name": "r", "topics": "t", "min_retention": "0s"}],
            "audit": {"path": "a"},
        })
    assert [p.split(":")[0] for p in info.value.problems] == ["kafka.retries", "kafka.security.sasl_password"]
    assert SECRET not in str(info.value)
