"""The durable spool's journal: what a reporter sends, on local disk before it is sent.

One directory per reporter process, under ``<spool>/<project>/<run>/attempt-<n>/``::

    meta.json          the server, run, attempt and ingest token (mode 0600), written once
    seg-00000001.jsonl one record per line: {"seq", "path", "kind", "count", "body"}
    acks               one line per record the server answered: "<seq>" or "<seq> refused"
    lock               held (flock) while the reporter writes; `tuneplane sync` skips it then

Each record is the request body of one batch (scalars, observation events, alerts,
trajectories) with the IDs it was sent with, written with one ``write()`` of a whole line.
A reporter that dies mid-write leaves a torn last line, which readers ignore. The segment
is ``fsync``-ed at most once a second, when it is full and at close: a crash of the
training process loses nothing written, a power loss at most the last second. Acks are
never ``fsync``-ed: a lost ack only makes ``tuneplane sync`` send a batch again, which the
server takes as the same data. Segments whose every record was acknowledged are deleted, in
order (an acknowledged batch after an unacknowledged one stays, so that sync knows which
points it corrected). The segments together hold at most ``max_bytes``; past that, new
batches are not journaled (counted, and said once), and journaling resumes when deletions
make room.
"""

from __future__ import annotations

import bisect
import contextlib
import itertools
import logging
import os
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import orjson

from tuneplane.client.transport import SUPERSEDED, Outcome

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: journals are not locked
    fcntl = None  # type: ignore[assignment]

FORMAT: Final = 1
META: Final = "meta.json"
ACKS: Final = "acks"
LOCK: Final = "lock"
SEGMENT_PREFIX: Final = "seg-"
SEGMENT_SUFFIX: Final = ".jsonl"
#: A segment is closed and a new one begun past this size (or a quarter of the bound).
SEGMENT_MAX_BYTES: Final = 16 * 2**20
FSYNC_INTERVAL_SECONDS: Final = 1.0
#: An ack line's word for a batch the server refused by rule: sending it again cannot help.
REFUSED: Final = "refused"

logger = logging.getLogger("tuneplane")
_journal_numbers = itertools.count(1)


@dataclass(frozen=True, slots=True)
class Target:
    """Where a journal's batches go: the server, the run, the attempt and its token. An
    offline journal (no token) belongs to an attempt that ``tuneplane sync`` starts later:
    ``group`` names its directory (:mod:`tuneplane.client.offline`)."""

    endpoint: str
    project: str
    run: str
    attempt: int | None
    token: str
    group: str = ""

    def __repr__(self) -> str:  # the token never prints
        return f"Target({self.project}/{self.run} attempt {self.attempt} at {self.endpoint!r})"

    @property
    def offline(self) -> bool:
        """Nothing is posted: the run and attempt do not exist on the server yet."""
        return not self.token

    @property
    def group_name(self) -> str:
        """The directory of the attempt's journals, beneath the run's."""
        if self.group:
            return self.group
        return "attempt-unknown" if self.attempt is None else f"attempt-{self.attempt}"

    def to_json(self) -> dict[str, object]:
        return {
            "format": FORMAT,
            "endpoint": self.endpoint,
            "project": self.project,
            "run": self.run,
            "attempt": self.attempt,
            "token": self.token,
            "group": self.group,
        }


@dataclass(frozen=True, slots=True)
class Location:
    """A journaled batch: its sequence number, and where its body is on disk."""

    seq: int
    segment: int
    offset: int
    size: int


@dataclass
class _Segment:
    number: int
    first_seq: int
    last_seq: int = 0
    size: int = 0
    unacked: int = 0
    closed: bool = False

    @property
    def path_name(self) -> str:
        return segment_name(self.number)


def segment_name(number: int) -> str:
    return f"{SEGMENT_PREFIX}{number:08d}{SEGMENT_SUFFIX}"


