"""Findings from the metrics before the end: NaN/inf onset, divergence, throughput
collapse. Names decide which series are losses or throughputs; nothing else is judged."""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterator, Sequence
from typing import Final

from tuneplane.diagnostics.evidence import Citation, Finding, Series

_LOSS: Final = re.compile(r"(^|[/_.])(loss|grad_norm|gradnorm|kl)($|[/_.@])", re.IGNORECASE)
_THROUGHPUT: Final = re.compile(
    r"(tokens?_per_s|samples?_per_s|steps?_per_s|throughput|it_per_s|tok/s|tps)", re.IGNORECASE
)
#: A loss this many times its best, at the end, has diverged.
DIVERGENCE_FACTOR: Final = 3.0
#: A throughput below this share of its median, at the end, has collapsed.
COLLAPSE_SHARE: Final = 0.2
#: Points a trend needs before it says anything.
MIN_POINTS: Final = 8


def _nan_onset(series: Series) -> Finding | None:
    first = next(((step, v) for step, v in series.points if v is None), None)
    if first is None:
        return None
    before = [(s, v) for s, v in series.points if s < first[0] and v is not None][-1:]
    cited = [Citation(series=series.name, step=s, value=v) for s, v in before]
    cited.append(Citation(series=series.name, step=first[0], value=None))
    return Finding(
        "nan_loss",
        "The loss or the gradients became NaN or infinite",
        "certain",
        f"{series.name} was first NaN or infinite at step {first[0]}"
        + (f" (last finite value {before[0][1]:g} at step {before[0][0]})" if before else ""),
        "Lower the learning rate or raise warmup, clip gradients, use bf16 instead of fp16, "
        "and check the data of the steps just before for empty or extreme samples.",
        tuple(cited),
    )


def _divergence(series: Series) -> Finding | None:
    finite = [(s, v) for s, v in series.points if v is not None]
    if len(finite) < MIN_POINTS:
        return None
    best_step, best = min(finite, key=lambda point: point[1])
    last_step, last = finite[-1]
    if best <= 0 or last < DIVERGENCE_FACTOR * best or last_step == best_step:
        return None
    return Finding(
        "loss_divergence",
        "The loss diverged before the end",
        "possible",
        f"{series.name} rose from its best {best:g} (step {best_step}) to {last:g} "
        f"(step {last_step})",
        "Lower the learning rate, check the steps where it began to rise for bad batches, "
        "and resume from a checkpoint before it.",
        (
            Citation(series=series.name, step=best_step, value=best),
            Citation(series=series.name, step=last_step, value=last),
        ),
    )


def _collapse(series: Series) -> Finding | None:
    finite = [(s, v) for s, v in series.points if v is not None]
    if len(finite) < MIN_POINTS:
        return None
    typical = statistics.median(v for _, v in finite)
    last_step, last = finite[-1]
    if typical <= 0 or last >= COLLAPSE_SHARE * typical:
        return None
    return Finding(
        "throughput_collapse",
        "Throughput collapsed before the end",
        "possible",
        f"{series.name} fell to {last:g} at step {last_step}, against a median of {typical:g}",
        "Look at what changed at that step: a straggling rank or node, I/O stalls "
        "(checkpointing, a slow dataset mount), thermal throttling or memory swapping.",
        (Citation(series=series.name, step=last_step, value=last),),
    )


def metric_findings(series: Sequence[Series]) -> Iterator[Finding]:
    for one in series:
        if _LOSS.search(one.name):
            found = _nan_onset(one) or _divergence(one)
            if found is not None:
                yield found
        elif _THROUGHPUT.search(one.name):
            collapsed = _collapse(one)
            if collapsed is not None:
                yield collapsed
