"""The Arena ``POST /ingest`` contract, rule by rule, through the real app.

Every test runs on a real SQLite file and a real PostgreSQL database (the ``client`` fixture).
Limits are written here as literals on purpose: these tests pin the published contract, not
whatever ``tuneplane.contract.limits`` happens to say. Every refusal also checks that nothing
of the refused batch was stored.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.helpers import PROJECT, RUN, alert, log, run_url
from tuneplane.server.app import create_app
from tuneplane.server.settings import Secret, Settings

PROJECTS = "/api/v1/projects"
BODY_LIMIT = 256 * 1024
#: Stands for a key that is left out of an item.
MISSING: Any = object()
#: A string value replaced by a raw JSON literal (NaN, 1e400, ...) after encoding.
RAW = "__raw_literal__"


# --- helpers ----------------------------------------------------------------------------------


def post(client: TestClient, body: dict[str, Any] | bytes) -> Any:
    if isinstance(body, bytes):
        return client.post("/ingest", content=body, headers={"Content-Type": "application/json"})
    return client.post("/ingest", json=body)


def with_raw(body: dict[str, Any], literal: str) -> bytes:
    """``body`` encoded, with the one ``RAW`` placeholder replaced by ``literal`` verbatim."""
    text = json.dumps(body)
    assert text.count(json.dumps(RAW)) == 1
    return text.replace(json.dumps(RAW), literal).encode()


def setting(item: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    """A copy of ``item`` with ``key`` set to ``value``, or removed when ``value`` is MISSING."""
    item = dict(item)
    if value is MISSING:
        item.pop(key, None)
    else:
        item[key] = value
    return item


def ok_log(log_id: str = "e0", step: int = 0, **extra: Any) -> dict[str, Any]:
    return log(log_id, step, {"reward": 0.5}, **extra)


def error_of(response: Any, status: int) -> dict[str, Any]:
    """The ``error`` object of a JSON error answer, after checking its shape."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    payload = response.json()
    assert list(payload) == ["error"], payload
    error: dict[str, Any] = payload["error"]
    assert error["status"] == status
    assert isinstance(error["code"], str)
    assert error["code"]
    assert isinstance(error["message"], str)
    assert error["message"]
    return error


def assert_names_field(error: dict[str, Any], field: str, *, exact: bool = True) -> None:
    """The message starts with the field path, and ``details`` names it with a rule."""
    assert "details" in error, f"no details naming {field!r}: {error}"
    details = error["details"]
    assert details, error
    for detail in details:
        assert set(detail) == {"field", "rule"}, detail
        assert isinstance(detail["field"], str)
        assert isinstance(detail["rule"], str)
        assert detail["rule"]
    if exact:
        assert error["message"].startswith(f"{field}: "), error["message"]
        assert details[0]["field"] == field, details
    else:
        assert error["message"].startswith(field), error["message"]
        assert details[0]["field"].startswith(field), details


def assert_nothing_stored(client: TestClient) -> None:
    response = client.get(PROJECTS)
    assert response.status_code == 200
    assert response.json() == []


def refuse(
    client: TestClient,
    body: dict[str, Any] | bytes,
    field: str | None,
    *,
    status: int = 422,
    exact: bool = True,
) -> dict[str, Any]:
    """Post ``body`` to an empty server: refused with ``status`` naming ``field``, nothing
    stored."""
    error = error_of(post(client, body), status)
    if field is not None:
        assert_names_field(error, field, exact=exact)
    assert_nothing_stored(client)
    return error


Case = tuple[str, dict[str, Any] | bytes, str | None]


def refuse_each(
    client: TestClient, cases: list[Case], *, status: int = 422, exact: bool = True
) -> None:
    """``refuse`` for each ``(label, body, field)``; every failing case is reported at once."""
    failures = []
    for label, body, field in cases:
        try:
            refuse(client, body, field, status=status, exact=exact)
        except AssertionError as exc:
            failures.append(f"{label}: {exc}")
    assert not failures, f"{len(failures)} of {len(cases)} cases failed:\n" + "\n\n".join(failures)


def accept(client: TestClient, body: dict[str, Any] | bytes) -> dict[str, Any]:
    response = post(client, body)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def counts(result: dict[str, Any]) -> dict[str, Any]:
    return {key: result[key] for key in ("logs", "alerts", "points")}


def snapshot(client: TestClient, project: str = PROJECT, run: str = RUN) -> dict[str, Any]:
    """Everything the read API says about one run (and the project list)."""
    metrics = client.get(run_url(project, run) + "/metrics").json()
    return {
        "projects": client.get(PROJECTS).json(),
        "runs": client.get(f"{PROJECTS}/{project}/runs").json(),
        "metrics": metrics,
        "points": {
            m["metric"]: client.get(run_url(project, run) + f"/points/{m['metric']}").json()
            for m in metrics
        },
        "alerts": client.get(run_url(project, run) + "/alerts").json(),
    }


def the_run(client: TestClient, project: str = PROJECT, run: str = RUN) -> dict[str, Any]:
    runs = client.get(f"{PROJECTS}/{project}/runs").json()
    matching = [r for r in runs if r["run"] == run]
    assert len(matching) == 1, runs
    return matching[0]


def points_of(client: TestClient, metric: str, project: str = PROJECT, run: str = RUN) -> list:
    response = client.get(run_url(project, run) + f"/points/{metric}")
    assert response.status_code == 200, response.text
    return [(p["step"], p["value"], p["log_id"]) for p in response.json()["points"]]


