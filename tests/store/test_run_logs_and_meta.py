"""A run's live log lines and its display name, group, tags and note, in the store
directly (routes reached them only through the server), on both engines."""

from __future__ import annotations

from tuneplane.contract.protocol import LogLine
from tuneplane.contract.run_meta import RunMeta
from tuneplane.store import access, run_meta, runlogs
from tuneplane.store.credentials import TokenScope
from tuneplane.store.database import Database
from tuneplane.store.runs import create_or_resume
from tuneplane.store.schema import runs


def _run(database: Database, name: str = "r") -> int:
    database.run_write(create_or_resume, "p", name, None)
    with database.connect() as connection:
        run_id = access.run_id_by_name(connection, "p", name)
    assert run_id is not None
    return run_id


def _scope(run_id: int, attempt: int) -> TokenScope:
    return TokenScope(run_id, attempt, attempt, "p", "r", 0.0, "hash")


def _lines(first: int, count: int) -> list[LogLine]:
    return [LogLine(seq, "stdout", 100.0 + seq, f"line {seq}", None) for seq in range(first, count)]


def test_log_lines_are_kept_once_per_attempt_and_read_by_cursor(database: Database) -> None:
    run_id = _run(database)
    assert database.run_write(runlogs.write_lines, _scope(run_id, 1), _lines(0, 5)) == 5
    # A retried batch adds only the lines it did not have; another attempt's seq is its own.
    assert database.run_write(runlogs.write_lines, _scope(run_id, 1), _lines(3, 7)) == 2
    binary = [LogLine(0, "stderr", 200.0, "", b"\x00\xff")]
    assert database.run_write(runlogs.write_lines, _scope(run_id, 2), binary) == 1
    with database.connect() as connection:
        first = runlogs.read_lines(connection, run_id, 0, 4)
        rest = runlogs.read_lines(connection, run_id, first[-1].cursor, 100)
        assert runlogs.read_lines(connection, _run(database, "other"), 0, 100) == []
    assert [(line.attempt, line.seq) for line in first + rest] == [
        *((1, seq) for seq in range(7)),
        (2, 0),
    ]
    assert (first[0].text, first[0].stream) == ("line 0", "stdout")
    assert (rest[-1].stream, rest[-1].data) == ("stderr", b"\x00\xff")
    cursors = [line.cursor for line in first + rest]
    assert cursors == sorted(set(cursors))


def test_meta_changes_only_what_it_names_and_tags_are_replaced(database: Database) -> None:
    run_id, other = _run(database), _run(database, "s")
    change = RunMeta(display_name=" Qwen 7B ", group="sweep-1", tags=("b", "a"), note="first")
    database.run_write(run_meta.apply_meta, run_id, change, 50.0)
    database.run_write(run_meta.apply_meta, run_id, RunMeta(note=""), 60.0)
    with database.connect() as connection:
        row = connection.execute(
            runs.select()
            .with_only_columns(
                runs.c.display_name, runs.c.run_group, runs.c.note, runs.c.updated_at
            )
            .where(runs.c.id == run_id)
        ).one()
        assert tuple(row) == ("Qwen 7B", "sweep-1", None, 60.0)
        assert run_meta.tags_of(connection, [run_id, other]) == {run_id: ["a", "b"], other: []}
        assert run_meta.tags_of(connection, []) == {}
    database.run_write(run_meta.apply_meta, run_id, RunMeta(tags=()), 70.0)
    with database.connect() as connection:
        assert run_meta.tags_of(connection, [run_id]) == {run_id: []}