@dataclass
class Journal:
    """The writer of one reporter's journal (see the module's docstring). ``append`` runs
    on the sender thread, ``ack`` on the thread that posts; nothing touches the disk until
    the first ``append``. When the directory cannot be written the journal says so once
    and journals nothing more (sending goes on as without a spool)."""

    root: Path
    target: Target
    max_bytes: int
    not_journaled: Counter[str] = field(default_factory=Counter)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _directory: Path | None = None
    _segments: list[_Segment] = field(default_factory=list)
    _fd: int = -1
    _acks_fd: int = -1
    _lock_file: Any = None
    _seq: int = 0
    _bytes: int = 0
    _synced_at: float = 0.0
    _broken: bool = False
    _said_full: bool = False
    _closed: bool = False

    @property
    def directory(self) -> Path | None:
        return self._directory

    def append(self, path: str, kind: str, count: int, body: bytes) -> Location | None:
        """Journal one batch (``body`` its JSON); where it is, or None when it was not
        journaled (the spool is full, closed or broken: counted in ``not_journaled``)."""
        with self._lock:
            if self._closed or self._broken or (self._fd < 0 and not self._open()):
                self.not_journaled[kind] += count
                return None
            seq = self._seq + 1
            head = orjson.dumps({"seq": seq, "path": path, "kind": kind, "count": count})
            line = head[:-1] + b',"body":' + body + b"}\n"
            if self._bytes + len(line) > self.max_bytes:
                self.not_journaled[kind] += count
                self._say_full()
                return None
            try:
                segment = self._segment_for(len(line))
                offset = segment.size + len(line) - len(body) - 2
                os.write(self._fd, line)
                now = time.monotonic()
                if now - self._synced_at >= FSYNC_INTERVAL_SECONDS:
                    os.fsync(self._fd)
                    self._synced_at = now
            except OSError as exc:
                self._break(exc)
                self.not_journaled[kind] += count
                return None
            self._seq = seq
            self._bytes += len(line)
            segment.size += len(line)
            segment.last_seq = seq
            segment.unacked += 1
            return Location(seq, segment.number, offset, len(body))

    def read_back(self, location: Location) -> bytes:
        """The body of a journaled batch, read back from its segment (OSError if gone)."""
        assert self._directory is not None
        with (self._directory / segment_name(location.segment)).open("rb") as file:
            file.seek(location.offset)
            body = file.read(location.size)
        if len(body) != location.size:
            raise OSError(f"segment {location.segment} is shorter than journaled")
        return body

    def ack(self, seq: int, refused: bool = False) -> None:
        """The server answered batch ``seq`` (stored it, or ``refused`` it by rule)."""
        with self._lock:
            if self._acks_fd < 0:
                return
            line = f"{seq} {REFUSED}\n" if refused else f"{seq}\n"
            with contextlib.suppress(OSError):
                os.write(self._acks_fd, line.encode())
            starts = [segment.first_seq for segment in self._segments]
            index = bisect.bisect_right(starts, seq) - 1
            if index >= 0:
                self._segments[index].unacked -= 1
            self._delete_acknowledged()

    def close(self) -> None:
        """Write out what is journaled and let go of the directory; a journal whose every
        batch was acknowledged is removed, so a run without an outage leaves nothing."""
        with self._lock:
            self._closed = True
            with contextlib.suppress(OSError):
                if self._fd >= 0:
                    os.fsync(self._fd)
                    os.close(self._fd)
                if self._acks_fd >= 0:
                    os.close(self._acks_fd)
            self._fd = self._acks_fd = -1
            directory = self._directory
            if directory is not None and not any(s.unacked > 0 for s in self._segments):
                remove_journal(directory)
            if self._lock_file is not None:
                self._lock_file.close()  # releases the flock
                self._lock_file = None

    # -- under the lock ----------------------------------------------------------------

    def _open(self) -> bool:
        # A process may journal more than once (its reporter, its log lines): numbered.
        name = f"{os.getpid()}.{next(_journal_numbers)}-{time.time_ns() // 1_000_000}"
        target = self.target
        directory = self.root / target.project / target.run / target.group_name / name
        try:
            directory.mkdir(mode=0o700, parents=True)
            self._lock_file = (directory / LOCK).open("w")
            if fcntl is not None:
                fcntl.flock(self._lock_file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            meta = directory / (META + ".tmp")
            fd = os.open(meta, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "wb") as file:
                file.write(orjson.dumps(self.target.to_json()))
                file.flush()
                os.fsync(file.fileno())
            meta.replace(directory / META)
            flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND
            self._acks_fd = os.open(directory / ACKS, flags, 0o600)
        except OSError as exc:
            self._break(exc, directory)
            return False
        self._directory = directory
        return self._new_segment(1)

    def _new_segment(self, number: int) -> bool:
        assert self._directory is not None
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND
        try:
            self._fd = os.open(self._directory / segment_name(number), flags, 0o600)
        except OSError as exc:
            self._break(exc)
            return False
        self._segments.append(_Segment(number, self._seq + 1))
        return True

    def _segment_for(self, size: int) -> _Segment:
        """The open segment, or a new one when ``size`` more bytes would overfill it."""
        segment = self._segments[-1]
        limit = min(SEGMENT_MAX_BYTES, max(self.max_bytes // 4, 1))
        if segment.size and segment.size + size > limit:
            os.fsync(self._fd)
            os.close(self._fd)
            self._fd = -1
            segment.closed = True
            if not self._new_segment(segment.number + 1):
                raise OSError(f"could not begin segment {segment.number + 1}")
            self._delete_acknowledged()
            segment = self._segments[-1]
        return segment

    def _delete_acknowledged(self) -> None:
        assert self._directory is not None
        while self._segments and self._segments[0].closed and self._segments[0].unacked <= 0:
            segment = self._segments.pop(0)
            with contextlib.suppress(OSError):
                (self._directory / segment.path_name).unlink()
            self._bytes -= segment.size
            # Room was made: the next time the spool fills is a new episode, said again. A
            # smaller batch that fits into what was left is not one.
            self._said_full = False

    def _say_full(self) -> None:
        if not self._said_full:
            self._said_full = True
            logger.warning(
                "tuneplane: the spool %s is full (%d MB): new batches are not journaled "
                "until `tuneplane sync` or delivery makes room; each is counted in health()",
                self._directory or self.root,
                self.max_bytes // 2**20,
            )

    def _break(self, exc: OSError, directory: Path | None = None) -> None:
        self._broken = True
        logger.warning(
            "tuneplane: the spool %s cannot be written (%s): nothing more is journaled",
            directory or self._directory or self.root,
            exc,
        )


def credential_refused(outcome: Outcome) -> bool:
    """Whether the server refused the credential rather than the batch (an expired token, a
    superseded attempt): such a batch stays in the journal, unacknowledged."""
    status = outcome.status
    return status in (401, 403) or (status == 409 and SUPERSEDED in outcome.reason)


# -- reading -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Record:
    seq: int
    path: str
    kind: str
    count: int
    body: Any


def find_journals(root: Path) -> list[Path]:
    """Every journal directory beneath ``root``, oldest first."""
    return sorted((meta.parent for meta in root.rglob(META)), key=_age)


def _age(directory: Path) -> tuple[str, int, int, str]:
    """``<project>/<run>/attempt-<n>/<pid>.<k>-<ms>``: by run, attempt and start (an
    offline attempt, ``offline-<key>``, after the run's numbered ones)."""
    group = directory.parent.name
    attempt = group.removeprefix("attempt-")
    number = int(attempt) if attempt.isdigit() else 2**62 if group.startswith("offline-") else 0
    return (str(directory.parent.parent), number, started_ms(directory), directory.name)


def started_ms(directory: Path) -> int:
    """When a journal began, from its name (milliseconds since the epoch; 0 unknown)."""
    started = directory.name.rpartition("-")[2]
    return int(started) if started.isdigit() else 0


def read_target(directory: Path) -> Target:
    """The journal's meta file; ValueError saying what is wrong with it."""
    try:
        meta = orjson.loads((directory / META).read_bytes())
        attempt = meta["attempt"]
        return Target(
            str(meta["endpoint"]),
            str(meta["project"]),
            str(meta["run"]),
            None if attempt is None else int(attempt),
            str(meta["token"]),
            str(meta.get("group") or ""),
        )
    except (OSError, orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{directory / META}: not a journal's meta file ({exc})") from exc


def segments(directory: Path) -> list[Path]:
    return sorted(directory.glob(f"{SEGMENT_PREFIX}*{SEGMENT_SUFFIX}"))


def read_acks(directory: Path) -> dict[int, bool]:
    """Acknowledged sequence numbers -> whether the server refused them (a torn or
    unreadable line is ignored: its batch is sent again)."""
    acks: dict[int, bool] = {}
    with contextlib.suppress(FileNotFoundError):
        for line in (directory / ACKS).read_bytes().split(b"\n"):
            words = line.split()
            if words and words[0].isdigit() and len(words) <= 2:
                acks[int(words[0])] = words[1:] == [REFUSED.encode()]
    return acks


def read_records(segment: Path) -> Iterator[Record]:
    """The records of one segment in order; a torn last line (a write cut short) and any
    line that is not a record are skipped."""
    with segment.open("rb") as file:
        for line in file:
            if not line.endswith(b"\n"):
                return  # torn: the writer died mid-line
            try:
                item = orjson.loads(line)
                yield Record(
                    int(item["seq"]),
                    str(item["path"]),
                    str(item["kind"]),
                    int(item["count"]),
                    item["body"],
                )
            except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
                continue


def is_locked(directory: Path) -> bool:
    """Whether a live reporter still writes the journal."""
    if fcntl is None:
        return False
    try:
        with (directory / LOCK).open("a") as file:
            fcntl.flock(file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.flock(file.fileno(), fcntl.LOCK_UN)
    except FileNotFoundError:
        return False
    except OSError:
        return True
    return False


def append_ack(directory: Path, seq: int, refused: bool = False) -> None:
    """Record one acknowledgement, as :meth:`Journal.ack` does (``tuneplane sync``)."""
    line = f"{seq} {REFUSED}\n" if refused else f"{seq}\n"
    fd = os.open(directory / ACKS, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def remove_journal(directory: Path) -> None:
    """Delete a journal directory (everything in it was delivered), and the parents it
    leaves empty up to the attempt's."""
    for name in [META, ACKS, LOCK, *(path.name for path in segments(directory))]:
        with contextlib.suppress(FileNotFoundError):
            (directory / name).unlink()
    with contextlib.suppress(OSError):
        directory.rmdir()
        directory.parent.rmdir()  # attempt-<n>, when no other process journaled it