def padded(body: dict[str, Any], size: int) -> bytes:
    """``body`` as JSON, padded with trailing whitespace to exactly ``size`` bytes."""
    raw = json.dumps(body).encode()
    assert len(raw) <= size
    return raw + b" " * (size - len(raw))


# --- body size --------------------------------------------------------------------------------


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
@pytest.mark.parametrize(
    ("size", "status"),
    [(BODY_LIMIT, 200), (BODY_LIMIT + 1, 413)],
    ids=["exactly-256KiB", "one-byte-over"],
)
def test_body_size_limit(client: TestClient, chunked: bool, size: int, status: int) -> None:
    raw = padded({"logs": [ok_log()]}, size)
    assert len(raw) == size
    if chunked:

        def pieces() -> Iterator[bytes]:
            for start in range(0, len(raw), 10_000):
                yield raw[start : start + 10_000]

        response = client.post(
            "/ingest", content=pieces(), headers={"Content-Type": "application/json"}
        )
        assert "content-length" not in response.request.headers
    else:
        response = post(client, raw)
        assert response.request.headers["content-length"] == str(size)
    if status == 200:
        assert response.status_code == 200, response.text
        assert the_run(client)["point_count"] == 1
    else:
        error_of(response, 413)
        assert_nothing_stored(client)


def test_huge_body_of_valid_looking_items_is_413_not_parsed(client: TestClient) -> None:
    # 129 items would be a 422 if this body were parsed; its size decides first.
    items = [alert(f"a{i}", text="x" * 4000) for i in range(129)]
    raw = json.dumps({"alerts": items}).encode()
    assert len(raw) > 2 * BODY_LIMIT
    refused = post(client, raw)
    error_of(refused, 413)
    # Closed with the answer: the rest of a refused body is never read.
    assert refused.headers["connection"] == "close"
    assert_nothing_stored(client)


# --- body shape -------------------------------------------------------------------------------


def test_invalid_json_or_non_object_body_is_400(client: TestClient) -> None:
    invalid_json = [b"", b"{", b"not json", b'{"logs": [}', b"{'logs': []}", b"\xff\xfe{}"]
    deep = b"[" * 100_000
    non_objects = [b"[]", b'[{"logs": []}]', b'"logs"', b"1", b"null", b"true"]
    cases: list[Case] = [(repr(raw[:20]), raw, None) for raw in [*invalid_json, deep, *non_objects]]
    refuse_each(client, cases, status=400)
    for raw in [*invalid_json, *non_objects]:
        assert post(client, raw).json()["error"]["message"].startswith("body")


def test_malformed_body_error_names_the_body_field_in_details(client: TestClient) -> None:
    # The one error shape: 400s name their field and rule in ``details`` like 422s do.
    refuse_each(client, [("invalid JSON", b"{", "body"), ("array", b"[]", "body")], status=400)


def test_wrong_container_types_are_422(client: TestClient) -> None:
    cases: list[tuple[dict[str, Any], str]] = [
        ({"logs": {}}, "logs"),
        ({"logs": "e1"}, "logs"),
        ({"logs": 1}, "logs"),
        ({"alerts": {"alert_id": "a1"}}, "alerts"),
        ({"logs": [1]}, "logs[0]"),
        ({"logs": [ok_log(), "e1"]}, "logs[1]"),
        ({"logs": [ok_log(), None]}, "logs[1]"),
        ({"logs": [ok_log()], "alerts": [["a1"]]}, "alerts[0]"),
    ]
    refuse_each(client, [(json.dumps(body), body, field) for body, field in cases])


def _logs(count: int, **extra: Any) -> list[dict[str, Any]]:
    return [ok_log(f"e{i}", i, **extra) for i in range(count)]


def _alerts(count: int, **extra: Any) -> list[dict[str, Any]]:
    return [alert(f"a{i}", **extra) for i in range(count)]


def test_item_count_outside_1_to_128_is_refused(client: TestClient) -> None:
    cases: list[Case] = [
        ("no lists", {}, None),
        ("0 logs", {"logs": []}, None),
        ("0 alerts", {"alerts": []}, None),
        ("0 logs and 0 alerts", {"logs": [], "alerts": []}, None),
        ("129 logs", {"logs": _logs(129)}, None),
        ("129 alerts", {"alerts": _alerts(129)}, None),
        ("100 logs + 29 alerts", {"logs": _logs(100), "alerts": _alerts(29)}, None),
    ]
    refuse_each(client, cases)


def test_item_count_from_1_to_128_is_accepted(client: TestClient) -> None:
    for logs, alerts in [(128, 0), (0, 128), (100, 28), (1, 0), (0, 1)]:
        run = f"run-{logs}-{alerts}"
        body: dict[str, Any] = {}
        if logs:
            body["logs"] = _logs(logs, run=run)
        if alerts:
            body["alerts"] = _alerts(alerts, run=run)
        result = accept(client, body)
        assert counts(result) == {
            "logs": {"new": logs, "duplicate": 0},
            "alerts": {"new": alerts, "duplicate": 0},
            "points": logs,
        }
        stored = the_run(client, run=run)
        assert (stored["point_count"], stored["alert_count"]) == (logs, alerts)


# --- one project, one run ---------------------------------------------------------------------


