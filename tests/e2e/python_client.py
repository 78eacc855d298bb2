"""The Python client (gateway/clients/python, pip-installed by
tests/e2e/python_client.rs) against a real gateway: every part of its
surface a person would use, sync and async, each asserted; then the round
trip of one `act([click, type], screenshot=True)` against the same actions
as separate calls and against E2B Desktop's pattern (xdotool and a screen
grab through exec in the workspace), printed as ratios (measured, never
asserted).

Environment: CUBICLE_URL, CUBICLE_TOKEN (an agent's), OPERATOR_TOKEN,
WORKSPACE (a running workspace of the agent's, under a policy that holds
`touch /home/user/held-*`).
"""

import asyncio
import json
import os
import statistics
import time

import httpx

from cubicle import AsyncCubicle, Cubicle, ExecResult, Held, Screenshot, errors

WORKSPACE = os.environ["WORKSPACE"]


def check_sync() -> None:
    with Cubicle() as cubicle:
        assert cubicle.me()["role"] == "agent"
        assert WORKSPACE in [w.id for w in cubicle.list()]
        ws = cubicle.connect(WORKSPACE)

        shot = ws.screenshot()
        assert shot.data.startswith(b"\x89PNG") and shot.width > 0 and shot.height > 0, shot
        jpeg = ws.screenshot(format="jpeg", quality=60)
        assert jpeg.data.startswith(b"\xff\xd8") and (jpeg.width, jpeg.height) == (shot.width, shot.height)

        results = ws.act(
            [{"action": "mouse_move", "coordinate": [100, 100]}, {"type": "click", "x": 100, "y": 100}],
            screenshot=True,
        )
        assert isinstance(results[-1], Screenshot) and results[-1].width == shot.width, results
        ws.left_click(50, 50)
        ws.key("Escape")

        done = ws.exec(["sh", "-c", "echo hi; echo oops >&2; exit 3"])
        assert isinstance(done, ExecResult), done
        assert (done.exit_code, done.stdout, done.stderr) == (3, "hi\n", "oops\n"), done
        piped = ws.exec("tr a-z A-Z", stdin="shout")
        assert piped.stdout == "SHOUT", piped

        streamed = list(ws.exec_stream(["sh", "-c", "cat; echo done >&2"], stdin="piped\n"))
        out = "".join(t for k, t in streamed if k == "stdout")
        err = "".join(t for k, t in streamed if k == "stderr")
        assert out == "piped\n" and err == "done\n", streamed
        assert streamed[-1][0] == "exit" and streamed[-1][1]["exit_code"] == 0, streamed

        ws.write_file("/home/user/from-python.bin", bytes(range(256)) * 100)
        assert ws.read_file("/home/user/from-python.bin") == bytes(range(256)) * 100
        names = [e["name"] for e in ws.list_files("/home/user")]
        assert "from-python.bin" in names, names
        ws.delete_file("/home/user/from-python.bin")
        try:
            ws.read_file("/home/user/from-python.bin")
            raise AssertionError("a deleted file was read")
        except errors.NotFound as err:
            assert err.code == "not_found", err

        assert ws.set_clipboard("from Python ✓") is None
        assert ws.clipboard() == "from Python ✓"
        called = ws.call_person("please log in for me")
        assert called["call"]["reason"] == "please log in for me", called

        # Secrets are the operators': an agent may not store one; a secret
        # for a host this workspace's egress policy does not open is
        # refused, and the workspace holds none.
        try:
            cubicle.store_secret("k", "v", ["api.example.com"])
            raise AssertionError("an agent stored a secret")
        except errors.Forbidden as err:
            assert err.status == 403, err
        with Cubicle(token=os.environ["OPERATOR_TOKEN"]) as operator:
            made = operator.store_secret("gh", "value-from-python", ["api.example.com"])
            assert "value" not in made and made["hosts"] == ["api.example.com"], made
            assert [s["id"] for s in operator.secrets()] == [made["id"]]
            try:
                operator.connect(WORKSPACE).give_secret(made["id"], env="GH_TOKEN")
                raise AssertionError("a secret for a host the workspace may not reach was given")
            except errors.Conflict as err:
                assert err.code == "secret_host_not_allowed", err
            operator.delete_secret(made["id"])
            assert operator.secrets() == []
            # Share links: made, listed (never the secret), revoked.
            shared = operator.connect(WORKSPACE).share("view", expires_in_s=120)
            assert shared["url"].startswith("/share#cubicle_share_"), shared
            listed = operator.connect(WORKSPACE).shares()
            assert [(s["id"], s["state"]) for s in listed] == [(shared["id"], "live")], listed
            assert "url" not in listed[0], listed
            operator.connect(WORKSPACE).revoke_share(shared["id"])
            assert operator.connect(WORKSPACE).shares()[0]["state"] == "revoked"
            # Profiles: none of this operator's yet.
            assert operator.profiles() == []
        assert ws.secrets() == []
        try:
            ws.share("view")
            raise AssertionError("an agent made a share link")
        except errors.Forbidden as err:
            assert err.status == 403, err

        # fill_secret and upload through the client: a secret the
        # workspace was not given, the EICAR file (the quarantine's scan)
        # and a page without the file input are refused with their codes.
        try:
            ws.fill_secret("sec-000000000000", selector="#pw")
            raise AssertionError("a secret the workspace was not given was filled")
        except errors.NotFound as err:
            assert err.code == "secret_not_given", err
        eicar = rb"X5O!P%@AP[4\PZX54(P^)7CC)7}$EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*"
        try:
            ws.upload("eicar.com", eicar, selector="#f")
            raise AssertionError("the EICAR file was handed to a page")
        except errors.Forbidden as err:
            assert err.code == "upload_flagged", err
        try:
            ws.upload("notes.txt", "hello", selector="#no-such-input")
            raise AssertionError("an upload went to no file input")
        except errors.Conflict as err:
            assert err.code == "upload_refused", err

        # Held: a result, not an exception; decided by an operator, then
        # sent again with the approval.
        held = ws.exec(["touch", "/home/user/held-python"])
        assert isinstance(held, Held) and held.approval_id.startswith("apr-"), held
        with Cubicle(token=os.environ["OPERATOR_TOKEN"]) as operator:
            pending = [a["id"] for a in operator.approvals()]
            assert held.approval_id in pending, pending
            operator.approve(held.approval_id, reason="python client test")
        decided = cubicle.wait_for_approval(held.approval_id, timeout=30)
        assert decided["state"] == "approved", decided
        again = ws.exec(["touch", "/home/user/held-python"], approval=held.approval_id)
        assert isinstance(again, ExecResult) and again.exit_code == 0, again

        # Snapshots: taken, listed, rolled back to (a changed file is as
        # it was), removed.
        ws.write_file("/home/user/snap.txt", b"before")
        snap = ws.snapshot("from-python")
        assert (snap["kind"], snap["name"], snap["workspace_id"]) == ("disk", "from-python", WORKSPACE), snap
        assert [s["id"] for s in cubicle.snapshots()] == [snap["id"]]
        ws.write_file("/home/user/snap.txt", b"after")
        assert ws.rollback(snap["id"])["sha256"] == snap["sha256"]
        assert ws.read_file("/home/user/snap.txt") == b"before"
        cubicle.delete_snapshot(snap["id"])
        assert cubicle.snapshots() == []

        # The browser through the gateway's CDP proxy; the live view's URL.
        version = httpx.get(ws.cdp_url() + "/json/version", headers=ws.cdp_headers(), timeout=30).json()
        assert "Browser" in version and version["webSocketDebuggerUrl"].startswith("ws"), version
        assert ws.live_view_url().endswith("#" + WORKSPACE)
    check_errors()


