"""Unit and property tests of the Arena body parser: ``decode_json_body`` and
``parse_arena_batch``. Pure Python, no server, no database.

Limits are literals here on purpose: these tests pin the published contract.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tuneplane.contract.arena import ArenaBatch, parse_arena_batch
from tuneplane.contract.errors import Conflict, InvalidInput, MalformedRequest
from tuneplane.contract.json_body import decode_json_body

PROJECT = "burtenshaw"
RUN = "arena-run-id"
ID = re.compile(r"[A-Za-z0-9_-]{1,128}")
RAW = "__raw_literal__"

PROPERTY = settings(
    max_examples=60,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def log(log_id: str = "e0", step: int = 0, **extra: Any) -> dict[str, Any]:
    item = {"project": PROJECT, "run": RUN, "step": step, "log_id": log_id}
    return {"metrics": {"reward": 0.5}, **item, **extra}


def alert(alert_id: str = "a0", **extra: Any) -> dict[str, Any]:
    item = {"project": PROJECT, "run": RUN, "alert_id": alert_id, "title": "t", "level": "info"}
    return {**item, **extra}


def parse_text(text: str) -> ArenaBatch:
    """Decode and parse, as the server does."""
    return parse_arena_batch(decode_json_body(text.encode()))


def violations_of(body: object) -> list[tuple[str, str]]:
    with pytest.raises(InvalidInput) as caught:
        parse_arena_batch(body)
    return [(v.field, v.rule) for v in caught.value.violations]


def fields_of(body: object) -> list[str]:
    return [field for field, _ in violations_of(body)]


# --- decode_json_body -------------------------------------------------------------------------


def test_decode_parses_strict_json() -> None:
    body = {"logs": [log(metrics={"reward": 0.75, "arena/step_seconds": 1.2})]}
    assert decode_json_body(json.dumps(body).encode()) == body


@pytest.mark.parametrize(
    "raw",
    [b"", b"{", b"not json", b'{"logs": [}', b"{'a': 1}", b"\xff\xfe{}", b"[" * 100_000],
    ids=["empty", "unclosed", "text", "syntax", "single-quotes", "bad-utf8", "deep-nesting"],
)
def test_decode_refuses_invalid_json_as_malformed(raw: bytes) -> None:
    with pytest.raises(MalformedRequest) as caught:
        decode_json_body(raw)
    assert caught.value.status == 400
    assert caught.value.message.startswith("body: ")


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_decoded_non_finite_literals_are_refused_by_name(literal: str) -> None:
    text = json.dumps({"logs": [log(metrics={"loss": 1, "reward": RAW})]})
    batch = text.replace(json.dumps(RAW), literal)
    with pytest.raises(InvalidInput) as caught:
        parse_text(batch)
    (violation,) = caught.value.violations
    assert violation.field == "logs[0].metrics.reward"
    assert violation.rule.startswith("not a finite number")
    assert literal in violation.rule


@pytest.mark.parametrize("literal", ["1e400", "-1e400", "1" + "0" * 400])
def test_numbers_beyond_float_range_are_refused(literal: str) -> None:
    text = json.dumps({"logs": [log(metrics={"reward": RAW})]}).replace(json.dumps(RAW), literal)
    with pytest.raises(InvalidInput) as caught:
        parse_text(text)
    assert [v.field for v in caught.value.violations] == ["logs[0].metrics.reward"]


# --- body shape and counts --------------------------------------------------------------------


@pytest.mark.parametrize("body", [[], [{"logs": []}], "logs", 1, None, True, 1.5])
def test_a_body_that_is_not_an_object_is_malformed(body: object) -> None:
    with pytest.raises(MalformedRequest) as caught:
        parse_arena_batch(body)
    assert caught.value.status == 400
    assert caught.value.message.startswith("body: ")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"logs": {}}, "logs"),
        ({"logs": "x"}, "logs"),
        ({"alerts": 3}, "alerts"),
        ({"logs": [1]}, "logs[0]"),
        ({"logs": [log(), []]}, "logs[1]"),
        ({"logs": [log()], "alerts": ["a"]}, "alerts[0]"),
    ],
)
def test_wrong_container_types_name_their_field(body: dict[str, Any], field: str) -> None:
    assert fields_of(body) == [field]


@pytest.mark.parametrize(
    ("logs", "alerts", "ok"),
    [
        (0, 0, False),
        (1, 0, True),
        (0, 1, True),
        (128, 0, True),
        (0, 128, True),
        (100, 28, True),
        (129, 0, False),
        (0, 129, False),
        (100, 29, False),
    ],
)
def test_a_batch_holds_1_to_128_items_in_all(logs: int, alerts: int, ok: bool) -> None:
    body = {
        "logs": [log(f"e{i}", i) for i in range(logs)],
        "alerts": [alert(f"a{i}") for i in range(alerts)],
    }
    if ok:
        batch = parse_arena_batch(body)
        assert (len(batch.logs), len(batch.alerts)) == (logs, alerts)
    else:
        with pytest.raises(InvalidInput):
            parse_arena_batch(body)


def test_a_body_without_lists_is_refused() -> None:
    for body in ({}, {"logs": None}, {"other": [log()]}):
        with pytest.raises(InvalidInput):
            parse_arena_batch(body)


# --- field paths and rules --------------------------------------------------------------------


def _with(item: dict[str, Any], **changes: Any) -> dict[str, Any]:
    return {**item, **changes}


def _without(item: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in item.items() if k != key}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"logs": [log("e0"), log("e1", run="other")]}, "logs[1].run"),
        ({"logs": [log("e0"), log("e1", project="other")]}, "logs[1].project"),
        ({"logs": [log()], "alerts": [alert(run="other")]}, "alerts[0].run"),
        ({"logs": [log(run_id="other")]}, "logs[0].run_id"),
        ({"alerts": [alert(run_id=PROJECT)]}, "alerts[0].run_id"),
        ({"logs": [log("x" * 129)]}, "logs[0].log_id"),
        ({"logs": [_without(log(), "log_id")]}, "logs[0].log_id"),
        ({"alerts": [alert("a.b")]}, "alerts[0].alert_id"),
        ({"logs": [log(project="é")]}, "logs[0].project"),
        ({"logs": [log(run=7)]}, "logs[0].run"),
        ({"logs": [log("e0"), log("e1", -1)]}, "logs[1].step"),
        ({"logs": [log(step=True)]}, "logs[0].step"),
        ({"logs": [log(step=2**63)]}, "logs[0].step"),
        ({"logs": [_without(log(), "step")]}, "logs[0].step"),
        ({"logs": [log(metrics={})]}, "logs[0].metrics"),
        ({"logs": [log(metrics={f"m{i}": 1 for i in range(129)})]}, "logs[0].metrics"),
        ({"logs": [_without(log(), "metrics")]}, "logs[0].metrics"),
        ({"logs": [log() for _ in range(3)] + [log(metrics={"reward": "x"})]}, None),
        ({"logs": [log(metrics={"reward": None})]}, "logs[0].metrics.reward"),
        ({"logs": [log(metrics={"reward": False})]}, "logs[0].metrics.reward"),
        ({"logs": [log(metrics={"x" * 129: 1.0})]}, "logs[0].metrics." + "x" * 129),
        ({"logs": [log(config={"foo": "x"})]}, "logs[0].config.foo"),
        ({"logs": [log(config={"participant": 1})]}, "logs[0].config.participant"),
        ({"logs": [log(config={"num_updates": -1})]}, "logs[0].config.num_updates"),
        ({"logs": [log(config={"train_tasks": "3"})]}, "logs[0].config.train_tasks"),
        ({"logs": [log(config="s")]}, "logs[0].config"),
        ({"alerts": [alert(title="")]}, "alerts[0].title"),
        ({"alerts": [alert(title="x" * 201)]}, "alerts[0].title"),
        ({"alerts": [_without(alert(), "title")]}, "alerts[0].title"),
        ({"alerts": [alert(text="x" * 4001)]}, "alerts[0].text"),
        ({"alerts": [alert(level="warning")]}, "alerts[0].level"),
        ({"alerts": [_without(alert(), "level")]}, "alerts[0].level"),
        ({"alerts": [alert(step=-1)]}, "alerts[0].step"),
        ({"alerts": [alert(step=1.5)]}, "alerts[0].step"),
        ({"alerts": [_without(alert(), "alert_id")]}, "alerts[0].alert_id"),
    ],
)
def test_each_broken_rule_names_its_field(body: dict[str, Any], field: str | None) -> None:
    field = field or "logs[3].metrics.reward"
    with pytest.raises(InvalidInput) as caught:
        parse_arena_batch(body)
    error = caught.value
    assert [v.field for v in error.violations] == [field]
    assert error.message.startswith(f"{field}: ")
    assert error.status == 422
    assert error.to_json() == {
        "error": {
            "status": 422,
            "code": "invalid",
            "message": error.message,
            "details": [{"field": field, "rule": error.violations[0].rule}],
        }
    }


def test_the_reward_example_reads_not_a_finite_number() -> None:
    logs = [log(f"e{i}", i) for i in range(3)] + [log("e3", 3, metrics={"reward": "high"})]
    with pytest.raises(InvalidInput) as caught:
        parse_arena_batch({"logs": logs})
    assert caught.value.message.startswith("logs[3].metrics.reward: not a finite number")


@pytest.mark.parametrize("name", ["", "a\nb", "a\tb", "\x00", "\x7f", "a\u2028b", "é" * 129])
def test_unprintable_or_overlong_metric_names_are_refused(name: str) -> None:
    fields = fields_of({"logs": [log(metrics={"ok": 1.0, name: 1.0})]})
    assert len(fields) == 1
    assert fields[0].startswith("logs[0].metrics")


def test_every_violation_is_reported_in_order() -> None:
    body = {
        "logs": [log(step=-1), log("e1", 1), log("e2", 2, metrics={"reward": True})],
        "alerts": [alert(level="fatal", title="")],
    }
    with pytest.raises(InvalidInput) as caught:
        parse_arena_batch(body)
    assert [v.field for v in caught.value.violations] == [
        "logs[0].step",
        "logs[2].metrics.reward",
        "alerts[0].title",
        "alerts[0].level",
    ]
    assert caught.value.message.startswith("logs[0].step: ")


# --- accepted values --------------------------------------------------------------------------


def test_a_valid_batch_parses_into_its_values() -> None:
    config = {
        "participant": "p",
        "submission_id": "s",
        "run_id": RUN,
        "model": "m",
        "model_revision": "r",
        "recipe": "grpo",
        "num_updates": 39,
        "train_tasks": 0.5,
    }
    body = {
        "logs": [
            log("e1", 1, run_id=RUN, config=config, metrics={"reward": 3, "a/b": -0.5}),
            log("e2", 2**63 - 1, metrics={"é 報酬": 1e300}),
        ],
        "alerts": [
            alert("a1", title="x" * 200, text="y" * 4000, level="error", step=39, config=config),
            alert("a2", level="warn", step=None, text=None),
            alert("a3"),
        ],
    }
    batch = parse_arena_batch(body)
    assert (batch.project, batch.run, batch.config) == (PROJECT, RUN, config)
    assert [(x.log_id, x.step, x.metrics) for x in batch.logs] == [
        ("e1", 1, {"reward": 3.0, "a/b": -0.5}),
        ("e2", 2**63 - 1, {"é 報酬": 1e300}),
    ]
    assert [(a.alert_id, a.title, a.text, a.level, a.step) for a in batch.alerts] == [
        ("a1", "x" * 200, "y" * 4000, "error", 39),
        ("a2", "t", None, "warn", None),
        ("a3", "t", None, "info", None),
    ]


def test_one_config_on_some_items_is_the_batch_config() -> None:
    body = {"logs": [log("e0"), log("e1", config={"recipe": "grpo"})], "alerts": [alert()]}
    assert parse_arena_batch(body).config == {"recipe": "grpo"}
    assert parse_arena_batch({"logs": [log()]}).config is None


@pytest.mark.parametrize(
    "other",
    [{"recipe": "ppo"}, {"recipe": "grpo", "num_updates": 1}, {"submission_id": "s"}],
)
def test_differing_configs_in_one_batch_are_a_conflict(other: dict[str, Any]) -> None:
    body = {"logs": [log(config={"recipe": "grpo"})], "alerts": [alert(config=other)]}
    with pytest.raises(Conflict) as caught:
        parse_arena_batch(body)
    assert caught.value.status == 409
    assert "cannot change" in caught.value.message


# --- properties -------------------------------------------------------------------------------

ID_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-"
ids = st.text(ID_CHARS, min_size=1, max_size=128)


def alert_text(*, min_size: int = 0, max_size: int) -> st.SearchStrategy[str]:
    """Any text an alert may carry: Unicode (no lone surrogates) without NUL, which
    PostgreSQL cannot store."""
    characters = st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",))
    return st.text(characters, min_size=min_size, max_size=max_size)


printable = st.characters(
    codec="utf-8", exclude_categories=("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp")
)
metric_names = st.text(printable, min_size=1, max_size=128).filter(str.isprintable)
finite_numbers = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.integers(min_value=-(2**64), max_value=2**64),
)
steps = st.integers(min_value=0, max_value=2**63 - 1)
configs = st.fixed_dictionaries(
    {},
    optional={
        **{
            key: st.text(max_size=20)
            for key in ("participant", "submission_id", "model", "model_revision", "recipe")
        },
        "num_updates": st.integers(min_value=0, max_value=10**6),
        "train_tasks": st.floats(min_value=0, max_value=1e9, allow_nan=False),
    },
)


@st.composite
def valid_bodies(draw: st.DrawFn) -> dict[str, Any]:
    """A valid ``POST /ingest`` body as a worker would send it."""
    project, run = draw(ids), draw(ids)
    config = draw(st.none() | configs)
    log_ids = draw(st.lists(ids, max_size=8, unique=True))
    alert_ids = draw(st.lists(ids, min_size=0 if log_ids else 1, max_size=4, unique=True))
    where = {"project": project, "run": run}
    if draw(st.booleans()):
        where["run_id"] = run

    def with_config(item: dict[str, Any]) -> dict[str, Any]:
        return {**item, "config": config} if config is not None and draw(st.booleans()) else item

    logs = [
        with_config(
            {
                **where,
                "log_id": log_id,
                "step": draw(steps),
                "metrics": draw(
                    st.dictionaries(metric_names, finite_numbers, min_size=1, max_size=6)
                ),
            }
        )
        for log_id in log_ids
    ]
    alerts = []
    for alert_id in alert_ids:
        item: dict[str, Any] = {
            **where,
            "alert_id": alert_id,
            "title": draw(alert_text(min_size=1, max_size=200)),
            "level": draw(st.sampled_from(["info", "warn", "error"])),
        }
        if draw(st.booleans()):
            item["text"] = draw(st.none() | alert_text(max_size=300))
        if draw(st.booleans()):
            item["step"] = draw(st.none() | steps)
        alerts.append(with_config(item))
    body: dict[str, Any] = {}
    if logs or draw(st.booleans()):
        body["logs"] = logs
    if alerts or draw(st.booleans()):
        body["alerts"] = alerts
    return body


@PROPERTY
@given(body=valid_bodies())
def test_any_valid_batch_parses_and_round_trips_its_values(body: dict[str, Any]) -> None:
    batch = parse_text(json.dumps(body, ensure_ascii=False))
    items = body.get("logs", []) + body.get("alerts", [])
    assert (batch.project, batch.run) == (items[0]["project"], items[0]["run"])
    sent_configs = [item["config"] for item in items if "config" in item]
    # An empty config says nothing about the run: it is the same as none.
    expected_config = sent_configs[0] if sent_configs and sent_configs[0] else None
    assert batch.config == expected_config
    assert [(x.log_id, x.step, x.metrics) for x in batch.logs] == [
        (x["log_id"], x["step"], {name: float(v) for name, v in x["metrics"].items()})
        for x in body.get("logs", [])
    ]
    for parsed in batch.logs:
        assert all(type(v) is float and math.isfinite(v) for v in parsed.metrics.values())
    assert [(a.alert_id, a.title, a.text, a.level, a.step) for a in batch.alerts] == [
        (a["alert_id"], a["title"], a.get("text"), a["level"], a.get("step"))
        for a in body.get("alerts", [])
    ]


BAD_VALUE_LITERALS = [
    "true",
    "false",
    "null",
    '"1.5"',
    '""',
    "[]",
    "{}",
    "NaN",
    "Infinity",
    "-Infinity",
    "1e400",
    "-1e999",
]


@PROPERTY
@given(
    body=valid_bodies().filter(lambda body: body.get("logs")),
    data=st.data(),
    literal=st.sampled_from(BAD_VALUE_LITERALS),
)
def test_any_batch_with_one_invalid_metric_value_is_refused_naming_it(
    body: dict[str, Any], data: st.DataObject, literal: str
) -> None:
    index = data.draw(st.integers(min_value=0, max_value=len(body["logs"]) - 1))
    name = data.draw(st.text("abcxyz019_/-", min_size=1, max_size=30))
    body["logs"][index]["metrics"][name] = RAW
    text = json.dumps(body, ensure_ascii=False).replace(json.dumps(RAW), literal)
    with pytest.raises(InvalidInput) as caught:
        parse_text(text)
    field = f"logs[{index}].metrics.{name}"
    assert [
        (v.field, v.rule.startswith("not a finite number")) for v in caught.value.violations
    ] == [(field, True)]
    assert caught.value.message.startswith(f"{field}: not a finite number")


not_ids = st.one_of(
    st.text(max_size=140).filter(lambda s: ID.fullmatch(s) is None),
    ids.map(lambda s: (s * 129)[:129]),
    st.integers(),
    st.none(),
    st.booleans(),
)


@PROPERTY
@given(body=valid_bodies(), data=st.data(), bad=not_ids)
def test_any_batch_with_one_invalid_id_is_refused_naming_it(
    body: dict[str, Any], data: st.DataObject, bad: object
) -> None:
    places = [("logs", i, "log_id") for i in range(len(body.get("logs", [])))]
    places += [("alerts", i, "alert_id") for i in range(len(body.get("alerts", [])))]
    key, index, own_id = data.draw(st.sampled_from(places))
    id_key = data.draw(st.sampled_from(["project", "run", own_id]))
    body[key][index][id_key] = bad
    if id_key == "run":
        body[key][index].pop("run_id", None)
    with pytest.raises(InvalidInput) as caught:
        parse_text(json.dumps(body, ensure_ascii=False))
    assert [v.field for v in caught.value.violations] == [f"{key}[{index}].{id_key}"]


@PROPERTY
@given(
    body=valid_bodies().filter(lambda body: len(body.get("logs", []) + body.get("alerts", [])) > 1),
    data=st.data(),
    other=ids,
)
def test_any_item_naming_another_run_is_refused(
    body: dict[str, Any], data: st.DataObject, other: str
) -> None:
    places = [(key, i) for key in ("logs", "alerts") for i in range(len(body.get(key, [])))]
    # The first item names the run (changing it is the same as changing all the others).
    key, index = data.draw(st.sampled_from(places[1:]))
    assume(other != body[key][index]["run"])
    body[key][index]["run"] = other
    body[key][index].pop("run_id", None)
    with pytest.raises(InvalidInput) as caught:
        parse_arena_batch(body)
    assert [v.field for v in caught.value.violations] == [f"{key}[{index}].run"]


@PROPERTY
@given(logs=st.integers(min_value=0, max_value=200), alerts=st.integers(min_value=0, max_value=200))
def test_any_item_count_is_accepted_exactly_when_from_1_to_128(logs: int, alerts: int) -> None:
    body = {
        "logs": [log(f"e{i}", i) for i in range(logs)],
        "alerts": [alert(f"a{i}") for i in range(alerts)],
    }
    if 1 <= logs + alerts <= 128:
        batch = parse_arena_batch(body)
        assert (len(batch.logs), len(batch.alerts)) == (logs, alerts)
    else:
        with pytest.raises(InvalidInput):
            parse_arena_batch(body)