def test_items_of_another_project_or_run_are_refused(client: TestClient) -> None:
    other_run, other_project = {"run": "other-run"}, {"project": "other"}
    cases: list[Case] = [
        ("log run", {"logs": [ok_log("e0"), ok_log("e1", **other_run)]}, "logs[1].run"),
        ("log project", {"logs": [ok_log("e0"), ok_log("e1", **other_project)]}, "logs[1].project"),
        ("alert run", {"logs": [ok_log()], "alerts": [alert("a1", **other_run)]}, "alerts[0].run"),
        (
            "alert project",
            {"logs": [ok_log()], "alerts": [alert("a1", **other_project)]},
            "alerts[0].project",
        ),
        ("alerts run", {"alerts": [alert("a0"), alert("a1", **other_run)]}, "alerts[1].run"),
    ]
    refuse_each(client, cases)


def test_run_id_equal_to_run_or_omitted_is_accepted(client: TestClient) -> None:
    body = {
        "logs": [ok_log("e0", run_id=RUN), ok_log("e1", 1)],
        "alerts": [alert("a0", run_id=RUN), alert("a1")],
    }
    result = accept(client, body)
    assert result["logs"]["new"] == 2
    assert result["alerts"]["new"] == 2


def test_run_id_different_from_run_is_refused(client: TestClient) -> None:
    cases: list[Case] = [
        ("other", {"logs": [ok_log(run_id="other-run")]}, "logs[0].run_id"),
        ("project", {"logs": [ok_log("e0"), ok_log("e1", 1, run_id=PROJECT)]}, "logs[1].run_id"),
        ("alert", {"logs": [ok_log()], "alerts": [alert("a1", run_id="x")]}, "alerts[0].run_id"),
        ("number", {"logs": [ok_log(run_id=5)]}, "logs[0].run_id"),
    ]
    refuse_each(client, cases)


def test_ids_of_1_to_128_allowed_characters_are_accepted(client: TestClient) -> None:
    project = "P" * 64 + "_-09az" * 10 + "AZ" * 2
    run = "r" * 128
    assert len(project) == len(run) == 128
    where = {"project": project, "run": run}
    body = {
        "logs": [ok_log("L" * 128, **where), ok_log("a", 1, **where), ok_log("Az09_-", 2, **where)],
        "alerts": [alert("A" * 128, **where), alert("-", **where)],
    }
    result = accept(client, body)
    assert result["logs"]["new"] == 3
    assert result["alerts"]["new"] == 2
    assert [p["project"] for p in client.get(PROJECTS).json()] == [project]
    log_ids = [p[2] for p in points_of(client, "reward", project, run)]
    assert log_ids == ["L" * 128, "a", "Az09_-"]
    alerts = client.get(run_url(project, run) + "/alerts").json()
    assert sorted(a["alert_id"] for a in alerts) == sorted(["A" * 128, "-"])


BAD_IDS: list[Any] = ["", "x" * 129, "a b", "a/b", "é", "a.b", "ab\n", 5, ["ab"], None, MISSING]


@pytest.mark.parametrize("key", ["project", "run", "log_id", "alert_id"])
def test_invalid_id_is_refused(client: TestClient, key: str) -> None:
    cases: list[Case] = []
    for value in BAD_IDS:
        label = "missing" if value is MISSING else repr(value)
        if key == "alert_id":
            body = {"logs": [ok_log()], "alerts": [setting(alert("a1"), key, value)]}
            cases.append((label, body, "alerts[0].alert_id"))
        else:
            body = {"logs": [ok_log("e0"), setting(ok_log("e1", 1), key, value)]}
            cases.append((label, body, f"logs[1].{key}"))
    refuse_each(client, cases)


# --- log events -------------------------------------------------------------------------------


def test_invalid_step_is_refused(client: TestClient) -> None:
    cases: list[Case] = []
    for step in [-1, 1.5, "3", True, None, MISSING, 2**63, [1]]:
        body = {"logs": [ok_log("e0"), setting(ok_log("e1"), "step", step)]}
        cases.append(("missing" if step is MISSING else repr(step), body, "logs[1].step"))
    refuse_each(client, cases)


def test_step_from_0_to_2_63_minus_1_is_accepted(client: TestClient) -> None:
    accept(client, {"logs": [ok_log("e0", 0), ok_log("e1", 2**63 - 1)]})
    assert [p[0] for p in points_of(client, "reward")] == [0, 2**63 - 1]
    assert the_run(client)["last_step"] == 2**63 - 1


def _metrics(count: int) -> dict[str, float]:
    return {f"m{i:03}": float(i) for i in range(count)}


def test_invalid_metrics_object_is_refused(client: TestClient) -> None:
    cases: list[Case] = []
    for label, metrics in [
        ("missing", MISSING),
        ("null", None),
        ("0 metrics", {}),
        ("129 metrics", _metrics(129)),
        ("list", [0.5]),
        ("string", "reward"),
        ("number", 0.5),
    ]:
        body = {"logs": [ok_log("e0"), setting(ok_log("e1", 1), "metrics", metrics)]}
        cases.append((label, body, "logs[1].metrics"))
    refuse_each(client, cases)


def test_1_and_128_metrics_are_accepted(client: TestClient) -> None:
    result = accept(client, {"logs": [log("e0", 0, _metrics(128)), log("e1", 1, {"m000": 1})]})
    assert result["points"] == 129
    metrics = client.get(run_url() + "/metrics").json()
    assert sorted(m["metric"] for m in metrics) == sorted(_metrics(128))


