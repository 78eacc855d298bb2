"""The worked OpenAI loop (gateway/clients/python/examples/
openai_computer_use.py) with the official `openai` SDK, against a real
gateway and a local stand-in for the Responses API that replays a scripted
conversation in its wire format (no model is reachable from here). The
stand-in checks each request the SDK sends; an operator thread decides the
safety checks the loop turns into Cubicle approvals; this script then
checks what the loop did to the workspace.

Environment: CUBICLE_URL, CUBICLE_TOKEN (an agent's), OPERATOR_TOKEN,
WORKSPACE.
"""

import base64
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import openai

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "gateway", "clients", "python", "examples"))
import openai_computer_use as loop  # noqa: E402

from cubicle import Cubicle  # noqa: E402

MARK = "from-the-openai-loop"


def call(n, actions, checks=()):
    return {"type": "computer_call", "id": f"cu_{n:02d}", "call_id": f"call_{n:02d}", "status": "completed",
            "actions": actions, "pending_safety_checks": list(checks)}


def address(text):
    """A batch that opens `text` in the browser's address bar."""
    return [{"type": "keypress", "keys": ["CTRL", "L"]}, {"type": "type", "text": text},
            {"type": "keypress", "keys": ["ENTER"]}]


def check(n, code):
    return {"id": f"sc_{n}", "code": code, "message": f"Safety check {n}: the page may be steering the agent."}


def message(text):
    return {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}


# Two conversations: the first runs a batch, then one whose safety check a
# person approves, and ends; the second's safety check is denied.
SCRIPT = [
    [call(1, [{"type": "screenshot"}])],
    [call(2, [{"type": "move", "x": 100, "y": 100}, *address(f"about:blank#{MARK}")])],
    [call(3, address(f"about:blank#{MARK}-confirmed"), [check(1, "malicious_instructions")])],
    [message("done")],
    [call(4, address(f"about:blank#{MARK}-never"), [check(2, "irrelevant_domain")])],
]
REQUESTS = []
DECISIONS = {"sc_1": "approve", "sc_2": "deny"}


