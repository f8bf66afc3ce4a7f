"""The rules settings follow: each refuses what it must, in one line naming the value."""

import pytest

from tuneplane.client.settings import FLUSH_TIMEOUT, QUEUE_MAX_POINTS
from tuneplane.contract import environment
from tuneplane.contract.settings import (
    DATABASE_URL,
    HOST,
    HTTP_URL,
    PORT,
    RUN_ID,
    Reader,
    Rule,
    SettingError,
    credential,
)
from tuneplane.server.settings import INGEST_TOKEN_DAYS

DAYS = "must be a finite number of days greater than 0 and at most 3650"
SECONDS = "must be a finite number of seconds from 0 to 3600"
PORTS = "must be a whole number from 1 to 65535"
POINTS = "must be a whole number of points from 1 to 10000000"
ATTEMPTS = "must be a whole number from 1 to 2147483647"

HOSTILE = ["nan", "NaN", "inf", "-inf", "0", "-1", "abc", "thirty", " ", "1e400"]


def refusal(rule: Rule[object], raw: str, label: str = "X") -> str:
    with pytest.raises(SettingError) as refused:
        rule.check(label, raw)
    (line,) = refused.value.problems
    assert str(refused.value) == line
    return line


@pytest.mark.parametrize("raw", [*HOSTILE, "3650.5", "1e9", "30 days", "0x1e"])
def test_token_days_must_be_finite_positive_and_bounded(raw: str) -> None:
    rule = INGEST_TOKEN_DAYS.rule
    assert refusal(rule, raw, INGEST_TOKEN_DAYS.name) == (
        f"TUNEPLANE_INGEST_TOKEN_DAYS={raw!r}: {DAYS}"
    )


@pytest.mark.parametrize(("raw", "days"), [("30", 30.0), ("0.5", 0.5), ("3650", 3650.0)])
def test_token_days_accepted(raw: str, days: float) -> None:
    assert INGEST_TOKEN_DAYS.read({INGEST_TOKEN_DAYS.name: raw}) == days


def test_token_days_default_when_unset_or_empty() -> None:
    assert INGEST_TOKEN_DAYS.read({}) == 30.0
    assert INGEST_TOKEN_DAYS.read({INGEST_TOKEN_DAYS.name: ""}) == 30.0


@pytest.mark.parametrize("raw", ["nan", "inf", "-1", "abc", "thirty", "3601", "-0.5"])
def test_flush_timeout_must_be_finite_and_not_negative(raw: str) -> None:
    assert refusal(FLUSH_TIMEOUT.rule, raw, FLUSH_TIMEOUT.name) == (
        f"TUNEPLANE_FLUSH_TIMEOUT={raw!r}: {SECONDS}"
    )


def test_flush_timeout_may_be_zero() -> None:
    assert FLUSH_TIMEOUT.read({FLUSH_TIMEOUT.name: "0"}) == 0.0
    assert FLUSH_TIMEOUT.read({FLUSH_TIMEOUT.name: "2.5"}) == 2.5
    assert FLUSH_TIMEOUT.read({}) == 10.0


@pytest.mark.parametrize(
    "raw", [*HOSTILE, "65536", "8000.0", "1_000", "٣", " 8000", "+", "99999999999999999999"]
)
def test_port_must_be_a_whole_number_in_range(raw: str) -> None:
    assert refusal(PORT, raw, "TUNEPLANE_PORT") == f"TUNEPLANE_PORT={raw!r}: {PORTS}"


@pytest.mark.parametrize("raw", ["1", "8000", "65535", "+80"])
def test_port_accepted(raw: str) -> None:
    assert PORT.check("TUNEPLANE_PORT", raw) == int(raw)


@pytest.mark.parametrize("raw", [*HOSTILE, "10000001", "1.5"])
def test_queue_points_must_be_a_whole_number_in_range(raw: str) -> None:
    assert refusal(QUEUE_MAX_POINTS.rule, raw, QUEUE_MAX_POINTS.name) == (
        f"TUNEPLANE_QUEUE_MAX_POINTS={raw!r}: {POINTS}"
    )


