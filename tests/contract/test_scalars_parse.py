"""The SDK scalar body parser: good columns pass at C speed, and a bad value or step anywhere
is named by its index, whatever its kind. Pure Python, no server, no database."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tuneplane.contract.errors import InvalidInput
from tuneplane.contract.json_body import NotFinite
from tuneplane.contract.protocol import parse_scalars

STEP_MAX = 2**63 - 1


def _series(steps: list[Any], values: list[Any]) -> dict[str, Any]:
    return {"series": [{"name": "train/loss", "steps": steps, "values": values}]}


def _field(body: dict[str, Any]) -> str:
    with pytest.raises(InvalidInput) as raised:
        parse_scalars(body)
    return raised.value.violations[0].field


def test_integers_and_floats_are_taken_as_floats() -> None:
    batch = parse_scalars(_series([0, 1, STEP_MAX], [1, 0.5, 10**300]))
    [series] = batch.series
    assert series.steps == [0, 1, STEP_MAX]
    assert series.values == [1.0, 0.5, 1e300]
    assert all(type(value) is float for value in series.values)


@pytest.mark.parametrize(
    "bad",
    [True, None, "1", float("nan"), float("inf"), -float("inf"), 10**400, NotFinite("NaN"), [1]],
)
def test_a_bad_value_is_named_by_its_index(bad: object) -> None:
    values: list[object] = [0.5, 1, 2.5, 3.0]
    values[2] = bad
    assert _field(_series([0, 1, 2, 3], values)) == "series[0].values[2]"


@pytest.mark.parametrize("bad", [-1, STEP_MAX + 1, 1.0, True, None, "2"])
def test_a_bad_step_is_named_by_its_index(bad: object) -> None:
    steps: list[object] = [0, 1, 2, 3]
    steps[3] = bad
    assert _field(_series(steps, [0.5, 1.0, 1.5, 2.0])) == "series[0].steps[3]"


def test_a_repeated_step_is_refused() -> None:
    assert _field(_series([0, 1, 1], [0.5, 1.0, 1.5])) == "series[0].steps"


@settings(max_examples=80, deadline=None, database=None)
@given(
    st.lists(
        st.one_of(
            st.floats(),
            st.integers(min_value=-(10**400), max_value=10**400),
            st.booleans(),
            st.none(),
        ),
        min_size=1,
        max_size=40,
    )
)
def test_values_are_accepted_exactly_when_each_is_a_finite_number(values: list[Any]) -> None:
    def finite(value: object) -> bool:
        if type(value) is float:
            return value - value == 0
        return type(value) is int and abs(value) < 2**1024 - 2**970

    body = _series(list(range(len(values))), values)
    first_bad = next((index for index, value in enumerate(values) if not finite(value)), None)
    if first_bad is None:
        [series] = parse_scalars(body).series
        assert series.values == [float(value) for value in values]
    else:
        assert _field(body) == f"series[0].values[{first_bad}]"
