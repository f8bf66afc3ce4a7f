"""``declare_population(protocol=, planned_trials=)``: the SDK records the settings its
settings digest is taken over (redacted) and the planned trial IDs beside the declaration,
as the importers do, against a recording server."""

from __future__ import annotations

from tests.client.test_event_queue import reporter, sent_events, server
from tests.client.world import Recorder
from tuneplane.contract.declared import canonical_digest

__all__ = ["server"]


def test_a_declaration_records_its_protocol_and_planned_trials(
    server: tuple[str, Recorder],
) -> None:
    url, recorder = server
    protocol = {"sampling": {"temperature": 0.7, "max_tokens": 512}, "api_key": "sk-abc"}
    with reporter(url) as r:
        assert r.declare_population("val", 2, protocol=protocol, planned_trials=["q2", "q1"])
        # A list of another size than the population is left out, never sent to be refused.
        assert r.declare_population("val-b", 3, planned_trials=["q1"])
        assert r.flush(5)
    first, second = sent_events(recorder)
    assert first["protocol"] == {
        "sampling": {"temperature": 0.7, "max_tokens": 512},
        "api_key": "[redacted]",
    }
    # The digest is taken over the settings as given; only the record is redacted.
    assert first["digests"]["settings"] == canonical_digest(protocol)
    assert first["planned_trials"] == ["q1", "q2"]
    assert "planned_trials" not in second
    assert "settings" not in second["digests"]