@pytest.mark.parametrize("raw", [*HOSTILE, "2147483648", "3.0"])
def test_attempt_must_be_a_whole_number_from_one(raw: str) -> None:
    setting = environment.JOB_ATTEMPT_SETTING
    assert refusal(setting.rule, raw, setting.name) == (
        f"TUNEPLANE_JOB_ATTEMPT={raw!r}: {ATTEMPTS}"
    )


@pytest.mark.parametrize(
    "raw",
    [
        "localhost:8000",
        "ftp://host",
        "http://",
        "http://host:port",
        "http://host:99999",
        "http://host/?q=1",
        "http://host/#top",
        "http://two words",
        "abc",
        "nan",
    ],
)
def test_urls_must_be_http(raw: str) -> None:
    assert refusal(HTTP_URL, raw).endswith(
        ": must be an http:// or https:// URL such as http://host:8000"
    )


@pytest.mark.parametrize(
    "raw", ["http://127.0.0.1:8000", "https://tp.example.org/", "http://[::1]:8000/tp"]
)
def test_urls_accepted(raw: str) -> None:
    assert HTTP_URL.check("X", raw) == raw


@pytest.mark.parametrize("raw", ["bad host", "host\t", "café", "a/b", "x" * 254])
def test_hosts_refused(raw: str) -> None:
    assert refusal(HOST, raw) == f"X={raw!r}: must be a host name or an IP address such as 0.0.0.0"


@pytest.mark.parametrize("raw", ["127.0.0.1", "::", "10.1.2.3", "::1", "tp.example.org"])
def test_hosts_accepted(raw: str) -> None:
    assert HOST.check("X", raw) == raw


@pytest.mark.parametrize(
    "raw", ["garbage", "mysql://h/db", "sqlite://", "sqlite:///", "postgres://h/db", "nan"]
)
def test_database_urls_refused(raw: str) -> None:
    assert refusal(DATABASE_URL, raw) == (
        f"X={raw!r}: must be sqlite:///PATH or postgresql://user@host/db"
    )


def test_database_url_password_never_prints() -> None:
    line = refusal(DATABASE_URL, "postgres://me:hunter2@db.example.org/tp")
    assert "hunter2" not in line
    assert line.startswith("X='postgres://me:***@db.example.org/tp': ")


@pytest.mark.parametrize("raw", ["no-slash", "a/", "/b", "a/b/c", "a b/c", "ä/b", "a/" + "x" * 129])
def test_run_ids_refused(raw: str) -> None:
    assert refusal(RUN_ID, raw) == (
        f"X={raw!r}: must be 'project/run', each part 1-128 ASCII letters, digits, '_' or '-'"
    )


@pytest.mark.parametrize("raw", ["tpi_token", "tpk_", "two words", "tpk_café", ""])
def test_credentials_never_print(raw: str) -> None:
    rule = credential("tpk_", "an API key")
    if raw == "tpk_":
        assert rule.check("K", raw) == raw  # a prefix alone is for the server to refuse
        return
    line = refusal(rule, raw, "K")
    assert line == "K (value hidden): must be an API key (tpk_…, printable ASCII)"


def test_reader_reports_every_bad_value_once_each() -> None:
    reader = Reader({"TUNEPLANE_PORT": "abc", "TUNEPLANE_FLUSH_TIMEOUT": "nan"})
    assert reader.get(FLUSH_TIMEOUT) == 10.0  # the default stands in until done()
    assert reader.check(PORT, "--port", "0") is None
    with pytest.raises(SettingError) as refused:
        reader.done()
    assert refused.value.problems == (
        f"TUNEPLANE_FLUSH_TIMEOUT='nan': {SECONDS}",
        f"--port='0': {PORTS}",
    )
