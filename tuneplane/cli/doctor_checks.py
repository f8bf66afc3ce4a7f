"""``tuneplane doctor``: what to watch before workers report. The ingest URL a worker will
use answers and is no loopback address inside a cluster; live streams arrive unbuffered
through whatever proxy is in between; the database and the blob store take writes. Each
check prints one line, and a fix when it fails."""

from __future__ import annotations

import ipaddress
import os
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Literal
from urllib.parse import urlsplit

import httpx

if TYPE_CHECKING:  # the server's packages are imported only where its checks run
    from tuneplane.launch.engines.base import Engine
    from tuneplane.launch.readiness import Capacity
    from tuneplane.server.settings import Settings

#: Seconds a stream's first bytes may take before the doctor calls it buffered (the server
#: sends them at once).
STREAM_FIRST_BYTES_SECONDS = 3.0
#: Variables that say this machine is a node of a cluster.
_CLUSTER_VARIABLES = ("KUBERNETES_SERVICE_HOST", "SLURM_JOB_ID", "SLURM_CLUSTER_NAME")

Verdict = Literal["ok", "warn", "fail", "skip"]


@dataclass(frozen=True, slots=True)
class Check:
    verdict: Verdict
    what: str
    fix: str = ""

    def lines(self) -> list[str]:
        shown = [f"{self.verdict.upper():4}  {self.what}"]
        return shown + ([f"      fix: {self.fix}"] if self.fix else [])


def _is_loopback(host: str) -> bool:
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_address(url: str, environ: Mapping[str, str]) -> Check:
    host = urlsplit(url).hostname or ""
    if not _is_loopback(host):
        return Check("ok", f"{url} is not a loopback address")
    cluster = [name for name in _CLUSTER_VARIABLES if environ.get(name)]
    fix = (
        "set TUNEPLANE_INGEST_URL (on the server) or --server to an address the workers "
        "reach, e.g. the node's or the service's name"
    )
    if cluster:
        return Check("fail", f"{url} is a loopback address inside a cluster ({cluster[0]} "
                     "is set): workers on other nodes cannot reach it", fix)  # fmt: skip
    return Check("warn", f"{url} is a loopback address: only workers on this machine reach it",
                 fix)  # fmt: skip


def check_reachable(client: httpx.Client, url: str) -> Check:
    try:
        answer = client.get(url + "/healthz", timeout=5)
    except httpx.HTTPError as exc:
        return Check("fail", f"{url} does not answer: {type(exc).__name__}: {exc}",
                     "start tuneplane serve there, or give the address it listens on")  # fmt: skip
    if answer.status_code != 200:
        return Check("fail", f"{url}/healthz answered {answer.status_code}: {answer.text[:200]}",
                     "see the server's log: the store it names is unavailable")  # fmt: skip
    return Check("ok", f"{url} answers (store {answer.json().get('store', '?')})")


def _a_run(client: httpx.Client, url: str) -> tuple[str, str] | None:
    for project in client.get(url + "/api/v1/projects", timeout=5).json():
        name = project["project"] if isinstance(project, dict) else project
        runs = client.get(f"{url}/api/v1/projects/{name}/runs", timeout=5).json()
        if runs:
            return name, runs[0]["run"] if "run" in runs[0] else runs[0]["name"]
    return None


def check_stream(client: httpx.Client, url: str) -> Check:
    """A run's live stream must deliver its first bytes at once (the server sends them when
    it opens): a proxy that buffers responses holds them back."""
    try:
        found = _a_run(client, url)
    except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
        return Check("skip", f"live streams not checked: the run list could not be read ({exc})")
    if found is None:
        return Check("skip", "live streams not checked: no run this key may read yet")
    project, run = found
    stream = f"{url}/api/v1/projects/{project}/runs/{run}/stream"
    started = time.monotonic()
    try:
        timeout = httpx.Timeout(5, read=STREAM_FIRST_BYTES_SECONDS)
        with client.stream("GET", stream, timeout=timeout) as answer:
            if answer.status_code != 200:
                return Check("fail", f"{stream} answered {answer.status_code}")
            next(answer.iter_raw())
    except httpx.ReadTimeout:
        return Check("fail", f"live streams are buffered: {stream} sent nothing in "
                     f"{STREAM_FIRST_BYTES_SECONDS:g} s",
                     "turn response buffering off for the server's paths in the proxy (nginx: "
                     "proxy_buffering off; see docs/deploy.md)")  # fmt: skip
    except httpx.HTTPError as exc:
        return Check("fail", f"{stream}: {type(exc).__name__}: {exc}")
    return Check("ok", f"live streams arrive unbuffered ({time.monotonic() - started:.2f} s "
                 f"to the first bytes of {project}/{run})")  # fmt: skip


