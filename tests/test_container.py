"""The container image (Dockerfile, compose.yaml, docs/deploy.md).

What holds without a container engine: the compose file's database URL is one the server
takes, the image's defaults are settings the server accepts, and the build context leaves
out what the image must not carry. With a usable engine (``docker info`` answers), the
``container`` tests build the image and run it: /healthz answers through the published
port, the engine reports the container healthy, the server runs as a user other than root
and keeps its data in the /data volume across a restart."""

from __future__ import annotations

import re
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from tests.serving import free_port
from tuneplane.server.settings import Settings

ROOT = Path(__file__).parents[1]
DOCKER = shutil.which("docker") or "docker"
DOCKERFILE = (ROOT / "Dockerfile").read_text()


def _image_env() -> dict[str, str]:
    return dict(re.findall(r"(TUNEPLANE_[A-Z_]+)=(\S+)", DOCKERFILE))


def test_the_images_defaults_are_settings_the_server_takes(tmp_path: Path) -> None:
    env = {**_image_env(), "TUNEPLANE_DIR": str(tmp_path)}
    settings = Settings.from_env(env)
    assert settings.port == 8000
    assert settings.host == "0.0.0.0"  # noqa: S104 (a container listens on every interface)
    assert _image_env()["TUNEPLANE_DIR"] == "/data"


def test_the_compose_files_database_url_is_one_the_server_takes(tmp_path: Path) -> None:
    compose = yaml.safe_load((ROOT / "compose.yaml").read_text())
    env = compose["services"]["tuneplane"]["environment"]
    url = env["TUNEPLANE_DATABASE_URL"].replace("${POSTGRES_PASSWORD:-tuneplane}", "tuneplane")
    settings = Settings.from_env({"TUNEPLANE_DIR": str(tmp_path), "TUNEPLANE_DATABASE_URL": url})
    assert settings.database_url == "postgresql://tuneplane:tuneplane@postgres:5432/tuneplane"
    depends = compose["services"]["tuneplane"]["depends_on"]["postgres"]
    assert depends["condition"] == "service_healthy"


def test_the_build_context_is_the_package_alone() -> None:
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert ignored[ignored.index("*") + 1 :][:3] == ["!pyproject.toml", "!README.md", "!tuneplane/"]
    copied = re.findall(r"^COPY (?!--from)(.+) \S+$", DOCKERFILE, re.MULTILINE)
    assert copied == ["pyproject.toml README.md", "tuneplane"]


def _engine() -> str | None:
    if shutil.which("docker") is None:
        return None
    answer = subprocess.run([DOCKER, "info"], capture_output=True, timeout=30)
    return DOCKER if answer.returncode == 0 else None


@pytest.fixture(scope="module")
def image() -> Iterator[str]:
    docker = _engine()
    if docker is None:
        pytest.skip("no usable container engine (docker info fails): the image is not built")
    tag = f"tuneplane-test:{uuid.uuid4().hex[:8]}"
    built = subprocess.run(
        [docker, "build", "-t", tag, str(ROOT)], capture_output=True, text=True, timeout=1200
    )
    assert built.returncode == 0, built.stdout + built.stderr
    yield tag
    subprocess.run([docker, "rmi", "-f", tag], capture_output=True, timeout=120)


def _docker(*args: str) -> str:
    done = subprocess.run([DOCKER, *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout.strip()


def _wait_healthz(url: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    raise AssertionError(f"{url} did not answer 200 within {timeout} s")


@pytest.mark.container
def test_the_image_serves_healthz_as_a_user_and_keeps_its_data(image: str) -> None:
    port, volume = free_port(), f"tuneplane-test-{uuid.uuid4().hex[:8]}"
    name = f"tuneplane-test-{uuid.uuid4().hex[:8]}"
    _docker("volume", "create", volume)
    try:
        _docker("run", "-d", "--name", name, "-p", f"127.0.0.1:{port}:8000",
                "-v", f"{volume}:/data", "-e", "TUNEPLANE_INGEST_SECRET=s3cret", image)  # fmt: skip
        _wait_healthz(f"http://127.0.0.1:{port}/healthz")
        assert _docker("exec", name, "id", "-u") != "0"
        key = _docker("exec", name, "cat", "/data/admin.key")
        deadline = time.monotonic() + 90
        while _docker("inspect", "-f", "{{.State.Health.Status}}", name) != "healthy":
            assert time.monotonic() < deadline, "the engine never reported the container healthy"
            time.sleep(2)
        log = {"log_id": "a", "project": "boxed", "run": "r", "step": 1, "metrics": {"x": 1.0}}
        sent = httpx.post(
            f"http://127.0.0.1:{port}/ingest",
            json={"logs": [log]},
            headers={"Authorization": "Bearer s3cret"},
        )
        assert sent.status_code == 200, sent.text
        _docker("restart", name)
        _wait_healthz(f"http://127.0.0.1:{port}/healthz")
        assert _docker("exec", name, "cat", "/data/admin.key") == key
        runs = httpx.get(f"http://127.0.0.1:{port}/api/v1/projects/boxed/runs").json()
        assert [run["run"] for run in runs] == ["r"]
    finally:
        subprocess.run([DOCKER, "rm", "-f", name], capture_output=True, timeout=60)
        subprocess.run([DOCKER, "volume", "rm", "-f", volume], capture_output=True, timeout=60)
