"""Several server processes on one PostgreSQL database."""

from concurrent.futures import ThreadPoolExecutor

import httpx

from tests.conftest import _truncate_postgres
from tests.helpers import log
from tests.serving import running_server

ENV = {"TUNEPLANE_INGEST_SECRET": "pg-secret"}
AUTH = {"Authorization": "Bearer pg-secret"}


def test_two_servers_share_one_database_exactly_once(pg_database_url: str) -> None:
    _truncate_postgres(pg_database_url)
    url = ["--database-url", pg_database_url]
    with running_server(*url, env=ENV) as first, running_server(*url, env=ENV) as second:
        # Both servers receive the same 40 batches at once: retries across servers.
        batches = [
            {"logs": [log(f"e{b}-{i}", b, {"reward": float(i)}) for i in range(16)]}
            for b in range(40)
        ]

        def send(job: tuple[str, dict[str, object]]) -> dict[str, object]:
            base, body = job
            response = httpx.post(base + "/ingest", json=body, headers=AUTH, timeout=30)
            assert response.status_code == 200, response.text
            result: dict[str, object] = response.json()
            return result

        jobs = [(base, body) for body in batches for base in (first, second)]
        with ThreadPoolExecutor(16) as pool:
            results = list(pool.map(send, jobs))
        new = sum(r["logs"]["new"] for r in results)  # type: ignore[index]
        duplicate = sum(r["logs"]["duplicate"] for r in results)  # type: ignore[index]
        assert (new, duplicate) == (640, 640)
        for base in (first, second):
            run = httpx.get(base + "/api/v1/projects/burtenshaw/runs").json()[0]
            assert run["point_count"] == 640
            metric = httpx.get(base + "/api/v1/projects/burtenshaw/runs/arena-run-id/metrics")
            assert metric.json()[0]["count"] == 640


def test_racing_first_batches_with_different_configs(pg_database_url: str) -> None:
    _truncate_postgres(pg_database_url)
    url = ["--database-url", pg_database_url]
    with running_server(*url, env=ENV) as first, running_server(*url, env=ENV) as second:
        for attempt in range(5):
            run = f"race-{attempt}"

            def send(job: tuple[str, str], run: str = run) -> int:
                base, model = job
                body = {
                    "logs": [log(f"{model}-e", 1, {"m": 1.0}, run=run, config={"model": model})]
                }
                return httpx.post(base + "/ingest", json=body, headers=AUTH, timeout=30).status_code

            with ThreadPoolExecutor(2) as pool:
                statuses = sorted(pool.map(send, [(first, "a"), (second, "b")]))
            assert statuses == [200, 409]
            stored = httpx.get(f"{first}/api/v1/projects/burtenshaw/runs/{run}").json()
            assert stored["point_count"] == 1
