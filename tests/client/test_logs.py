"""The runner's log forwarding: line splitting, UTF-8 handling, cutting, batching, loss."""

import base64
import time
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from tests.client.world import Recorder, Request, accept_all, dead_url, recording_server
from tuneplane.client.logs import Line, LineSplitter, LogShipper, encode_line
from tuneplane.client.transport import RetryPolicy, Transport
from tuneplane.contract.limits import LOG_BATCH_MAX_LINES, LOG_LINE_MAX_CHARS
from tuneplane.contract.protocol import parse_log_lines


def split(*chunks: bytes, max_bytes: int = 100) -> list[Line]:
    splitter = LineSplitter(max_bytes)
    lines = [line for chunk in chunks for line in splitter.feed(chunk)]
    return lines + splitter.end()


def test_lines_are_split_across_chunks() -> None:
    assert split(b"a\nb", b"c\r\n", b"\nd") == [Line(b"a"), Line(b"bc"), Line(b""), Line(b"d")]
    assert split(b"") == []
    assert split(b"x\n") == [Line(b"x")]
    # A bare \r returns to the line's start, as a terminal does: a progress bar redrawn
    # many times (tqdm) is one line, its last state, wherever the chunks were cut.
    assert split(b"progress 1\rprogress 2\n") == [Line(b"progress 2")]
    assert split(b"\r 10%", b"\r 20%\r", b" 30%\n", b"x\r", b"\ny") == [
        Line(b" 30%"),
        Line(b"x"),
        Line(b"y"),
    ]


def test_a_long_line_keeps_its_head_and_counts_the_rest() -> None:
    assert split(b"0123456789" * 3, b"abc\nnext\n", max_bytes=8) == [
        Line(b"01234567", 25),
        Line(b"next"),
    ]
    # A line that never ends does not grow the buffer past the limit.
    splitter = LineSplitter(8)
    for _ in range(1000):
        splitter.feed(b"x" * 1000)
    assert splitter.end() == [Line(b"x" * 8, 999_992)]


@given(st.lists(st.binary(max_size=40), max_size=20), st.integers(1, 30))
def test_splitting_loses_nothing_within_the_limit(chunks: list[bytes], max_bytes: int) -> None:
    lines = split(*chunks, max_bytes=max_bytes)
    whole = b"".join(chunks)
    expected = whole.split(b"\n")
    if whole.endswith(b"\n") or not whole:
        expected = expected[:-1]
    assert len(lines) == len(expected)
    for line, original in zip(lines, expected, strict=True):
        shown = original.removesuffix(b"\r").rsplit(b"\r", 1)[-1]  # what a terminal shows
        if line.cut:
            assert line.head + b"?" * line.cut != shown
            assert shown.startswith(line.head)
            assert len(line.head) + line.cut == len(shown)
        else:
            assert line.head == shown


def test_utf8_text_is_sent_as_text() -> None:
    assert encode_line(Line("étape 1 — ok ✓".encode())) == ("étape 1 — ok ✓", None)


def test_invalid_utf8_is_replaced_and_the_bytes_kept() -> None:
    raw = b"loss \xff\xfe 0.5"
    text, data = encode_line(Line(raw))
    assert text == "loss \ufffd\ufffd 0.5"
    assert data is not None
    assert base64.b64decode(data) == raw


def test_nul_is_never_sent_in_text() -> None:
    text, data = encode_line(Line(b"a\x00b"))
    assert text == "a\ufffdb"
    assert data is not None
    assert base64.b64decode(data) == b"a\x00b"


def test_long_lines_are_cut_with_a_visible_marker() -> None:
    text, data = encode_line(Line(b"y" * 20_000))
    assert len(text) == LOG_LINE_MAX_CHARS
    assert text.endswith("[… line cut by tuneplane: 20000 bytes in all]")
    assert data is None
    # Cut by the splitter in the middle of a character: still clean UTF-8.
    head = ("é" * 10).encode()[:7]
    text, data = encode_line(Line(head, cut=13))
    assert text == "ééé [… line cut by tuneplane: 20 bytes in all]"
    assert data is None


def test_encoded_lines_pass_the_servers_rules() -> None:
    lines = [Line(b"ok"), Line(b"\xff" * 70_000), Line(b"\x00"), Line("é".encode() * 9000, 5)]
    body = {
        "lines": [
            {"seq": i, "stream": "stdout", "time": 1.0, "text": t, "data": d}
            for i, (t, d) in enumerate(encode_line(line) for line in lines)
        ]
    }
    assert len(parse_log_lines(body)) == 4


def shipper(url: str, **options: Any) -> LogShipper:
    transport = Transport(url, "tpi_secret", timeout=2.0)
    settings: dict[str, Any] = {
        "interval": 0.02,
        "retry": RetryPolicy(attempts=3, first_delay=0.01, max_delay=0.02),
    }
    settings.update(options)
    return LogShipper(transport, **settings)


def test_lines_are_numbered_batched_and_sent() -> None:
    with recording_server() as (url, recorder):
        logs = shipper(url, interval=10.0)
        for i in range(2500):
            logs.add("stdout" if i % 2 else "stderr", Line(f"line {i}".encode()))
        stats = logs.close(5)
        requests = recorder.to("/api/v1/ingest/logs")
    assert (stats.lines, stats.sent, sum(stats.dropped.values())) == (2500, 2500, 0)
    assert stats.loss_summary() is None
    assert all(len(r.body["lines"]) <= LOG_BATCH_MAX_LINES for r in requests)
    sent = [line for r in requests for line in r.body["lines"]]
    assert [line["seq"] for line in sent] == list(range(2500))
    assert sent[3] == {"seq": 3, "stream": "stdout", "time": sent[3]["time"], "text": "line 3"}
    assert abs(sent[3]["time"] - time.time()) < 60
    assert requests[0].headers["Authorization"] == "Bearer tpi_secret"


def test_a_full_buffer_drops_new_lines_and_the_child_never_waits() -> None:
    logs = shipper(dead_url(), max_lines=100, retry=RetryPolicy(attempts=1000, first_delay=0.05))
    started = time.perf_counter()
    for i in range(5000):
        logs.add("stdout", Line(b"x" * 100 + str(i).encode()))
    assert time.perf_counter() - started < 2.0
    stats = logs.close(0.3)
    assert stats.lines == 5000
    assert stats.sent == 0
    assert stats.dropped["buffer full"] >= 4800
    assert sum(stats.dropped.values()) == 5000
    summary = stats.loss_summary()
    assert summary is not None
    assert summary.startswith("tuneplane: 0 of 5000 log lines delivered (5000 dropped: ")
    assert "buffer full" in summary
    assert "server unreachable" in summary


def test_log_batches_are_retried_after_server_errors() -> None:
    failures = iter([503, 503])

    def flaky(request: Request) -> tuple[int, Any]:
        status = next(failures, 200)
        return (status, {}) if status != 200 else accept_all(request)

    with recording_server(Recorder(answer=flaky)) as (url, recorder):
        logs = shipper(url)
        logs.add("stdout", Line(b"hello"))
        stats = logs.close(5)
        assert len(recorder.to("/logs")) == 3
    assert stats.sent == 1
