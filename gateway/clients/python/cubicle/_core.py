"""The async core every call goes through; the sync client runs it too.

Requests are built by the generated wire layer (``cubicle._wire``: path,
method and body encoding come from the gateway's OpenAPI document); this
module sends them, adds the query parameters a held operation takes
(``wait``, ``approval``), and turns answers into Python values, typed
errors and :class:`Held` results.
"""

from __future__ import annotations

import base64
import json
import os
from dataclasses import dataclass, field
from typing import Any, AsyncIterator
from urllib.parse import quote, urlencode

import httpx

from . import errors
from ._wire.api.approvals import approve as w_approve
from ._wire.api.approvals import ask as w_ask
from ._wire.api.approvals import deny as w_deny
from ._wire.api.approvals import one as w_approval
from ._wire.api.audit import events as w_events
from ._wire.api.clipboard import get as w_clipboard_get
from ._wire.api.clipboard import put as w_clipboard_put
from ._wire.api.computer import actions as w_actions
from ._wire.api.control import handoff as w_handoff
from ._wire.api.computer import screenshot as w_screenshot
from ._wire.api.downloads import reject as w_reject
from ._wire.api.downloads import release as w_release
from ._wire.api.files import delete as w_file_delete
from ._wire.api.files import get as w_file_get
from ._wire.api.secrets import bind as w_secret_bind
from ._wire.api.secrets import create as w_secret_create
from ._wire.api.secrets import delete as w_secret_delete
from ._wire.api.secrets import fill as w_secret_fill
from ._wire.api.secrets import given as w_secrets_given
from ._wire.api.secrets import list_ as w_secrets
from ._wire.api.profiles import delete as w_profile_delete
from ._wire.api.profiles import list_ as w_profiles
from ._wire.api.shares import create as w_share_create
from ._wire.api.snapshots import delete as w_snapshot_delete
from ._wire.api.snapshots import list_ as w_snapshots
from ._wire.api.snapshots import roll_back as w_roll_back
from ._wire.api.snapshots import take as w_snapshot_take
from ._wire.api.shares import list_ as w_shares
from ._wire.api.shares import revoke as w_share_revoke
from ._wire.api.shell import run as w_exec
from ._wire.api.tokens import me as w_me
from ._wire.api.workspaces import create as w_create
from ._wire.api.workspaces import delete as w_delete
from ._wire.api.workspaces import get as w_get
from ._wire.api.workspaces import list_ as w_list
from ._wire.api.workspaces import pause as w_pause
from ._wire.api.workspaces import resume as w_resume
from ._wire.api.workspaces import start as w_start
from ._wire.api.workspaces import stop as w_stop
from ._wire.models.action_request import ActionRequest
from ._wire.models.bind_secret import BindSecret
from ._wire.models.fill_secret import FillSecret
from ._wire.models.clipboard_text import ClipboardText
from ._wire.models.new_secret import NewSecret
from ._wire.models.new_share import NewShare
from ._wire.models.new_snapshot import NewSnapshot
from ._wire.models.rollback import Rollback
from ._wire.models.ask import Ask
from ._wire.models.create_workspace import CreateWorkspace
from ._wire.models.decide import Decide
from ._wire.models.decision import Decision
from ._wire.models.exec_body import ExecBody
from ._wire.models.handoff import Handoff

DEFAULT_URL = "http://127.0.0.1:7878"


@dataclass
class Screenshot:
    """An image of the screen: its bytes, format and size."""

    data: bytes
    media_type: str
    width: int
    height: int


@dataclass
class ExecResult:
    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool
    signal: int | None
    duration_ms: int
    raw: dict[str, Any] = field(repr=False, default_factory=dict)


@dataclass
class Held:
    """An operation a policy holds until a person decides: not an error.

    ``approval_id`` names it; ``url`` is its place in the API; an operator
    decides in the page or with ``cubicle approvals approve``. Wait with
    :meth:`AsyncCubicle.wait_for_approval`, then send the same call again
    with ``approval=held.approval_id``.
    """

    approval_id: str
    url: str
    reason: str
    rule: str
    message: str


