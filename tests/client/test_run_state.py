"""``run.config.update()`` and ``run.summary``, as W&B users write them: keys added to an
attempt's config (``POST /api/v1/ingest/config`` with ``add``) on both engines, and the
summary sent when the run ends, shown by the run's read, through the real SDK in a fresh
interpreter."""

from __future__ import annotations

import uuid

import httpx

from tests.client.runs import PROJECT, Server
from tests.client.test_init import script


def fresh() -> str:
    return f"state-{uuid.uuid4().hex[:10]}"


def test_keys_are_added_to_an_attempt_s_config_and_never_change(server: Server) -> None:
    run = fresh()
    token = server.start_attempt(run)

    def post(body: object) -> httpx.Response:
        return httpx.post(
            f"{server.base}/api/v1/ingest/config",
            json=body,
            headers={"Authorization": f"Bearer {token}"},
            timeout=10,
        )

    assert post({"config": {"lr": 1}}).status_code == 200
    added = post({"config": {"warmup": 10}, "add": True})
    assert added.status_code == 200, added.text
    assert added.json()["recorded"] == {"attempt": True, "run": False}
    again = post({"config": {"warmup": 10, "lr": 1}, "add": True})
    assert again.json()["recorded"] == {"attempt": False, "run": False}
    changed = post({"config": {"lr": 2, "other": 1}, "add": True})
    assert changed.status_code == 409, changed.text
    assert "config.lr" in changed.json()["error"]["message"]
    bad = post({"config": {"x": 1}, "add": "yes"})
    assert bad.status_code == 422
    assert "add" in bad.text
    found = server.run(run)
    assert found["config"] == {"lr": 1}
    assert found["attempt_configs"] == [{"attempt": 1, "config": {"lr": 1, "warmup": 10}}]
    assert found["summary"] == {}


def test_config_update_and_summary_through_the_sdk(server: Server) -> None:
    run = fresh()
    done = script(
        server,
        f"""
        import tuneplane
        r = tuneplane.init(project="{PROJECT}", name="{run}", config={{"lr": 0.1}})
        r.config.update({{"warmup": 10, "lr": 0.2}})
        r.config["seed"] = 3
        assert r.config == {{"lr": 0.1, "warmup": 10, "seed": 3}}, r.config
        r.log({{"train/loss": 1.0}})
        r.summary["best/acc"] = 0.5
        r.summary["best/acc"] = 0.9
        r.summary.update({{"eval": {{"f1": 0.75}}, "tag": "final"}})
        r.summary.update({{f"k{{i}}": i for i in range(40)}})
        tuneplane.finish()
        """,
    )
    assert done.returncode == 0, done.stderr
    assert "config.lr stays 0.1" in done.stderr
    found = server.run(run)
    assert found["config"] == {"lr": 0.1}
    (declared,) = found["attempt_configs"]
    assert declared["config"] == {"lr": 0.1, "warmup": 10, "seed": 3}
    summary = found["summary"]
    assert summary["best/acc"] == 0.9
    assert summary["eval/f1"] == 0.75
    assert summary["tag"] == "final"
    assert summary["k39"] == 39
    assert len(summary) == 43


def test_a_crash_still_sends_the_summary(server: Server) -> None:
    run = fresh()
    done = script(
        server,
        f"""
        import tuneplane
        with tuneplane.init(project="{PROJECT}", name="{run}") as r:
            r.summary["reached"] = 41
            raise RuntimeError("diverged")
        """,
    )
    assert done.returncode == 1
    found = server.run(run)
    assert found["status"] == "failed"
    assert found["summary"] == {"reached": 41}