def test_metric_value_that_is_not_a_finite_number_is_refused(client: TestClient) -> None:
    cases: list[Case] = []
    for value in [True, False, "0.5", "", None, [0.5], {"value": 0.5}]:
        body = {"logs": [ok_log("e0"), log("e1", 1, {"loss": 0.25, "reward": value})]}
        cases.append((repr(value), body, "logs[1].metrics.reward"))
    # Not strict JSON, but what Python's json.dumps writes; and numbers beyond float range.
    for literal in ["NaN", "Infinity", "-Infinity", "1e400", "-1e400", "1" + "0" * 400]:
        body = {"logs": [ok_log("e0"), log("e1", 1, {"loss": 0.25, "reward": RAW})]}
        cases.append((literal[:10], with_raw(body, literal), "logs[1].metrics.reward"))
    refuse_each(client, cases)
    for _, body, _ in cases:
        message = post(client, body).json()["error"]["message"]
        assert message.startswith("logs[1].metrics.reward: not a finite number"), message


def test_finite_numbers_and_integers_are_stored(client: TestClient) -> None:
    literals = ["3", "0", "-7", "-0.0", "0.125", "1.5e300", "-2.5e-300", "12345678901234567890"]
    metrics = ", ".join(f'"v{i}": {literal}' for i, literal in enumerate(literals))
    raw = with_raw({"logs": [log("e0", 4, {"placeholder": RAW})]}, "0")
    raw = raw.replace(b'"placeholder": 0', f"{metrics}".encode())
    assert accept(client, raw)["points"] == len(literals)
    for i, literal in enumerate(literals):
        assert points_of(client, f"v{i}") == [(4, float(literal), "e0")], literal


def test_printable_metric_names_are_accepted(client: TestClient) -> None:
    names = ["a", "arena/step_seconds", "train/loss/mean", "x" * 128, "é" * 128, "報酬", "a b"]
    accept(client, {"logs": [log("e0", 0, dict.fromkeys(names, 1.0))]})
    metrics = client.get(run_url() + "/metrics").json()
    assert sorted(m["metric"] for m in metrics) == sorted(names)
    assert points_of(client, "train/loss/mean") == [(0, 1.0, "e0")]


def test_unprintable_or_overlong_metric_name_is_refused(client: TestClient) -> None:
    cases: list[Case] = []
    for name in ["", "x" * 129, "é" * 129, "a\nb", "a\tb", "\x00", "a\u2028b", "\x7f"]:
        body = {"logs": [ok_log("e0"), log("e1", 1, {"reward": 1.0, name: 1.0})]}
        cases.append((repr(name[:10]), body, "logs[1].metrics"))
    refuse_each(client, cases, exact=False)
    name = "x" * 129
    refuse(client, {"logs": [log("e0", 0, {name: 1.0})]}, f"logs[0].metrics.{name}")


# --- the error shape --------------------------------------------------------------------------


def test_error_message_starts_with_the_field_path_and_details_name_every_violation(
    client: TestClient,
) -> None:
    logs = [ok_log(f"e{i}", i) for i in range(4)]
    logs[3] = log("e3", 3, {"loss": 0.1, "reward": "high"})
    error = refuse(client, {"logs": logs}, "logs[3].metrics.reward")
    assert error["code"] == "invalid"
    assert error["message"].startswith("logs[3].metrics.reward: not a finite number")

    several = {
        "logs": [
            setting(ok_log("e0"), "step", -1),
            ok_log("e1", 1),
            log("e2", 2, {"reward": True}),
        ],
        "alerts": [alert("a1", level="fatal")],
    }
    error = refuse(client, several, "logs[0].step")
    fields = [detail["field"] for detail in error["details"]]
    assert fields == ["logs[0].step", "logs[2].metrics.reward", "alerts[0].level"]


# --- config -----------------------------------------------------------------------------------

FULL_CONFIG = {
    "participant": "burtenshaw",
    "submission_id": "submission-id",
    "run_id": RUN,
    "model": "Qwen/Qwen3-0.6B",
    "model_revision": "abc123",
    "recipe": "grpo",
    "num_updates": 39,
    "train_tasks": 0.5,
}


def test_full_config_is_stored(client: TestClient) -> None:
    accept(client, {"logs": [ok_log(config=FULL_CONFIG)]})
    assert the_run(client)["config"] == FULL_CONFIG


def test_invalid_config_is_refused(client: TestClient) -> None:
    cases: list[Case] = []
    for config, key in [
        ({"learning_rate": 0.1}, "learning_rate"),
        ({"participant": 5}, "participant"),
        ({"model": None}, "model"),
        ({"recipe": ["grpo"]}, "recipe"),
        ({"num_updates": "39"}, "num_updates"),
        ({"num_updates": -1}, "num_updates"),
        ({"train_tasks": -0.5}, "train_tasks"),
        ({"train_tasks": True}, "train_tasks"),
        ({"num_updates": None}, "num_updates"),
        ("submission-id", None),
        (["submission-id"], None),
    ]:
        field = "logs[1].config" + (f".{key}" if key else "")
        body = {"logs": [ok_log("e0"), ok_log("e1", 1, config=config)]}
        cases.append((json.dumps(config), body, field))
    nan = {"logs": [ok_log("e0"), ok_log("e1", 1, config={"num_updates": RAW})]}
    cases.append(("NaN", with_raw(nan, "NaN"), "logs[1].config.num_updates"))
    refuse_each(client, cases)


