from pathlib import Path

import pytest

from tuneplane.contract.settings import SettingError
from tuneplane.server.settings import SETTINGS, Secret, Settings, SlurmSettings

DOCS = Path(__file__).parents[2] / "docs" / "configuration.md"


def test_every_setting_is_documented() -> None:
    text = DOCS.read_text()
    for spec in SETTINGS:
        assert f"`{spec.name}`" in text, f"{spec.name} is missing from docs/configuration.md"


def test_every_setting_is_documented_with_its_default() -> None:
    rows = {
        line.split("|")[1].strip(): line for line in DOCS.read_text().splitlines() if "|" in line
    }
    for spec in SETTINGS:
        row = rows[f"`{spec.name}`"]
        default = spec.shown_default
        assert default in ("unset", "") or f"`{default}`" in row, (spec.name, default)


@pytest.mark.parametrize(
    ("environ", "flags", "problems"),
    [
        (
            {"TUNEPLANE_INGEST_TOKEN_DAYS": "nan"},
            {},
            [
                "TUNEPLANE_INGEST_TOKEN_DAYS='nan': must be a finite number of days greater "
                "than 0 and at most 3650"
            ],
        ),
        (
            {"TUNEPLANE_PORT": "abc", "TUNEPLANE_HOST": "a b"},
            {},
            [
                "TUNEPLANE_HOST='a b': must be a host name or an IP address such as 0.0.0.0",
                "TUNEPLANE_PORT='abc': must be a whole number from 1 to 65535",
            ],
        ),
        (
            {"TUNEPLANE_PORT": "abc"},
            {"port": "0"},  # the flag wins, and is checked by the same rule
            ["--port='0': must be a whole number from 1 to 65535"],
        ),
        (
            {"TUNEPLANE_DATABASE_URL": "sqlite:///ok.db"},
            {"database_url": "sqlite://"},
            ["--database-url='sqlite://': must be sqlite:///PATH or postgresql://user@host/db"],
        ),
        (
            {"TUNEPLANE_SLURM_CONF": "slurm.conf"},
            {},
            [
                "TUNEPLANE_SLURM_CONF='slurm.conf': must be default or the absolute path of an "
                "existing slurm.conf"
            ],
        ),
        (
            {"TUNEPLANE_SLURM_PARTITION": "gpu"},
            {},
            ["TUNEPLANE_SLURM_PARTITION: set without TUNEPLANE_SLURM_CONF"],
        ),
    ],
)
def test_bad_values_are_named_one_line_each(
    tmp_path: Path, environ: dict[str, str], flags: dict[str, str], problems: list[str]
) -> None:
    with pytest.raises(SettingError) as refused:
        Settings.from_env({"TUNEPLANE_DIR": str(tmp_path), **environ}, **flags)
    assert list(refused.value.problems) == problems


def test_a_file_in_place_of_the_data_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("")
    with pytest.raises(SettingError, match=r"^TRACKIO_DIR='.*/f': must be a directory, not a"):
        Settings.from_env({"TRACKIO_DIR": str(tmp_path / "f")})


def test_good_values(tmp_path: Path) -> None:
    settings = Settings.from_env(
        {
            "TUNEPLANE_DIR": str(tmp_path),
            "TUNEPLANE_INGEST_TOKEN_DAYS": "0.5",
            "TUNEPLANE_PORT": "9001",
            "TUNEPLANE_HOST": "0.0.0.0",  # noqa: S104
            "TUNEPLANE_INGEST_URL": "https://tp.example.org",
            "TUNEPLANE_DATABASE_URL": "postgresql://me@db/tp",
        }
    )
    assert (settings.ingest_token_days, settings.port) == (0.5, 9001)
    assert settings.ingest_url == "https://tp.example.org"
    assert settings.database_url == "postgresql://me@db/tp"
    assert Settings.from_env({"TUNEPLANE_DIR": str(tmp_path)}).ingest_token_days == 30


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


def test_the_slurm_engine_settings(tmp_path: Path) -> None:
    conf = tmp_path / "slurm.conf"
    conf.write_text("")
    environ = {"TUNEPLANE_DIR": str(tmp_path), "TUNEPLANE_SLURM_PARTITION": "gpu"}
    given = Settings.from_env({**environ, "TUNEPLANE_SLURM_CONF": str(conf)})
    assert given.slurm == SlurmSettings(conf, "gpu")
    default = Settings.from_env({**environ, "TUNEPLANE_SLURM_CONF": "default"})
    assert default.slurm == SlurmSettings(None, "gpu")
    assert Settings.from_env({"TUNEPLANE_DIR": str(tmp_path)}).slurm is None
