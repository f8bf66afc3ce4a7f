"""What W&B users reach for on a run besides ``log``: ``run.config`` (the config the run
was started with; ``update()`` adds keys) and ``run.summary`` (final figures, sent when
the run ends).

A config key keeps its value once recorded (the server refuses another, naming the key),
as a run's config is fixed; W&B's ``allow_val_change`` has no counterpart. The summary is
sent as ``summary`` events when the run ends (``finish()``, the end of a ``with`` block,
an uncaught exception or the interpreter's exit), a value set twice keeping the last: the
run page and ``GET …/runs/{run}`` show it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from tuneplane.contract.limits import OBSERVATION_MAX_FIELDS


def _say(message: str) -> None:
    print(f"tuneplane: {message}", file=sys.stderr, flush=True)


class RunConfig(dict[str, Any]):
    """The run's config as ``init(config=…)`` gave it. ``update()`` (and ``config[k] = v``)
    records new keys on the attempt (and as the run's config while it has none); a key it
    already holds keeps its value, and stderr says so once per key."""

    def __init__(self, initial: Mapping[str, Any] | None, send: Callable[[dict[str, Any]], None]):
        super().__init__(initial or {})
        self._send = send
        self._said: set[str] = set()

    def update(self, *args: Any, **kwargs: Any) -> None:
        """Add keys (W&B's ``config.update``); never raises for a value, never blocks long
        (the server is asked once, with a short retry, as for ``init()``'s config)."""
        added: dict[str, Any] = {}
        for key, value in dict(*args, **kwargs).items():
            name = str(key)
            if name in self and self[name] != value:
                if name not in self._said:
                    self._said.add(name)
                    _say(
                        f"config.{name} stays {self[name]!r}: a run's config keeps its values "
                        f"(only new keys are added; {value!r} is not recorded)"
                    )
                continue
            if name not in self:
                added[name] = value
        if added:
            super().update(added)
            self._send(added)

    def __setitem__(self, key: str, value: Any) -> None:
        self.update({key: value})

    def setdefault(self, key: str, default: Any = None) -> Any:
        if key not in self:
            self.update({key: default})
        return self[key]


class Summary(dict[str, Any]):
    """Final figures of the run (``run.summary["best/acc"] = 0.91``): numbers, booleans or
    short strings, sent when the run ends; a nested mapping is stored under ``a/b`` names
    as ``log()`` stores it."""

    def chunks(self) -> Iterator[dict[str, Any]]:
        """The summary flattened, in events of at most the fields one event may carry."""
        flat = _flattened(self)
        names = list(flat)
        for start in range(0, len(names), OBSERVATION_MAX_FIELDS):
            yield {name: flat[name] for name in names[start : start + OBSERVATION_MAX_FIELDS]}


def _flattened(values: Mapping[str, Any], prefix: str = "", depth: int = 0) -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for name, value in values.items():
        key = f"{prefix}{name}"
        if isinstance(value, Mapping) and depth < 8:
            flat.update(_flattened(value, f"{key}/", depth + 1))
        elif value.__class__ in (int, float, bool, str):
            flat[key] = value
        else:
            try:  # a NumPy or PyTorch scalar
                flat[key] = float(value)
            except Exception:
                flat[key] = str(value)
    return flat