def server_checks(settings: Settings) -> Iterator[Check]:
    """The store and the blob store of these server settings take writes."""
    from tuneplane.blobs import BlobStoreUnavailable, open_blob_store
    from tuneplane.store.probe import probe_writes

    problem = probe_writes(settings.database_url)
    if problem is None:
        yield Check("ok", "the database takes writes")
    else:
        yield Check("fail", f"the database does not take writes: {problem}",
                    "check the URL, the credentials and the disk (tuneplane db upgrade "
                    "migrates an old database)")  # fmt: skip
    key = f"doctor/probe-{uuid.uuid4().hex}"
    try:
        blobs = open_blob_store(settings.blob_url, settings.data_dir)
        blobs.put(key, b"probe")
        readable = blobs.get(key) == b"probe"
        blobs.delete(key)
    except (BlobStoreUnavailable, OSError) as exc:
        yield Check("fail", f"the blob store does not take writes: {exc}",
                    "check TUNEPLANE_BLOB_URL and its credentials")  # fmt: skip
        return
    verdict: Verdict = "ok" if readable else "fail"
    yield Check(verdict, f"the blob store takes writes ({blobs.location})")
    yield from launch_checks(settings)


_VERDICTS: Final[dict[str, Verdict]] = {"passed": "ok", "failed": "fail", "not_checked": "skip"}


def launch_checks(settings: Settings) -> Iterator[Check]:
    """The recipes read as the server reads them, each engine the settings configure asked
    what it has now, and whether its engine could run each recipe: fleet fit and runtime
    resolution (docs/launch.md)."""
    from tuneplane.contract.settings import SettingError
    from tuneplane.launch.readiness import check_fleet, check_runtime
    from tuneplane.launch.recipes import load_recipes
    from tuneplane.server.launch import open_engines

    directory = settings.recipes_dir
    if directory is None:
        yield Check("skip", "no recipes: TUNEPLANE_RECIPES_DIR is unset, nothing can be launched")
        return
    try:
        recipes = load_recipes(directory)
    except SettingError as exc:
        count = len(exc.problems)
        what = f"the recipes have {count} problem{'s' * (count != 1)}, the first: "
        yield Check("fail", what + exc.problems[0], "fix each line `tuneplane serve` prints")
        return
    yield Check("ok", f"{len(recipes)} recipes in {directory}")
    capacities: dict[str, Capacity | None] = {}
    for name, engine in open_engines(settings).items():
        answer, capacities[name] = _engine_check(engine)
        yield answer
    for name in sorted(recipes):
        recipe = recipes[name]
        if recipe.engine not in capacities:
            yield Check("fail", f"recipe {name}: the {recipe.engine} engine is not configured",
                        "set its settings (docs/configuration.md)")  # fmt: skip
            continue
        capacity = capacities[recipe.engine]
        if capacity is None:
            yield Check("skip", f"recipe {name}: the {recipe.engine} engine did not answer")
            continue
        for check in (check_fleet(recipe, capacity), check_runtime(recipe)):
            yield Check(_VERDICTS[check.status], f"recipe {name}: {check.reason}")


def _engine_check(engine: Engine) -> tuple[Check, Capacity | None]:
    """What the engine reports it has now; None when it does not answer."""
    from tuneplane.launch.engines.base import EngineUnavailable

    try:
        capacity = engine.capacity()
    except EngineUnavailable as exc:
        return Check("fail", f"the {engine.name} engine does not answer: {exc}",
                     "check its settings and that its service runs"), None  # fmt: skip
    has = f"{capacity.cpus} CPUs, {capacity.memory_gb:.1f} GB, {capacity.gpus} GPUs"
    return Check("ok", f"the {engine.name} engine has {has}"), capacity


def run_checks(
    url: str,
    key: str | None,
    environ: Mapping[str, str] = os.environ,
    settings: Settings | None = None,
    say: Callable[[str], None] = print,
) -> int:
    """Run every check, print each; 0 when none failed, else 1."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    checks = [check_address(url, environ)]
    with httpx.Client(headers=headers) as client:
        reachable = check_reachable(client, url)
        checks.append(reachable)
        if reachable.verdict == "ok":
            checks.append(check_stream(client, url))
    if settings is not None:
        checks += server_checks(settings)
    for check in checks:
        for line in check.lines():
            say(line)
    return 1 if any(check.verdict == "fail" for check in checks) else 0