def test_repeating_the_same_config_is_accepted(client: TestClient) -> None:
    accept(client, {"logs": [ok_log("e0", config=FULL_CONFIG)]})
    reordered = dict(reversed(FULL_CONFIG.items()))
    result = accept(
        client,
        {
            "logs": [ok_log("e1", 1, config=reordered), ok_log("e2", 2)],
            "alerts": [alert("a1", config=FULL_CONFIG)],
        },
    )
    assert result["logs"]["new"] == 2
    assert result["alerts"]["new"] == 1
    assert the_run(client)["config"] == FULL_CONFIG


def _assert_config_conflict(client: TestClient, body: dict[str, Any]) -> None:
    error = error_of(post(client, body), 409)
    assert error["code"] == "conflict"
    assert "cannot change" in error["message"]


def test_changed_config_is_409_and_nothing_of_the_batch_is_stored(client: TestClient) -> None:
    changes = {
        "number": {**FULL_CONFIG, "num_updates": 40},
        "string": {**FULL_CONFIG, "model_revision": "def456"},
        "subset": {"submission_id": "submission-id"},
        "added-key": {key: value for key, value in FULL_CONFIG.items() if key != "recipe"},
    }
    for label, changed in changes.items():
        where = {"run": f"run-{label}"}
        first = {
            "logs": [ok_log("e0", config=FULL_CONFIG, **where)],
            "alerts": [alert("a0", config=FULL_CONFIG, **where)],
        }
        accept(client, first)
        before = snapshot(client, run=where["run"])
        body = {
            "logs": [log("e-new", 7, {"reward": 9.0, "new_metric": 1.0}, config=changed, **where)],
            "alerts": [alert("a-new", **where)],
        }
        _assert_config_conflict(client, body)
        assert snapshot(client, run=where["run"]) == before, label
        # Nothing of the refused batch was kept: its IDs are still new afterwards.
        result = accept(
            client, {"logs": [ok_log("e-new", 7, **where)], "alerts": [alert("a-new", **where)]}
        )
        assert result["logs"] == {"new": 1, "duplicate": 0}, label
        assert result["alerts"] == {"new": 1, "duplicate": 0}, label
        assert the_run(client, run=where["run"])["config"] == FULL_CONFIG, label


@pytest.mark.parametrize("created_by", ["logs", "alerts"])
def test_config_for_a_run_created_without_one_is_409(client: TestClient, created_by: str) -> None:
    first = {"logs": [ok_log("e0")]} if created_by == "logs" else {"alerts": [alert("a0")]}
    accept(client, first)
    before = snapshot(client)
    _assert_config_conflict(client, {"logs": [ok_log("e-new", 3, config={"recipe": "grpo"})]})
    _assert_config_conflict(client, {"alerts": [alert("a-new", config={"recipe": "grpo"})]})
    assert snapshot(client) == before
    assert the_run(client)["config"] is None


def test_config_stays_fixed_after_a_server_restart(database_url: str, tmp_path: Path) -> None:
    """The stored config decides, not what one server process remembers."""
    settings = Settings(
        data_dir=tmp_path / "data", database_url=database_url, ingest_secret=Secret("s3cret")
    )
    with TestClient(create_app(settings), raise_server_exceptions=False) as first:
        first.headers["Authorization"] = "Bearer s3cret"
        accept(first, {"logs": [ok_log(config=FULL_CONFIG)]})
        accept(first, {"alerts": [alert("a0", run="no-config")]})
    with TestClient(create_app(settings), raise_server_exceptions=False) as second:
        second.headers["Authorization"] = "Bearer s3cret"
        before = [snapshot(second), snapshot(second, run="no-config")]
        changed = {**FULL_CONFIG, "num_updates": 40}
        _assert_config_conflict(second, {"logs": [ok_log("e-new", 1, config=changed)]})
        _assert_config_conflict(
            second, {"logs": [ok_log("e-new", 1, run="no-config", config=FULL_CONFIG)]}
        )
        assert [snapshot(second), snapshot(second, run="no-config")] == before
        result = accept(second, {"logs": [ok_log("e-new", 1, config=FULL_CONFIG)]})
        assert result["logs"] == {"new": 1, "duplicate": 0}


def test_two_configs_in_one_batch_are_409(client: TestClient) -> None:
    grpo, ppo = {"recipe": "grpo"}, {"recipe": "ppo"}
    for body in [
        {"logs": [ok_log("e0", config=grpo), ok_log("e1", 1, config=ppo)]},
        {"logs": [ok_log("e0", config=grpo), ok_log("e1", 1), ok_log("e2", 2, config=ppo)]},
        {
            "logs": [ok_log("e0", config=grpo)],
            "alerts": [alert("a0", config={**grpo, "model": "m"})],
        },
    ]:
        _assert_config_conflict(client, body)
        assert_nothing_stored(client)


# --- alerts -----------------------------------------------------------------------------------


def test_alert_is_readable_with_all_its_fields(client: TestClient) -> None:
    seed = alert(
        "sandbox-cleanup-39",
        "Sandbox cleanup timed out",
        run_id=RUN,
        text="Training ended after 39 updates. Evaluation will use the last checkpoint.",
        step=39,
    )
    accept(client, {"alerts": [seed]})
    response = client.get(run_url() + "/alerts")
    assert response.status_code == 200
    (stored,) = response.json()
    assert set(stored) >= {"alert_id", "title", "text", "level", "step", "received_at"}
    assert {key: stored[key] for key in ("alert_id", "title", "text", "level", "step")} == {
        "alert_id": "sandbox-cleanup-39",
        "title": "Sandbox cleanup timed out",
        "text": seed["text"],
        "level": "error",
        "step": 39,
    }
    assert isinstance(stored["received_at"], int | float)


