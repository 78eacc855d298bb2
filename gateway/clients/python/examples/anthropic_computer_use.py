"""A worked computer-use loop: Claude's `computer_20251124` tool driving a
Cubicle workspace, with Anthropic's official SDK.

    pip install ./gateway/clients/python anthropic
    export ANTHROPIC_API_KEY=... CUBICLE_URL=http://127.0.0.1:7878 CUBICLE_TOKEN=cubicle_...
    python gateway/clients/python/examples/anthropic_computer_use.py "Open example.com in the browser"

Screenshots are scaled the way Anthropic's reference loop does (to at most
1280x800 keeping the screen's shape, so the model sees a size it was
trained on); the gateway does the scaling itself: a `screenshot` action
with `width`/`height` puts every later coordinate in that space, so the
model's coordinates are sent as they are. Every action is one request
(the action, then a screenshot of its effect). An action a policy holds
waits for an operator; a denial goes back to the model as an error.

`ANTHROPIC_BASE_URL` points the SDK elsewhere (the tests use a stand-in
that replays a scripted conversation).
"""

from __future__ import annotations

import base64
import json
import os
import sys
import time
from typing import Any

import anthropic

from cubicle import Cubicle, Held, Screenshot, Workspace

MODEL = os.environ.get("ANTHROPIC_MODEL", "claude-opus-4-5")
BETA = "computer-use-2025-11-24"
TARGET = (1280, 800)


def scaled_size(width: int, height: int) -> tuple[int, int]:
    """The largest size within TARGET with the screen's shape (never larger
    than the screen)."""
    ratio = min(TARGET[0] / width, TARGET[1] / height, 1.0)
    return max(1, round(width * ratio)), max(1, round(height * ratio))


def image_block(shot: Screenshot) -> dict[str, Any]:
    return {
        "type": "image",
        "source": {"type": "base64", "media_type": shot.media_type or "image/png",
                   "data": base64.b64encode(shot.data).decode()},
    }


class ComputerTool:
    """Runs the tool's actions on a workspace, in the model's coordinates."""

    def __init__(self, workspace: Workspace, cubicle: Cubicle):
        self.ws = workspace
        self.cubicle = cubicle
        full = workspace.screenshot()
        self.width, self.height = scaled_size(full.width, full.height)
        self.screenshot_action = {"action": "screenshot", "width": self.width, "height": self.height}
        # Sets the coordinate space before the model's first action.
        workspace.act([self.screenshot_action])

    def spec(self) -> dict[str, Any]:
        return {"type": "computer_20251124", "name": "computer",
                "display_width_px": self.width, "display_height_px": self.height, "enable_zoom": True}

    def run(self, action: dict[str, Any]) -> tuple[list[dict[str, Any]], bool]:
        """The tool result's content for one action, and whether it failed."""
        name = action.get("action")
        if name == "screenshot":
            batch = [self.screenshot_action]
        elif name == "zoom":
            batch = [action]
        else:
            batch = [action, self.screenshot_action]
        results = self.ws.act(batch)
        if isinstance(results, Held):
            results = self.wait_and_retry(batch, results)
            if isinstance(results, str):
                return [{"type": "text", "text": results}], True
        content: list[dict[str, Any]] = []
        for result in results:
            if isinstance(result, Screenshot):
                content.append(image_block(result))
            elif result not in (None, {}):
                content.append({"type": "text", "text": json.dumps(result)})
        return content, False

    def wait_and_retry(self, batch: list[dict[str, Any]], held: Held) -> list[Any] | str:
        print(f"held for an operator ({held.reason}): approval {held.approval_id}", file=sys.stderr)
        decided = self.cubicle.wait_for_approval(held.approval_id, timeout=300)
        if decided["state"] != "approved":
            return f"an operator did not approve this action ({decided['state']}): {decided.get('decision_reason') or ''}"
        return self.ws.act(batch, approval=held.approval_id)


def run(task: str, workspace: Workspace, cubicle: Cubicle, client: anthropic.Anthropic,
        max_steps: int = 50) -> tuple[str, list[float]]:
    """Works on `task` until the model answers without a tool call; its
    last text, and the time each step spent outside the model (seconds)."""
    tool = ComputerTool(workspace, cubicle)
    messages: list[dict[str, Any]] = [{"role": "user", "content": task}]
    overheads: list[float] = []
    for _ in range(max_steps):
        response = client.beta.messages.create(
            model=MODEL, max_tokens=4096, tools=[tool.spec()], messages=messages, betas=[BETA],
        )
        started = time.perf_counter()
        messages.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in response.content]})
        calls = [b for b in response.content if b.type == "tool_use"]
        if not calls:
            return "".join(b.text for b in response.content if b.type == "text"), overheads
        results = []
        for call in calls:
            content, failed = tool.run(dict(call.input))
            results.append({"type": "tool_result", "tool_use_id": call.id, "content": content, "is_error": failed})
        messages.append({"role": "user", "content": results})
        overheads.append(time.perf_counter() - started)
    return "stopped after max_steps", overheads


def main() -> None:
    task = " ".join(sys.argv[1:]) or "Take a screenshot and describe the desktop."
    with Cubicle() as cubicle:
        workspace_id = os.environ.get("WORKSPACE")
        workspace = cubicle.connect(workspace_id) if workspace_id else cubicle.create(name="claude")
        answer, overheads = run(task, workspace, cubicle, anthropic.Anthropic())
        print(answer)
        if overheads:
            overheads.sort()
            print(f"steps: {len(overheads)}; per-step time outside the model p50 "
                  f"{overheads[len(overheads) // 2] * 1000:.0f} ms", file=sys.stderr)
        if not workspace_id:
            workspace.delete()


if __name__ == "__main__":
    main()
