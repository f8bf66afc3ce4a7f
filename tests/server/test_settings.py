from pathlib import Path

from tuneplane.server.settings import SETTINGS, Secret, Settings

DOCS = Path(__file__).parents[2] / "docs" / "configuration.md"


def test_every_setting_is_documented() -> None:
    text = DOCS.read_text()
    for spec in SETTINGS:
        assert f"`{spec.name}`" in text, f"{spec.name} is missing from docs/configuration.md"


def test_secrets_never_print() -> None:
    secret = Secret("hunter2")
    settings = Settings(data_dir=Path("/x"), database_url="sqlite:////x/db", ingest_secret=secret)
    assert "hunter2" not in repr(settings)
    assert "hunter2" not in str(secret)
    assert secret.matches("hunter2")
    assert not secret.matches("hunter3")


def test_environment_names_and_precedence(tmp_path: Path) -> None:
    from_trackio = Settings.from_env({"TRACKIO_DIR": str(tmp_path), "TRACKIO_INGEST_TOKEN": "t"})
    assert from_trackio.data_dir == tmp_path
    assert from_trackio.ingest_secret is not None
    assert from_trackio.ingest_secret.matches("t")
    assert from_trackio.database_url == f"sqlite:///{tmp_path / 'tuneplane.db'}"
    both = Settings.from_env(
        {
            "TUNEPLANE_DIR": str(tmp_path / "a"),
            "TRACKIO_DIR": str(tmp_path / "b"),
            "TUNEPLANE_INGEST_SECRET": "mine",
            "TRACKIO_INGEST_TOKEN": "theirs",
        }
    )
    assert both.data_dir == tmp_path / "a"
    assert both.ingest_secret is not None
    assert both.ingest_secret.matches("mine")
    assert Settings.from_env({}).ingest_secret is None
    flags = Settings.from_env({"TUNEPLANE_DIR": "/env"}, data_dir=str(tmp_path), port=9)
    assert (flags.data_dir, flags.port) == (tmp_path, 9)