def test_alert_boundary_values_are_accepted(client: TestClient) -> None:
    alerts = [
        alert("title-200", "é" * 200, level="info"),
        alert("title-1", "x", level="warn"),
        alert("text-4000", text="é" * 4000),
        alert("text-null", text=None),
        alert("text-missing"),
        alert("step-null", step=None),
        alert("step-0", step=0),
        alert("step-max", step=2**63 - 1),
    ]
    result = accept(client, {"alerts": alerts})
    assert result["alerts"] == {"new": len(alerts), "duplicate": 0}
    stored = {a["alert_id"]: a for a in client.get(run_url() + "/alerts").json()}
    assert stored["title-200"]["title"] == "é" * 200
    assert stored["title-200"]["level"] == "info"
    assert stored["title-1"]["level"] == "warn"
    assert stored["text-4000"]["text"] == "é" * 4000
    assert stored["text-null"]["text"] is None
    assert stored["text-missing"]["text"] is None
    assert stored["text-missing"]["step"] is None
    assert stored["step-null"]["step"] is None
    assert stored["step-0"]["step"] == 0
    assert stored["step-max"]["step"] == 2**63 - 1


BAD_ALERT_VALUES: dict[str, list[Any]] = {
    "title": ["", "x" * 201, "é" * 201, None, MISSING, 5],
    "text": ["x" * 4001, 5, ["x"]],
    "level": ["warning", "ERROR", "critical", "", None, MISSING, 1],
    "step": [-1, 1.5, "3", True, 2**63],
}


@pytest.mark.parametrize("key", list(BAD_ALERT_VALUES))
def test_invalid_alert_field_is_refused(client: TestClient, key: str) -> None:
    cases: list[Case] = []
    for value in BAD_ALERT_VALUES[key]:
        body = {"logs": [ok_log()], "alerts": [alert("a0"), setting(alert("a1"), key, value)]}
        label = "missing" if value is MISSING else repr(value)[:20]
        cases.append((label, body, f"alerts[1].{key}"))
    refuse_each(client, cases)


def test_alert_only_batch_registers_the_run_without_metrics(client: TestClient) -> None:
    result = accept(client, {"alerts": [alert("a0", step=3)]})
    assert counts(result) == {
        "logs": {"new": 0, "duplicate": 0},
        "alerts": {"new": 1, "duplicate": 0},
        "points": 0,
    }
    assert [p["project"] for p in client.get(PROJECTS).json()] == [PROJECT]
    run = the_run(client)
    assert run["point_count"] == 0
    assert run["alert_count"] == 1
    assert client.get(run_url()).status_code == 200
    metrics = client.get(run_url() + "/metrics")
    assert metrics.status_code == 200
    assert metrics.json() == []


# --- idempotency ------------------------------------------------------------------------------


def test_retried_log_id_with_different_content_changes_nothing(client: TestClient) -> None:
    accept(client, {"logs": [log("e1", 1, {"reward": 0.5}), log("e2", 2, {"reward": 0.75})]})
    before = snapshot(client)
    summary = client.get(run_url() + "/metrics/reward").json()
    assert (summary["count"], summary["min"], summary["max"], summary["last"]) == (
        2,
        0.5,
        0.75,
        0.75,
    )

    retry = {
        "logs": [
            log("e2", 2, {"reward": 100.0}),
            log("e1", 9, {"reward": -100.0, "loss": 3.0}),
        ]
    }
    result = accept(client, retry)
    assert counts(result) == {
        "logs": {"new": 0, "duplicate": 2},
        "alerts": {"new": 0, "duplicate": 0},
        "points": 0,
    }
    assert snapshot(client) == before
    assert points_of(client, "reward") == [(1, 0.5, "e1"), (2, 0.75, "e2")]
    assert client.get(run_url() + "/metrics/reward").json() == summary


def test_retried_alert_id_with_different_content_changes_nothing(client: TestClient) -> None:
    accept(client, {"alerts": [alert("a1", "Original title", level="warn", text="first", step=1)]})
    before = snapshot(client)
    changed = alert("a1", "Replaced title", level="error", text="second", step=2)
    result = accept(client, {"alerts": [changed]})
    assert result["alerts"] == {"new": 0, "duplicate": 1}
    assert snapshot(client) == before
    (stored,) = client.get(run_url() + "/alerts").json()
    assert (stored["title"], stored["level"], stored["text"], stored["step"]) == (
        "Original title",
        "warn",
        "first",
        1,
    )


def test_response_counts_new_and_duplicate_items(client: TestClient) -> None:
    accept(
        client,
        {
            "logs": [log("e1", 1, {"reward": 1.0}), log("e2", 2, {"reward": 2.0})],
            "alerts": [alert("a1")],
        },
    )
    result = accept(
        client,
        {
            "logs": [
                log("e1", 1, {"reward": 1.0}),
                log("e3", 3, {"reward": 3.0, "loss": 0.3, "arena/step_seconds": 1.1}),
                log("e2", 2, {"reward": 2.0}),
            ],
            "alerts": [alert("a2"), alert("a1"), alert("a3")],
        },
    )
    assert counts(result) == {
        "logs": {"new": 1, "duplicate": 2},
        "alerts": {"new": 2, "duplicate": 1},
        "points": 3,
    }
    run = the_run(client)
    assert run["point_count"] == 5
    assert run["alert_count"] == 3