def check_errors() -> None:
    try:
        Cubicle(token="cubicle_wrong").list()
        raise AssertionError("a wrong token listed workspaces")
    except errors.Unauthorized as err:
        assert err.status == 401, err
    with Cubicle() as cubicle:
        try:
            cubicle.connect("ws-000000000000")
            raise AssertionError("found a workspace that is not there")
        except errors.NotFound as err:
            assert (err.status, err.code) == (404, "not_found"), err
        try:
            cubicle.events()
            raise AssertionError("an agent read the event log")
        except errors.Forbidden as err:
            assert "cannot" in err.message, err
    try:
        Cubicle("http://127.0.0.1:9", "cubicle_x").list()
        raise AssertionError("reached a gateway that is not there")
    except errors.Unreachable as err:
        assert "127.0.0.1:9" in err.message, err
    token = os.environ.pop("CUBICLE_TOKEN")
    try:
        Cubicle()
        raise AssertionError("a client without a token was made")
    except errors.ConfigError as err:
        assert "CUBICLE_TOKEN" in err.message, err
    finally:
        os.environ["CUBICLE_TOKEN"] = token


async def check_async() -> None:
    async with AsyncCubicle() as cubicle:
        ws = await cubicle.connect(WORKSPACE)
        shots = await asyncio.gather(*(ws.screenshot() for _ in range(3)))
        assert all(s.data.startswith(b"\x89PNG") for s in shots)
        done = await ws.exec(["true"])
        assert done.exit_code == 0, done
        async with await cubicle.create(name="python-async") as made:
            assert made.record["state"] == "running", made.record
            assert (await made.exec(["echo", "new"])).stdout == "new\n"
            made_id = made.id
        try:
            await cubicle.connect(made_id)
            raise AssertionError("the context manager left the workspace")
        except errors.NotFound:
            pass


def p50(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def measure() -> dict:
    with Cubicle() as cubicle:
        ws = cubicle.connect(WORKSPACE)
        click = {"action": "left_click", "coordinate": [640, 700]}
        typing = {"action": "type", "text": "a"}
        one, separate, e2b = [], [], []
        has_tools = ws.exec("command -v xdotool && command -v xwd && command -v convert").exit_code == 0
        for _ in range(15):
            start = time.perf_counter()
            ws.act([click, typing], screenshot=True)
            one.append(time.perf_counter() - start)
            start = time.perf_counter()
            ws.act([click])
            ws.act([typing])
            ws.screenshot()
            separate.append(time.perf_counter() - start)
            if has_tools:
                start = time.perf_counter()
                ws.exec("xdotool mousemove 640 700 click 1")
                ws.exec("xdotool type a")
                ws.exec("xwd -root -silent | convert xwd:- png:- | base64 -w0")
                e2b.append(time.perf_counter() - start)
        row = {"act_one_request_p50_ms": p50(one), "separate_calls_p50_ms": p50(separate)}
        row["separate_over_one"] = p50(separate) / p50(one)
        if e2b:
            row["e2b_pattern_p50_ms"] = p50(e2b)
            row["e2b_pattern_over_one"] = p50(e2b) / p50(one)
        return row


check_sync()
asyncio.run(check_async())
print("measured: " + json.dumps(measure()))
print("python client: ok")