class StandIn(BaseHTTPRequestHandler):
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        REQUESTS.append({"path": self.path, "headers": dict(self.headers), "body": body})
        turn = len(REQUESTS) - 1
        answer = {
            "id": f"resp_{turn:02d}", "object": "response", "created_at": int(time.time()), "status": "completed",
            "model": body["model"], "output": SCRIPT[min(turn, len(SCRIPT) - 1)], "error": None,
            "incomplete_details": None, "instructions": None, "metadata": {}, "parallel_tool_calls": True,
            "temperature": 1.0, "top_p": 1.0, "tool_choice": "auto", "tools": body.get("tools", []),
            "usage": {"input_tokens": 10, "output_tokens": 10, "total_tokens": 20,
                      "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}},
        }
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("x-request-id", f"req_{turn}")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def operator(stop: threading.Event, seen: dict) -> None:
    """A person at the page: decides each safety check the loop asks."""
    headers = {"authorization": f"Bearer {os.environ['OPERATOR_TOKEN']}"}
    base = os.environ["CUBICLE_URL"]
    while not stop.is_set():
        pending = httpx.get(f"{base}/v1/approvals", params={"state": "pending", "workspace": os.environ["WORKSPACE"]},
                            headers=headers, timeout=30).json()["approvals"]
        for approval in pending:
            check_id = approval["params"]["details"]["safety_check"]["id"]
            seen[check_id] = approval
            verb = DECISIONS[check_id]
            answer = httpx.post(f"{base}/v1/approvals/{approval['id']}/{verb}", headers=headers, timeout=30,
                                json={"reason": f"{verb} from the operator thread"})
            assert answer.status_code == 200, answer.text
        stop.wait(0.2)


def png_size(url: str) -> tuple[int, int]:
    prefix = "data:image/png;base64,"
    assert url.startswith(prefix), url[:40]
    raw = base64.b64decode(url[len(prefix):])
    assert raw.startswith(b"\x89PNG"), raw[:8]
    return int.from_bytes(raw[16:20], "big"), int.from_bytes(raw[20:24], "big")


def output_of(request: dict, call_id: str) -> dict:
    items = [i for i in request["body"]["input"] if i.get("type") == "computer_call_output"]
    assert [i["call_id"] for i in items] == [call_id], items
    return items[0]


def urls(ws) -> list[str]:
    pages = httpx.get(ws.cdp_url() + "/json/list", headers=ws.cdp_headers(), timeout=30).json()
    return [p.get("url", "") for p in pages]


server = ThreadingHTTPServer(("127.0.0.1", 0), StandIn)
threading.Thread(target=server.serve_forever, daemon=True).start()
client = openai.OpenAI(api_key="sk-test", base_url=f"http://127.0.0.1:{server.server_address[1]}/v1")
stop, seen = threading.Event(), {}
person = threading.Thread(target=operator, args=(stop, seen), daemon=True)
person.start()

with Cubicle() as cubicle:
    ws = cubicle.connect(os.environ["WORKSPACE"])
    answer, overheads = loop.run("Open the marker page.", ws, cubicle, client)
    assert answer == "done", answer
    assert len(REQUESTS) == 4, len(REQUESTS)

    first = REQUESTS[0]
    assert first["path"] == "/v1/responses", first["path"]
    assert first["body"]["tools"] == [{"type": "computer"}], first["body"]["tools"]
    assert "previous_response_id" not in first["body"], first["body"]
    for turn, request in enumerate(REQUESTS[1:], start=1):
        assert request["body"]["previous_response_id"] == f"resp_{turn - 1:02d}", request["body"]

    shot = output_of(REQUESTS[1], "call_01")
    size = png_size(shot["output"]["image_url"])
    assert size[0] <= 1440 and size[1] <= 900, size
    assert "acknowledged_safety_checks" not in shot, shot
    batch = output_of(REQUESTS[2], "call_02")
    assert png_size(batch["output"]["image_url"]) == size, "every screenshot at the size the first one had"
    # Enter was pressed in the batch; the navigation it starts commits
    # on its own time: wait for the tab's URL to say so.
    deadline = time.time() + 60
    while not any(f"#{MARK}" in u for u in urls(ws)) and time.time() < deadline:
        time.sleep(0.2)
    assert any(f"#{MARK}" in u for u in urls(ws)), urls(ws)

    confirmed = output_of(REQUESTS[3], "call_03")
    assert confirmed["acknowledged_safety_checks"] == [check(1, "malicious_instructions")], confirmed
    asked = seen["sc_1"]
    assert asked["operation"] == "ask" and asked["reason"] == check(1, "")["message"], asked
    assert asked["params"]["details"]["actions"][1] == {"type": "type", "text": f"about:blank#{MARK}-confirmed"}, asked
    # The screen as it was when asked: in the record at once, or (a
    # loaded host) added to it soon after.
    deadline = time.monotonic() + 60
    while not asked["has_screenshot"] and time.monotonic() < deadline:
        time.sleep(0.25)
        asked = httpx.get(f"{os.environ['CUBICLE_URL']}{asked['url']}", timeout=30,
                          headers={"authorization": f"Bearer {os.environ['OPERATOR_TOKEN']}"}).json()
    assert asked["has_screenshot"], asked
    assert any(f"#{MARK}-confirmed" in u for u in urls(ws)), urls(ws)

    # The second conversation: the person denies; nothing of the call runs
    # and the model is never told the check was acknowledged.
    stopped, _ = loop.run("Open another page.", ws, cubicle, client)
    assert stopped.startswith("stopped: a person did not confirm irrelevant_domain (denied)"), stopped
    assert len(REQUESTS) == 5, len(REQUESTS)
    assert "sc_2" in seen, seen
    assert not any(f"#{MARK}-never" in u for u in urls(ws)), urls(ws)

    with Cubicle(token=os.environ["OPERATOR_TOKEN"]) as audit:
        kinds = [e["kind"] for e in audit.events(ws.id, limit=1000)]
    for kind in ("approval.request", "approval.approve", "approval.deny"):
        assert kind in kinds, f"{kind} is in the workspace's audit log: {kinds}"

    overheads.sort()
    print(f"measured: openai loop, {len(overheads)} steps, time outside the model and people per step p50 "
          f"{overheads[len(overheads) // 2] * 1000:.0f} ms, max {overheads[-1] * 1000:.0f} ms")
stop.set()
print("openai loop: ok")
