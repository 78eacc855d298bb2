"""Cubicle's Python client: isolated desktops for computer-use agents.

    from cubicle import Cubicle

    with Cubicle("http://127.0.0.1:7878", token) as cubicle:
        with cubicle.create(name="demo") as ws:      # deleted on exit
            ws.act([{"action": "left_click", "coordinate": [640, 400]},
                    {"action": "type", "text": "hello"}], screenshot=True)
            print(ws.exec(["uname", "-a"]).stdout)

``AsyncCubicle`` is the same with ``await``. Timeouts are in seconds.
Refusals raise typed errors (:mod:`cubicle.errors`) carrying the API's code
and message; an operation a policy holds returns :class:`Held`.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from typing import Any, Iterator

from . import errors
from ._core import AsyncCubicle, AsyncWorkspace, ExecResult, Held, Screenshot

__all__ = [
    "AsyncCubicle",
    "AsyncWorkspace",
    "Cubicle",
    "ExecResult",
    "Held",
    "Screenshot",
    "Workspace",
    "errors",
]


class _Loop:
    """An event loop on a thread of its own: the sync client runs the async
    core there, so both share one implementation."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="cubicle-client", daemon=True)
        self.thread.start()

    def run(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()

    def iterate(self, generator: Any) -> Iterator[Any]:
        while True:
            try:
                yield self.run(generator.__anext__())
            except StopAsyncIteration:
                return

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
        self.loop.close()


class _Sync:
    """Every coroutine method of the wrapped async object, called to the end."""

    _loop: _Loop
    _async: Any

    def _wrap(self, value: Any) -> Any:
        if isinstance(value, AsyncWorkspace):
            return Workspace(self._loop, value)
        if isinstance(value, list):
            return [self._wrap(v) for v in value]
        return value

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._async, name)
        if inspect.iscoroutinefunction(attr):
            return lambda *a, **k: self._wrap(self._loop.run(attr(*a, **k)))
        if inspect.isasyncgenfunction(attr):
            return lambda *a, **k: self._loop.iterate(attr(*a, **k))
        return attr

    def __dir__(self) -> list[str]:
        return sorted(set(dir(type(self))) | {n for n in dir(self._async) if not n.startswith("_")})


class Workspace(_Sync):
    """One workspace (see :class:`AsyncWorkspace` for every method). A
    ``with`` block deletes it on exit."""

    def __init__(self, loop: _Loop, inner: AsyncWorkspace):
        self._loop = loop
        self._async = inner
        self.id = inner.id

    @property
    def record(self) -> dict[str, Any]:
        return self._async.record

    def __repr__(self) -> str:
        return repr(self._async)

    def __enter__(self) -> "Workspace":
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.run(self._async.delete())


class Cubicle(_Sync):
    """A gateway, as one token sees it (see :class:`AsyncCubicle` for every
    method). ``url``/``token`` default to ``CUBICLE_URL``/``CUBICLE_TOKEN``."""

    def __init__(self, url: str | None = None, token: str | None = None, *, timeout: float = 180.0):
        self._async = AsyncCubicle(url, token, timeout=timeout)
        self._loop = _Loop()

    def close(self) -> None:
        self._loop.run(self._async.aclose())
        self._loop.close()

    def __enter__(self) -> "Cubicle":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
