"""The error tree shared by the store, the server and the SDK.

Every error carries the HTTP status it maps to and a short machine-readable code, so the
server has one handler and one JSON error shape::

    {"error": {"status": 422, "code": "invalid", "message": "logs[3].metrics.reward: not a
     finite number", "details": [{"field": "logs[3].metrics.reward", "rule": "..."}]}}

    TuneplaneError
    ├── MalformedRequest      400  body is not JSON / not an object
    ├── Unauthorized          401  missing or wrong credential
    ├── Forbidden             403  the caller may not do this
    │   └── IngestTokenRefused 403 an ingest token outside the ingest routes
    ├── NotFound              404  unknown project, run, metric or route
    ├── Conflict              409  e.g. a run's config cannot change
    │   └── AttemptSuperseded 409  a newer execution attempt of the run has started
    ├── PayloadTooLarge       413  body over the route's limit
    ├── InvalidInput          422  one or more rule violations, each naming its field
    ├── TooManyRequests       429  e.g. too many failed sign-ins
    └── Unavailable           503  e.g. ingestion disabled
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar


@dataclass(frozen=True, slots=True)
class Violation:
    """One broken rule: ``field`` is a path such as ``logs[3].metrics.reward``."""

    field: str
    rule: str

    def __str__(self) -> str:
        return f"{self.field}: {self.rule}" if self.field else self.rule


class TuneplaneError(Exception):
    status = 500
    code = "internal"

    def __init__(self, message: str, violations: tuple[Violation, ...] = ()) -> None:
        super().__init__(message)
        self.message = message
        self.violations = violations

    def to_json(self) -> dict[str, object]:
        body: dict[str, object] = {
            "status": self.status,
            "code": self.code,
            "message": self.message,
        }
        if self.violations:
            body["details"] = [{"field": v.field, "rule": v.rule} for v in self.violations]
        return {"error": body}


class MalformedRequest(TuneplaneError):
    status = 400
    code = "malformed"


class Unauthorized(TuneplaneError):
    status = 401
    code = "unauthorized"


class Forbidden(TuneplaneError):
    status = 403
    code = "forbidden"


class IngestTokenRefused(Forbidden):
    """An ingest token sent to a route outside ``/api/v1/ingest/``: its own code, so a
    client can tell a misplaced token from a caller who lacks a permission."""

    code = "ingest_token"


class NotFound(TuneplaneError):
    status = 404
    code = "not_found"


class Conflict(TuneplaneError):
    status = 409
    code = "conflict"


class AttemptSuperseded(Conflict):
    """An older execution attempt's token writes after a newer attempt started: a job
    restart is isolated by its attempt, so the old one's writes are refused for good."""

    code = "attempt_superseded"

    def __init__(self, attempt: int, latest: int) -> None:
        super().__init__(
            f"authorization: attempt superseded by attempt {latest} (this token belongs to "
            f"attempt {attempt}; a newer execution of the run has started)"
        )
        self.latest = latest


class PayloadTooLarge(TuneplaneError):
    status = 413
    code = "too_large"
    #: The connection is closed with the answer: kept open, the server would have to read
    #: and discard the rest of a body it refused, however large.
    close_connection: ClassVar[bool] = True


class InvalidInput(TuneplaneError):
    status = 422
    code = "invalid"

    def __init__(self, violations: tuple[Violation, ...]) -> None:
        assert violations, "InvalidInput needs at least one violation"
        message = str(violations[0])
        if len(violations) > 1:
            message += f" (and {len(violations) - 1} more)"
        super().__init__(message, violations)


class TooManyRequests(TuneplaneError):
    status = 429
    code = "too_many_requests"


class Unavailable(TuneplaneError):
    status = 503
    code = "unavailable"