def test_distinct_log_ids_at_the_same_step_are_distinct_points(client: TestClient) -> None:
    result = accept(
        client, {"logs": [log("e-a", 5, {"reward": 0.25}), log("e-b", 5, {"reward": 0.75})]}
    )
    assert result["points"] == 2
    accept(client, {"logs": [log("e-c", 5, {"reward": 0.5})]})
    assert sorted(points_of(client, "reward")) == [
        (5, 0.25, "e-a"),
        (5, 0.5, "e-c"),
        (5, 0.75, "e-b"),
    ]
    summary = client.get(run_url() + "/metrics/reward").json()
    assert (summary["count"], summary["min"], summary["max"]) == (3, 0.25, 0.75)


def test_an_id_repeated_inside_one_batch_is_stored_once(client: TestClient) -> None:
    result = accept(
        client,
        {
            "logs": [log("e1", 1, {"reward": 0.5}), log("e1", 2, {"reward": 0.9})],
            "alerts": [alert("a1", "First"), alert("a1", "Second")],
        },
    )
    assert counts(result) == {
        "logs": {"new": 1, "duplicate": 1},
        "alerts": {"new": 1, "duplicate": 1},
        "points": 1,
    }
    assert points_of(client, "reward") == [(1, 0.5, "e1")]
    assert [a["title"] for a in client.get(run_url() + "/alerts").json()] == ["First"]
    run = the_run(client)
    assert (run["point_count"], run["alert_count"]) == (1, 1)


def test_the_same_ids_in_other_runs_are_independent(client: TestClient) -> None:
    places = [(PROJECT, RUN), (PROJECT, "run-2"), ("other-project", RUN)]
    for number, (project, run) in enumerate(places):
        body = {
            "logs": [log("e1", 1, {"reward": float(number)}, project=project, run=run)],
            "alerts": [alert("a1", f"title {number}", project=project, run=run)],
        }
        result = accept(client, body)
        assert result["logs"] == {"new": 1, "duplicate": 0}
        assert result["alerts"] == {"new": 1, "duplicate": 0}
    for number, (project, run) in enumerate(places):
        assert points_of(client, "reward", project, run) == [(1, float(number), "e1")]
        alerts = client.get(run_url(project, run) + "/alerts").json()
        assert [a["title"] for a in alerts] == [f"title {number}"]


# --- robustness -------------------------------------------------------------------------------


@pytest.mark.parametrize("field", ["title", "text"])
def test_nul_in_alert_text_is_refused_on_both_engines(client: TestClient, field: str) -> None:
    """PostgreSQL text cannot hold NUL: both engines refuse it rather than differ."""
    body = {"alerts": [alert("a1", **{field: "bad\x00" + field})]}
    response = post(client, body)
    assert error_of(response, 422)["details"][0]["field"] == f"alerts[0].{field}"
    assert client.get("/api/v1/projects").json() == []


def test_nul_in_a_config_value_is_stored_exactly(client: TestClient) -> None:
    response = post(client, {"logs": [ok_log(config={"recipe": "bad\x00recipe"})]})
    assert response.status_code == 200, response.text
    assert the_run(client)["config"] == {"recipe": "bad\x00recipe"}


# --- authorization ----------------------------------------------------------------------------


def test_bad_credentials_are_401_and_store_nothing(client: TestClient) -> None:
    secret = client.headers["Authorization"].removeprefix("Bearer ")
    del client.headers["Authorization"]
    headers: list[dict[str, str]] = [
        {},
        {"Authorization": ""},
        {"Authorization": "Bearer"},
        {"Authorization": "Bearer "},
        {"Authorization": "Bearer wrong-secret"},
        {"Authorization": f"Bearer {secret}x"},
        {"Authorization": f"Basic {secret}"},
        {"Authorization": "Basic dGVzdDp0ZXN0"},
        {"Authorization": f"Token {secret}"},
        {"X-Ingest-Token": secret},
    ]
    for header in headers:
        response = client.post("/ingest", json={"logs": [ok_log()]}, headers=header)
        error = error_of(response, 401)
        assert error["code"] == "unauthorized", header
        assert secret not in response.text
        assert_nothing_stored(client)


def test_unset_secret_disables_ingestion_and_keeps_serving_runs(
    database_url: str, tmp_path: Path
) -> None:
    enabled = Settings(
        data_dir=tmp_path / "data", database_url=database_url, ingest_secret=Secret("s3cret")
    )
    with TestClient(create_app(enabled), raise_server_exceptions=False) as writer:
        response = writer.post(
            "/ingest", json={"logs": [ok_log()]}, headers={"Authorization": "Bearer s3cret"}
        )
        assert response.status_code == 200, response.text

    disabled = Settings(data_dir=tmp_path / "data", database_url=database_url, ingest_secret=None)
    with TestClient(create_app(disabled), raise_server_exceptions=False) as reader:
        for headers in ({"Authorization": "Bearer s3cret"}, {}):
            response = reader.post("/ingest", json={"logs": [ok_log("e9", 9)]}, headers=headers)
            error = error_of(response, 503)
            assert "disabled" in error["message"]
        projects = reader.get(PROJECTS)
        assert projects.status_code == 200
        assert [p["project"] for p in projects.json()] == [PROJECT]
        assert reader.get(run_url() + "/metrics/reward").json()["count"] == 1


