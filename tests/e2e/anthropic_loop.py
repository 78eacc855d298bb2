"""The worked Anthropic loop (gateway/clients/python/examples/
anthropic_computer_use.py) with the official `anthropic` SDK, against a real
gateway and a local stand-in for the Messages API that replays a scripted
conversation in its wire format (no model is reachable from here). The
stand-in checks each request the SDK sends; this script then checks what
the loop did to the workspace.

Environment: CUBICLE_URL, CUBICLE_TOKEN (an agent's), WORKSPACE.
"""

import base64
import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import anthropic
import httpx

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "gateway", "clients", "python", "examples"))
import anthropic_computer_use as loop  # noqa: E402

from cubicle import Cubicle  # noqa: E402

MARK = "from-the-loop"


def tool_use(n, **action):
    return {"type": "tool_use", "id": f"toolu_{n:02d}", "name": "computer", "input": action}


SCRIPT = [
    [{"type": "text", "text": "Let me look."}, tool_use(1, action="screenshot")],
    [tool_use(2, action="mouse_move", coordinate=[100, 100]), tool_use(3, action="cursor_position")],
    [tool_use(4, action="key", text="ctrl+l"), tool_use(5, action="type", text=f"about:blank#{MARK}"),
     tool_use(6, action="key", text="Return")],
    [tool_use(7, action="zoom", region=[0, 0, 320, 200])],
    [{"type": "text", "text": "done"}],
]
REQUESTS = []


class StandIn(BaseHTTPRequestHandler):
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        REQUESTS.append({"path": self.path, "headers": dict(self.headers), "body": body})
        turn = len(REQUESTS) - 1
        content = SCRIPT[min(turn, len(SCRIPT) - 1)]
        answer = {
            "id": f"msg_{turn:02d}", "type": "message", "role": "assistant", "model": body["model"],
            "content": content,
            "stop_reason": "tool_use" if any(b["type"] == "tool_use" for b in content) else "end_turn",
            "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 10},
        }
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("request-id", f"req_{turn}")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def png_size(data: str) -> tuple[int, int]:
    raw = base64.b64decode(data)
    assert raw.startswith(b"\x89PNG"), raw[:8]
    return int.from_bytes(raw[16:20], "big"), int.from_bytes(raw[20:24], "big")


def results_of(request: dict) -> dict:
    last = request["body"]["messages"][-1]
    assert last["role"] == "user", last
    return {r["tool_use_id"]: r for r in last["content"]}


server = ThreadingHTTPServer(("127.0.0.1", 0), StandIn)
threading.Thread(target=server.serve_forever, daemon=True).start()
client = anthropic.Anthropic(api_key="sk-ant-test", base_url=f"http://127.0.0.1:{server.server_address[1]}")

with Cubicle() as cubicle:
    ws = cubicle.connect(os.environ["WORKSPACE"])
    answer, overheads = loop.run("Open the marker page.", ws, cubicle, client)
    assert answer == "done", answer
    assert len(REQUESTS) == len(SCRIPT), len(REQUESTS)

    first = REQUESTS[0]
    assert first["path"].split("?")[0] == "/v1/messages", first["path"]
    assert "computer-use-2025-11-24" in first["headers"].get("anthropic-beta", ""), first["headers"]
    tool = first["body"]["tools"][0]
    assert tool["type"] == "computer_20251124" and tool["name"] == "computer", tool
    size = (tool["display_width_px"], tool["display_height_px"])
    assert size[0] <= 1280 and size[1] <= 800, size

    shot = results_of(REQUESTS[1])["toolu_01"]
    assert not shot["is_error"], shot
    assert png_size(shot["content"][0]["source"]["data"]) == size, "screenshots come at the size the tool declared"
    moved = results_of(REQUESTS[2])
    assert png_size(moved["toolu_02"]["content"][-1]["source"]["data"]) == size
    cursor = json.loads(moved["toolu_03"]["content"][0]["text"])
    assert cursor == {"coordinate": [100, 100]}, f"coordinates round trip in the model's space: {cursor}"
    typed = results_of(REQUESTS[3])
    assert all(not r["is_error"] for r in typed.values()), typed
    zoomed = results_of(REQUESTS[4])["toolu_07"]
    assert zoomed["content"][0]["type"] == "image", zoomed

    pages = httpx.get(ws.cdp_url() + "/json/list", headers=ws.cdp_headers(), timeout=30).json()
    urls = [p.get("url", "") for p in pages]
    assert any(MARK in u for u in urls), f"the typed address was opened: {urls}"

    overheads.sort()
    print(f"measured: anthropic loop, {len(overheads)} steps, time outside the model per step p50 "
          f"{overheads[len(overheads) // 2] * 1000:.0f} ms, max {overheads[-1] * 1000:.0f} ms")
print("anthropic loop: ok")