def _body_of(response: httpx.Response) -> Any:
    if not response.content:
        return None
    try:
        return response.json()
    except ValueError:
        return response.text


class AsyncCubicle:
    """A gateway, as one token sees it.

    ``url`` and ``token`` default to ``CUBICLE_URL`` and ``CUBICLE_TOKEN``;
    ``timeout`` is in seconds (a create waits for the desktop: give it
    room).
    """

    def __init__(self, url: str | None = None, token: str | None = None, *, timeout: float = 180.0):
        url = (url or os.environ.get("CUBICLE_URL") or DEFAULT_URL).rstrip("/")
        token = token or os.environ.get("CUBICLE_TOKEN")
        if not url.startswith(("http://", "https://")):
            raise errors.ConfigError(f"url {url!r} is not an http:// or https:// URL of a cubicle gateway")
        if not token:
            raise errors.ConfigError(
                "no token: pass token=... or set CUBICLE_TOKEN (`cubicle serve` prints the first admin token)"
            )
        self.url = url
        self.token = token
        self._http = httpx.AsyncClient(
            base_url=url,
            headers={"authorization": f"Bearer {token}"},
            timeout=httpx.Timeout(timeout, connect=10.0),
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> "AsyncCubicle":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _send(self, kwargs: dict[str, Any], params: dict[str, Any] | None = None) -> httpx.Response:
        what = f"{kwargs['method'].upper()} {kwargs['url']}"
        if params:
            merged = dict(kwargs.get("params") or {})
            merged.update({k: v for k, v in params.items() if v is not None})
            kwargs = {**kwargs, "params": merged}
        try:
            return await self._http.request(**kwargs)
        except httpx.TransportError as err:
            raise errors.Unreachable(
                what, 0, "unreachable",
                f"cannot reach the gateway at {self.url} ({err!r}); is `cubicle serve` running there?",
            ) from err

    async def _call(self, kwargs: dict[str, Any], params: dict[str, Any] | None = None, *, may_hold: bool = False) -> Any:
        response = await self._send(kwargs, params)
        what = f"{kwargs['method'].upper()} {kwargs['url']}"
        body = _body_of(response)
        if response.status_code == 202 and may_hold and isinstance(body, dict):
            approval = body.get("approval") or {}
            return Held(
                approval_id=approval.get("id", ""),
                url=approval.get("url", ""),
                reason=approval.get("reason", ""),
                rule=approval.get("rule", ""),
                message=body.get("error", {}).get("message", ""),
            )
        if not 200 <= response.status_code < 300 or response.status_code == 202:
            raise errors.from_answer(what, response.status_code, body)
        return body

    # --- workspaces ---------------------------------------------------------

    async def create(self, **body: Any) -> "AsyncWorkspace":
        """A new workspace, once its desktop answers. ``body`` is the create
        body (``name``, ``geometry``, ``template``, ``egress``, ``limits``,
        ``time_limits``, ``profile``, ...)."""
        record = await self._call(w_create._get_kwargs(body=CreateWorkspace.from_dict(body)))
        return AsyncWorkspace(self, record)

    async def start_from(self, snapshot_id: str, count: int = 1, **body: Any) -> list["AsyncWorkspace"]:
        """``count`` (1 to 10) new workspaces started at once from a
        snapshot (see :meth:`AsyncWorkspace.snapshot`), each with its files
        and browser profile, once their desktops answer. Raises the first
        refusal if none could start; those that could are returned."""
        fields = {**body, "from_snapshot": snapshot_id, "count": count}
        made = await self._call(w_create._get_kwargs(body=CreateWorkspace.from_dict(fields)))
        return [AsyncWorkspace(self, record) for record in made["workspaces"]]

    async def snapshots(self) -> list[dict[str, Any]]:
        """The token's snapshots (an admin's: everyone's): name, kind, the
        workspace each was taken of, sizes and SHA-256s."""
        return (await self._call(w_snapshots._get_kwargs()))["snapshots"]

    async def delete_snapshot(self, snapshot_id: str) -> None:
        """Removes a snapshot and its archives; workspaces started from it
        keep what they have."""
        await self._call(w_snapshot_delete._get_kwargs(snapshot_id))

    async def connect(self, workspace_id: str) -> "AsyncWorkspace":
        record = await self._call(w_get._get_kwargs(workspace_id))
        return AsyncWorkspace(self, record)

    async def list(self) -> list["AsyncWorkspace"]:
        listed = await self._call(w_list._get_kwargs())
        return [AsyncWorkspace(self, record) for record in listed["workspaces"]]

    async def me(self) -> dict[str, Any]:
        return await self._call(w_me._get_kwargs())

    # --- events, approvals, downloads ---------------------------------------

    async def events(self, workspace: str | None = None, after: int = 0, limit: int = 100) -> list[dict[str, Any]]:
        params = {"workspace": workspace, "after": after, "limit": limit}
        return (await self._call(w_events._get_kwargs(), params))["events"]

    async def follow_events(self, workspace: str | None = None, after: int = 0, every: float = 0.5) -> AsyncIterator[dict[str, Any]]:
        """Each event after ``after`` as it is written, forever."""
        import asyncio

        while True:
            page = await self.events(workspace, after, 1000)
            for event in page:
                after = event["id"]
                yield event
            if not page:
                await asyncio.sleep(every)

    async def approvals(self, state: str = "pending", workspace: str | None = None) -> list[dict[str, Any]]:
        kwargs = {"method": "get", "url": "/v1/approvals"}
        return (await self._call(kwargs, {"state": state, "workspace": workspace}))["approvals"]

    async def wait_for_approval(self, approval_id: str, timeout: float = 300.0) -> dict[str, Any]:
        """The approval once decided (or as it stands after ``timeout``
        seconds): its ``state`` is approved, denied, expired or pending."""
        return await self._call(w_approval._get_kwargs(approval_id, wait=timeout))

    async def approve(self, approval_id: str, reason: str | None = None) -> dict[str, Any]:
        body = Decide.from_dict({"reason": reason} if reason else {})
        return await self._call(w_approve._get_kwargs(approval_id, body=body))

    async def deny(self, approval_id: str, reason: str | None = None) -> dict[str, Any]:
        body = Decide.from_dict({"reason": reason} if reason else {})
        return await self._call(w_deny._get_kwargs(approval_id, body=body))

    async def downloads(self, state: str | None = "held", workspace: str | None = None) -> list[dict[str, Any]]:
        kwargs = {"method": "get", "url": "/v1/downloads"}
        return (await self._call(kwargs, {"state": state, "workspace": workspace}))["downloads"]

    async def release(self, download_id: str, reason: str | None = None) -> dict[str, Any]:
        body = Decision.from_dict({"reason": reason} if reason else {})
        return await self._call(w_release._get_kwargs(download_id, body=body))

    async def reject(self, download_id: str, reason: str | None = None) -> dict[str, Any]:
        body = Decision.from_dict({"reason": reason} if reason else {})
        return await self._call(w_reject._get_kwargs(download_id, body=body))

    # --- host-bound secrets (operators, admins) -----------------------------

    async def store_secret(self, name: str, value: str, hosts: list[str], body: bool = False) -> dict[str, Any]:
        """Stores a secret the egress proxy sends only to ``hosts`` (exact
        names), in place of the placeholder a workspace is given: in request
        headers, and with ``body=True`` in request bodies too (up to 1 MiB;
        the value goes in unescaped). The value is never shown again."""
        new = NewSecret.from_dict({"name": name, "value": value, "hosts": hosts, "body": body})
        return await self._call(w_secret_create._get_kwargs(body=new))

    async def secrets(self) -> list[dict[str, Any]]:
        """The token's secrets (an admin's: everyone's), never a value."""
        return (await self._call(w_secrets._get_kwargs()))["secrets"]

    async def delete_secret(self, secret_id: str) -> None:
        await self._call(w_secret_delete._get_kwargs(secret_id))

    # --- persistent browser profiles (named at create: profile="work") ------

    async def profiles(self) -> list[dict[str, Any]]:
        """The token's browser profiles (an admin's: everyone's): size and
        SHA-256 of the kept archive, when saved, the workspace using it."""
        return (await self._call(w_profiles._get_kwargs()))["profiles"]

    async def delete_profile(self, profile_id: str) -> None:
        """Removes a profile and its archive (409 while a workspace runs
        with it)."""
        await self._call(w_profile_delete._get_kwargs(profile_id))


class AsyncWorkspace:
    """One workspace. An ``async with`` block deletes it on exit."""

    def __init__(self, cubicle: AsyncCubicle, record: dict[str, Any]):
        self._c = cubicle
        self.record = record
        self.id: str = record["id"]

    def __repr__(self) -> str:
        return f"<Workspace {self.id} {self.record.get('state')}>"

    async def __aenter__(self) -> "AsyncWorkspace":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.delete()

    async def refresh(self) -> dict[str, Any]:
        self.record = await self._c._call(w_get._get_kwargs(self.id))
        return self.record

    async def delete(self) -> None:
        try:
            await self._c._call(w_delete._get_kwargs(self.id))
        except errors.NotFound:
            pass  # already gone

    async def _lifecycle(self, wire: Any) -> dict[str, Any]:
        self.record = await self._c._call(wire._get_kwargs(self.id), may_hold=False)
        return self.record

    async def pause(self) -> dict[str, Any]:
        return await self._lifecycle(w_pause)

    async def resume(self) -> dict[str, Any]:
        return await self._lifecycle(w_resume)

    async def stop(self) -> dict[str, Any]:
        return await self._lifecycle(w_stop)

    async def start(self) -> dict[str, Any]:
        return await self._lifecycle(w_start)

    # --- the screen ---------------------------------------------------------

    async def screenshot(self, format: str = "png", quality: int | None = None) -> Screenshot:
        """The screen, through the gateway's own RFB session."""
        kwargs = w_screenshot._get_kwargs(self.id)
        response = await self._c._send(kwargs, {"format": format, "quality": quality})
        if response.status_code != 200:
            raise errors.from_answer(f"GET {kwargs['url']}", response.status_code, _body_of(response))
        width, height = _size(response.content)
        return Screenshot(response.content, response.headers.get("content-type", ""), width, height)

    async def act(self, actions: list[dict[str, Any]], *, screenshot: bool = False, approval: str | None = None) -> list[Any] | Held:
        """Runs ``actions`` (Anthropic or OpenAI names) in one request, in
        order; with ``screenshot=True`` a screenshot is taken last, in the
        same request. Each action's result (images as :class:`Screenshot`),
        or :class:`Held`."""
        batch = list(actions) + ([{"action": "screenshot"}] if screenshot else [])
        kwargs = w_actions._get_kwargs(self.id, body=ActionRequest.from_dict({"actions": batch}))
        answer = await self._c._call(kwargs, {"approval": approval}, may_hold=True)
        if isinstance(answer, Held):
            return answer
        return [_result(r) for r in answer.get("results", [])]

    async def action(self, name: str, approval: str | None = None, **params: Any) -> Any:
        """One action by its name: ``await ws.action("left_click", coordinate=[10, 20])``."""
        results = await self.act([{"action": name, **params}], approval=approval)
        return results if isinstance(results, Held) else results[0]

    async def left_click(self, x: int, y: int) -> Any:
        return await self.action("left_click", coordinate=[x, y])

    async def double_click(self, x: int, y: int) -> Any:
        return await self.action("double_click", coordinate=[x, y])

    async def right_click(self, x: int, y: int) -> Any:
        return await self.action("right_click", coordinate=[x, y])

    async def mouse_move(self, x: int, y: int) -> Any:
        return await self.action("mouse_move", coordinate=[x, y])

    async def type(self, text: str) -> Any:
        return await self.action("type", text=text)

    async def key(self, keys: str) -> Any:
        """xdotool-style key names: ``"ctrl+l"``, ``"Return"``."""
        return await self.action("key", text=keys)

    async def scroll(self, x: int, y: int, direction: str = "down", amount: int = 3) -> Any:
        return await self.action("scroll", coordinate=[x, y], scroll_direction=direction, scroll_amount=amount)

    # --- shell and files ----------------------------------------------------

    async def exec(self, argv: list[str] | str, *, timeout: float = 30.0, stdin: str | bytes | None = None,
                   cwd: str | None = None, env: dict[str, str] | None = None, approval: str | None = None) -> ExecResult | Held:
        """Runs a command as the workspace's user (``argv``, or a shell line
        as a string) and returns when it ends."""
        body: dict[str, Any] = {"timeout_ms": int(timeout * 1000)}
        body["command" if isinstance(argv, str) else "argv"] = argv
        if isinstance(stdin, bytes):
            body["stdin_base64"] = base64.b64encode(stdin).decode()
        elif stdin is not None:
            body["stdin"] = stdin
        if cwd:
            body["cwd"] = cwd
        if env:
            body["env"] = env
        kwargs = w_exec._get_kwargs(self.id, body=ExecBody.from_dict(body))
        answer = await self._c._call(kwargs, {"approval": approval}, may_hold=True)
        if isinstance(answer, Held):
            return answer
        return ExecResult(answer.get("exit_code"), answer.get("stdout", ""), answer.get("stderr", ""),
                          bool(answer.get("timed_out")), answer.get("signal"), answer.get("duration_ms", 0), answer)

    async def exec_stream(self, argv: list[str] | str, *, stdin: str | bytes | None = None,
                          timeout: float = 600.0) -> AsyncIterator[tuple[str, str | dict[str, Any]]]:
        """Streams a command's output as it comes: yields ``("stdout", text)``,
        ``("stderr", text)`` and last ``("exit", {exit_code, signal, ...})``.
        ``stdin`` is sent whole, then closed."""
        import websockets

        query: list[tuple[str, str]] = [("timeout_ms", str(int(timeout * 1000)))]
        if isinstance(argv, str):
            query.append(("command", argv))
        else:
            query += [("arg", a) for a in argv]
        url = self._c.url.replace("http", "ws", 1) + f"/v1/workspaces/{quote(self.id)}/exec/ws?" + urlencode(query)
        headers = {"authorization": f"Bearer {self._c.token}"}
        async with websockets.connect(url, additional_headers=headers, max_size=None) as socket:
            if stdin is not None:
                await socket.send(stdin if isinstance(stdin, bytes) else json.dumps({"stdin": stdin}))
            await socket.send(json.dumps({"stdin_eof": True}))
            async for frame in socket:
                message = json.loads(frame)
                if "error" in message:
                    error = message["error"]
                    raise errors.CubicleError("exec stream", 0, error.get("code", ""), error.get("message", ""), message)
                if "stdout" in message:
                    yield ("stdout", message["stdout"])
                elif "stderr" in message:
                    yield ("stderr", message["stderr"])
                elif "exit_code" in message or "signal" in message:
                    yield ("exit", message)

    async def read_file(self, path: str) -> bytes:
        kwargs = w_file_get._get_kwargs(self.id, path=path)
        response = await self._c._send(kwargs)
        if response.status_code != 200:
            raise errors.from_answer(f"GET {kwargs['url']}", response.status_code, _body_of(response))
        return response.content

    async def write_file(self, path: str, data: bytes | str, mode: str | None = None) -> Held | None:
        # The document describes the body as bytes, which the generator
        # types as a list of integers; the bytes are sent as they are.
        content = data.encode() if isinstance(data, str) else data
        kwargs = {
            "method": "put",
            "url": f"/v1/workspaces/{quote(self.id, safe='')}/files",
            "params": {"path": path, **({"mode": mode} if mode else {})},
            "content": content,
            "headers": {"content-type": "application/octet-stream"},
        }
        answer = await self._c._call(kwargs, may_hold=True)
        return answer if isinstance(answer, Held) else None

    async def list_files(self, path: str) -> list[dict[str, Any]]:
        kwargs = w_file_get._get_kwargs(self.id, path=path, list_=True)
        listed = await self._c._call(kwargs)
        return listed["entries"] if isinstance(listed, dict) and "entries" in listed else listed

    async def delete_file(self, path: str, recursive: bool = False) -> None:
        await self._c._call(w_file_delete._get_kwargs(self.id, path=path, recursive=recursive))

    async def give_secret(self, secret_id: str, env: str | None = None, path: str | None = None) -> dict[str, Any]:
        """Gives a stored secret to this workspace: the answer's
        ``placeholder`` is what it holds (in ``$env`` of every exec, in the
        file at ``path``), never the value."""
        fields = {"secret": secret_id, "env": env, "path": path}
        body = BindSecret.from_dict({k: v for k, v in fields.items() if v is not None})
        return await self._c._call(w_secret_bind._get_kwargs(self.id, body=body))

    async def secrets(self) -> list[dict[str, Any]]:
        """The secrets this workspace was given, with their placeholders."""
        return (await self._c._call(w_secrets_given._get_kwargs(self.id)))["secrets"]

    async def fill_secret(self, secret: str, selector: str | None = None) -> dict[str, Any] | Held:
        """Fills a secret this workspace was given (its id or placeholder)
        into a field of the page on screen (``selector``, else the focused
        field) without this client ever seeing the value: only a password
        or autocomplete-marked field of an https page of one of the
        secret's hosts. ``Held`` if the policy holds it for a person."""
        fields = {"secret": secret, "selector": selector}
        body = FillSecret.from_dict({k: v for k, v in fields.items() if v is not None})
        return await self._c._call(w_secret_fill._get_kwargs(self.id, body=body), may_hold=True)

    async def upload(
        self,
        name: str | None = None,
        data: bytes | str | None = None,
        *,
        download: str | None = None,
        selector: str | None = None,
    ) -> dict[str, Any] | Held:
        """Hands a file to the page's ``<input type=file>`` (``selector``,
        else the focused one): ``data`` under ``name`` (scanned by the
        quarantine first), or a released ``download`` of this workspace.
        ``Held`` if the policy holds it for a person."""
        content = data.encode() if isinstance(data, str) else (data or b"")
        # As write_file: the document's bytes body is sent as it is.
        params = {"name": name, "download": download, "selector": selector}
        kwargs = {
            "method": "post",
            "url": f"/v1/workspaces/{quote(self.id, safe='')}/upload",
            "params": {k: v for k, v in params.items() if v is not None},
            "content": content,
            "headers": {"content-type": "application/octet-stream"},
        }
        return await self._c._call(kwargs, may_hold=True)

    async def share(self, mode: str = "view", expires_in_s: int | None = None) -> dict[str, Any]:
        """Makes a share link (operators, admins): ``mode`` ``"view"`` (the
        screen only) or ``"control"`` (the screen, and control once taken).
        The answer's ``url`` (``/share#<secret>``, on the gateway's address)
        is shown this once."""
        fields = {"mode": mode, "expires_in_s": expires_in_s}
        body = NewShare.from_dict({k: v for k, v in fields.items() if v is not None})
        return await self._c._call(w_share_create._get_kwargs(self.id, body=body))

    async def snapshot(self, name: str) -> dict[str, Any]:
        """Takes a snapshot named ``name`` of this running workspace: its
        files in /home/user and /tmp and its browser profile (kind
        ``disk``: not its memory). The browser closes for a moment."""
        body = NewSnapshot.from_dict({"name": name})
        return await self._c._call(w_snapshot_take._get_kwargs(self.id, body=body))

    async def rollback(self, snapshot_id: str) -> dict[str, Any]:
        """Puts a snapshot back in place of this workspace's files and
        browser profile: what was made since it is gone."""
        body = Rollback.from_dict({"snapshot": snapshot_id})
        return await self._c._call(w_roll_back._get_kwargs(self.id, body=body))

    async def shares(self) -> list[dict[str, Any]]:
        """This workspace's share links: live, expired, revoked."""
        return (await self._c._call(w_shares._get_kwargs(self.id)))["shares"]

    async def revoke_share(self, share_id: str) -> None:
        """Revokes a share link: its open views close, control it held
        goes back, the link answers 410."""
        await self._c._call(w_share_revoke._get_kwargs(self.id, share_id))

    async def call_person(self, reason: str) -> dict[str, Any]:
        """Calls a person to take over the screen (a login, a captcha): the
        operator page shows the workspace as waiting with ``reason`` until
        an operator takes over. Returns the control state at once."""
        body = Handoff.from_dict({"reason": reason})
        return await self._c._call(w_handoff._get_kwargs(self.id, body=body))

    async def clipboard(self) -> str:
        """What the desktop's clipboard holds (what Ctrl+V would paste)."""
        answer = await self._c._call(w_clipboard_get._get_kwargs(self.id))
        return answer["text"]

    async def set_clipboard(self, text: str) -> Held | None:
        """Sets the desktop's clipboard (then Ctrl+V in the workspace
        pastes it); ``Held`` if the policy holds it for a person."""
        body = ClipboardText.from_dict({"text": text})
        answer = await self._c._call(w_clipboard_put._get_kwargs(self.id, body=body), may_hold=True)
        return answer if isinstance(answer, Held) else None

    # --- browser and live view ----------------------------------------------

    def cdp_url(self) -> str:
        """The CDP endpoint (send ``cdp_headers()`` with it)."""
        return f"{self._c.url}/v1/workspaces/{self.id}/cdp"

    def cdp_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._c.token}"}

    async def connect_playwright(self, playwright: Any) -> Any:
        """``await ws.connect_playwright(p)`` with ``p`` from
        ``async_playwright()``: the workspace's browser, through the
        gateway's CDP proxy."""
        return await playwright.chromium.connect_over_cdp(self.cdp_url(), headers=self.cdp_headers())

    def live_view_url(self) -> str:
        """The operator page showing this workspace (it logs in with the
        token once, then keeps it in a cookie)."""
        return f"{self._c.url}/?{urlencode({'token': self._c.token})}#{self.id}"

    async def events(self, after: int = 0, limit: int = 100) -> list[dict[str, Any]]:
        return await self._c.events(self.id, after, limit)

    async def ask(self, question: str, details: dict[str, Any] | None = None, *,
                  expires_in: int | None = None, wait: float = 0.0) -> dict[str, Any]:
        """Asks a person to confirm a step before the agent takes it (a
        model's safety check, say): an approval operators decide like a held
        operation; nothing runs when it is approved. Waits up to ``wait``
        seconds for the decision; the approval's ``state`` says pending,
        approved, denied or expired (then :meth:`AsyncCubicle.wait_for_approval`
        waits on). ``expires_in``: seconds a person has (default 600)."""
        body = {"question": question}
        if details is not None:
            body["details"] = details
        if expires_in is not None:
            body["expires_in_seconds"] = expires_in
        kwargs = w_ask._get_kwargs(self.id, body=Ask.from_dict(body), wait=wait or None)
        response = await self._c._send(kwargs)
        answer = _body_of(response)
        if response.status_code not in (200, 202):
            raise errors.from_answer(f"POST {kwargs['url']}", response.status_code, answer)
        return answer


def _size(image: bytes) -> tuple[int, int]:
    """Width and height of a PNG (its IHDR) or a JPEG (its first SOF)."""
    if image[:8] == b"\x89PNG\r\n\x1a\n" and len(image) >= 24:
        return int.from_bytes(image[16:20], "big"), int.from_bytes(image[20:24], "big")
    at = 2
    while image[:2] == b"\xff\xd8" and at + 9 < len(image):
        if image[at] != 0xFF:
            break
        marker, length = image[at + 1], int.from_bytes(image[at + 2:at + 4], "big")
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            return int.from_bytes(image[at + 7:at + 9], "big"), int.from_bytes(image[at + 5:at + 7], "big")
        at += 2 + length
    return 0, 0


def _result(result: Any) -> Any:
    if isinstance(result, dict) and result.get("type") == "image":
        return Screenshot(base64.b64decode(result["data"]), result.get("media_type", ""),
                          int(result.get("width", 0)), int(result.get("height", 0)))
    return result
