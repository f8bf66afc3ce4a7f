"""A check every read route makes of its path and query parameters before the store sees them."""

from __future__ import annotations

from fastapi import Request

from tuneplane.contract.errors import InvalidInput, Violation
from tuneplane.contract.validation import NUL_RULE


async def refuse_nul(request: Request) -> None:
    """A router dependency: no name the store holds contains NUL, and PostgreSQL cannot even
    compare text holding one, so such a parameter is refused (422) rather than looked up.
    Asynchronous, so it costs no trip through the thread pool."""
    for name, value in (*request.path_params.items(), *request.query_params.multi_items()):
        if "\x00" in str(value):
            raise InvalidInput((Violation(name, NUL_RULE),))
