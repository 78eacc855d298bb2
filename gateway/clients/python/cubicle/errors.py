"""Typed errors carrying the API's code and message."""

from __future__ import annotations

from typing import Any


class CubicleError(Exception):
    """The gateway refused, or could not be asked.

    ``status`` is the HTTP status (0 when the gateway was not reached),
    ``code`` the API's error code (``not_found``, ``control_held``, ...),
    ``message`` its sentence saying what is wrong and what to do.
    """

    def __init__(self, what: str, status: int, code: str, message: str, body: Any = None):
        super().__init__(f"{what}: {status} {code}: {message}")
        self.what = what
        self.status = status
        self.code = code
        self.message = message
        self.body = body


class ConfigError(CubicleError):
    """A wrong or missing URL or token given to the client itself."""

    def __init__(self, message: str):
        super().__init__("cubicle client", 0, "config", message)


class Unreachable(CubicleError):
    """No answer from the gateway (not running there, wrong URL, network)."""


class BadRequest(CubicleError):
    """400: an input you chose is wrong; the message names it."""


class Unauthorized(CubicleError):
    """401: no token, or not a valid one."""


class Forbidden(CubicleError):
    """403: the token's role may not do this."""


class NotFound(CubicleError):
    """404: no such thing, or one outside the token's scope."""


class Conflict(CubicleError):
    """409: not now (paused, an operator holds control, not running)."""


class TooLarge(CubicleError):
    """413: a body or file over the limit."""


class Unavailable(CubicleError):
    """502/503/504: the workspace or the gateway could not do it now."""


_BY_STATUS = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    413: TooLarge,
    502: Unavailable,
    503: Unavailable,
    504: Unavailable,
}


def from_answer(what: str, status: int, body: Any) -> CubicleError:
    """The error for a non-2xx answer."""
    error = body.get("error", {}) if isinstance(body, dict) else {}
    code = error.get("code", "") if isinstance(error, dict) else ""
    message = error.get("message", "") if isinstance(error, dict) else ""
    if not message:
        message = str(body)[:500]
    kind = _BY_STATUS.get(status, CubicleError)
    return kind(what, status, code, message, body)