@pytest.mark.parametrize(
    ("environ", "accepted", "refused"),
    [
        ({}, None, "anything"),
        ({"TRACKIO_INGEST_TOKEN": "trackio-token"}, "trackio-token", "other"),
        ({"TUNEPLANE_INGEST_SECRET": "tp-secret"}, "tp-secret", "other"),
        (
            {"TUNEPLANE_INGEST_SECRET": "tp-secret", "TRACKIO_INGEST_TOKEN": "trackio-token"},
            "tp-secret",
            "trackio-token",
        ),
    ],
    ids=["unset", "trackio-only", "tuneplane-only", "both"],
)
def test_ingest_secret_from_environment(
    environ: dict[str, str], accepted: str | None, refused: str
) -> None:
    settings = Settings.from_env(environ={"TUNEPLANE_DIR": "/srv/unused", **environ})
    if accepted is None:
        assert settings.ingest_secret is None
    else:
        assert settings.ingest_secret is not None
        assert settings.ingest_secret.matches(accepted)
        assert not settings.ingest_secret.matches(refused)
        assert accepted not in repr(settings)


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({"TRACKIO_DIR": "/data/trackio"}, "/data/trackio"),
        ({"TUNEPLANE_DIR": "/srv/tuneplane"}, "/srv/tuneplane"),
        ({"TUNEPLANE_DIR": "/srv/tuneplane", "TRACKIO_DIR": "/data/trackio"}, "/srv/tuneplane"),
    ],
    ids=["trackio-only", "tuneplane-only", "both"],
)
def test_data_dir_from_environment(environ: dict[str, str], expected: str) -> None:
    settings = Settings.from_env(environ=environ)
    assert settings.data_dir == Path(expected)
    assert settings.database_url == f"sqlite:///{Path(expected) / 'tuneplane.db'}"


def test_trackio_token_authorizes_ingest_end_to_end(database_url: str, tmp_path: Path) -> None:
    settings = Settings.from_env(
        environ={
            "TRACKIO_DIR": str(tmp_path / "trackio"),
            "TUNEPLANE_DATABASE_URL": database_url,
            "TRACKIO_INGEST_TOKEN": "arena-worker-credential",
        }
    )
    assert settings.data_dir == tmp_path / "trackio"
    with TestClient(create_app(settings), raise_server_exceptions=False) as client:
        body = {"logs": [ok_log()]}
        wrong = client.post("/ingest", json=body, headers={"Authorization": "Bearer nope"})
        error_of(wrong, 401)
        assert_nothing_stored(client)
        right = client.post(
            "/ingest", json=body, headers={"Authorization": "Bearer arena-worker-credential"}
        )
        assert right.status_code == 200, right.text


# --- reads of unknown things ------------------------------------------------------------------


def test_unknown_project_run_or_metric_is_404(client: TestClient) -> None:
    accept(client, {"logs": [ok_log()], "alerts": [alert("a1")]})
    unknown_project = "/api/v1/projects/nope"
    unknown_run = f"/api/v1/projects/{PROJECT}/runs/nope"
    paths = [
        f"{unknown_project}/runs",
        f"{unknown_project}/runs/{RUN}",
        f"{unknown_project}/runs/{RUN}/metrics",
        f"{unknown_project}/runs/{RUN}/alerts",
        f"{unknown_project}/runs/{RUN}/points/reward",
        f"{unknown_project}/runs/{RUN}/metrics/reward",
        unknown_run,
        f"{unknown_run}/metrics",
        f"{unknown_run}/alerts",
        f"{unknown_run}/points/reward",
        f"{unknown_run}/metrics/reward",
        run_url() + "/points/nope",
        run_url() + "/metrics/nope",
    ]
    for path in paths:
        error = error_of(client.get(path), 404)
        assert error["code"] == "not_found", path


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        (
            b'{"alerts": [{"project": "p", "run": "r", "alert_id": "a", "title": "x\\ud800",'
            b' "level": "info"}]}',
            "alerts[0].title",
        ),
        (
            b'{"logs": [{"project": "p", "run": "r", "log_id": "a", "step": 1, "metrics": {"m": 1},'
            b' "config": {"model": "\\udc00"}}]}',
            "logs[0].config.model",
        ),
        (
            b'{"logs": [{"project": "p", "run": "r", "log_id": "a", "step": 1,'
            b' "metrics": {"m": NaN, "n\\ud800": 1}}]}',
            "logs[0].metrics",
        ),
    ],
)
def test_lone_surrogates_are_refused_not_stored(client: TestClient, raw: bytes, field: str) -> None:
    response = post(client, raw)
    assert error_of(response, 400)["details"][0]["field"] == field
    assert client.get("/api/v1/projects").json() == []


def test_escaped_surrogate_pairs_are_ordinary_text(client: TestClient) -> None:
    raw = (
        b'{"alerts": [{"project": "p", "run": "r", "alert_id": "a", "title": "ok \\ud83d\\ude00",'
        b' "level": "info"}]}'
    )
    assert post(client, raw).status_code == 200
    assert client.get("/api/v1/projects/p/runs/r/alerts").json()[0]["title"] == "ok \U0001f600"
