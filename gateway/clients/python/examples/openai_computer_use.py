"""A worked computer-use loop: OpenAI's GA `computer` tool driving a Cubicle
workspace, with OpenAI's official SDK (the Responses API).

    pip install ./gateway/clients/python openai
    export OPENAI_API_KEY=... CUBICLE_URL=http://127.0.0.1:7878 CUBICLE_TOKEN=cubicle_...
    python gateway/clients/python/examples/openai_computer_use.py "Open example.com in the browser"

Each `computer_call` carries a batch of actions (`actions[]`); the batch and
a screenshot of its effect go to the gateway as one request (the gateway
takes OpenAI's action objects as they are). Screenshots are at most
1440x900 keeping the screen's shape; the gateway scales them itself, and a
`screenshot` action with `width`/`height` puts every later coordinate in
that space, so the model's coordinates are sent as they are.

A call's `pending_safety_checks` are never acknowledged by the loop on its
own: each becomes a Cubicle approval (`Workspace.ask`) that an operator
decides in the page or with `cubicle approvals approve`. The call's actions
run, and the check is acknowledged to the model, only once a person
approved every check; a denial ends the run. An action a policy holds
waits for an operator the same way; a denial of it goes back to the model.

`OPENAI_BASE_URL` points the SDK elsewhere (the tests use a stand-in that
replays a scripted conversation).
"""

from __future__ import annotations

import base64
import os
import sys
import time
from typing import Any

import openai

from cubicle import Cubicle, Held, Screenshot, Workspace

MODEL = os.environ.get("OPENAI_MODEL", "gpt-5.4")
LARGEST = (1440, 900)
# How long a person has to answer a safety check, and how long the loop waits.
DECIDE_SECONDS = 600


def scaled_size(width: int, height: int) -> tuple[int, int]:
    """The largest size within LARGEST with the screen's shape (never
    larger than the screen)."""
    ratio = min(LARGEST[0] / width, LARGEST[1] / height, 1.0)
    return max(1, round(width * ratio)), max(1, round(height * ratio))


class Stopped(Exception):
    """A person did not confirm a safety check: the run ends here."""


class Computer:
    """Runs a `computer_call`'s batch on a workspace, in the model's
    coordinates, after a person confirmed its safety checks."""

    def __init__(self, workspace: Workspace, cubicle: Cubicle):
        self.ws = workspace
        self.cubicle = cubicle
        # Seconds spent waiting for people (safety checks, held actions):
        # not the loop's own cost.
        self.waited = 0.0
        full = workspace.screenshot()
        self.width, self.height = scaled_size(full.width, full.height)
        self.screenshot_action = {"type": "screenshot", "width": self.width, "height": self.height}
        # Sets the coordinate space before the model's first action.
        workspace.act([self.screenshot_action])

    def confirm(self, call: Any) -> list[dict[str, Any]]:
        """Each pending safety check asked of a person; the acknowledgements
        to send back, once every one was approved."""
        acknowledged = []
        for check in call.pending_safety_checks or []:
            details = {
                "source": "openai",
                "safety_check": {"id": check.id, "code": check.code},
                "call_id": call.call_id,
                "actions": [a.model_dump(exclude_none=True) for a in actions_of(call)],
            }
            question = check.message or f"The model's safety check {check.code or check.id} asks a person to confirm."
            asked = time.perf_counter()
            approval = self.ws.ask(question, details, expires_in=DECIDE_SECONDS, wait=60)
            print(f"safety check {check.code}: asked a person (approval {approval['id']})", file=sys.stderr)
            deadline = time.monotonic() + DECIDE_SECONDS
            while approval["state"] == "pending" and time.monotonic() < deadline:
                approval = self.cubicle.wait_for_approval(approval["id"], timeout=60)
            self.waited += time.perf_counter() - asked
            if approval["state"] != "approved":
                reason = approval.get("decision_reason") or ""
                raise Stopped(f"a person did not confirm {check.code or check.id} ({approval['state']}): {reason}")
            acknowledged.append({"id": check.id, "code": check.code, "message": check.message})
        return acknowledged

    def run(self, call: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """The call's output (a screenshot after its actions) and its
        acknowledged safety checks."""
        acknowledged = self.confirm(call)
        batch = [a.model_dump(exclude_none=True) for a in actions_of(call) if a.type != "screenshot"]
        batch.append(self.screenshot_action)
        results = self.ws.act(batch)
        if isinstance(results, Held):
            print(f"held for an operator ({results.reason}): approval {results.approval_id}", file=sys.stderr)
            held = time.perf_counter()
            decided = self.cubicle.wait_for_approval(results.approval_id, timeout=300)
            self.waited += time.perf_counter() - held
            if decided["state"] == "approved":
                results = self.ws.act(batch, approval=results.approval_id)
            else:
                # The model sees the screen as it is; nothing ran.
                results = self.ws.act([self.screenshot_action])
        shot = next(r for r in reversed(results) if isinstance(r, Screenshot))
        output = {
            "type": "computer_screenshot",
            "image_url": f"data:{shot.media_type or 'image/png'};base64,{base64.b64encode(shot.data).decode()}",
        }
        return output, acknowledged


def actions_of(call: Any) -> list[Any]:
    """A call's batch (`actions`), or its single `action` (older models)."""
    if call.actions:
        return list(call.actions)
    return [call.action] if call.action is not None else []


def run(task: str, workspace: Workspace, cubicle: Cubicle, client: openai.OpenAI,
        max_steps: int = 50) -> tuple[str, list[float]]:
    """Works on `task` until the model answers without a computer call; its
    last text (or why it stopped), and the time each step spent outside the
    model and outside people's decisions (seconds)."""
    computer = Computer(workspace, cubicle)
    tools = [{"type": "computer"}]
    response = client.responses.create(model=MODEL, tools=tools, input=[{"role": "user", "content": task}])
    overheads: list[float] = []
    for _ in range(max_steps):
        started, waited = time.perf_counter(), computer.waited
        calls = [item for item in response.output if item.type == "computer_call"]
        if not calls:
            return response.output_text, overheads
        outputs = []
        try:
            for call in calls:
                output, acknowledged = computer.run(call)
                item = {"type": "computer_call_output", "call_id": call.call_id, "output": output}
                if acknowledged:
                    item["acknowledged_safety_checks"] = acknowledged
                outputs.append(item)
        except Stopped as stop:
            return f"stopped: {stop}", overheads
        overheads.append(time.perf_counter() - started - (computer.waited - waited))
        response = client.responses.create(
            model=MODEL, tools=tools, previous_response_id=response.id, input=outputs,
        )
    return "stopped after max_steps", overheads


def main() -> None:
    task = " ".join(sys.argv[1:]) or "Take a screenshot and describe the desktop."
    with Cubicle() as cubicle:
        workspace_id = os.environ.get("WORKSPACE")
        workspace = cubicle.connect(workspace_id) if workspace_id else cubicle.create(name="openai")
        answer, overheads = run(task, workspace, cubicle, openai.OpenAI())
        print(answer)
        if overheads:
            overheads.sort()
            print(f"steps: {len(overheads)}; per-step time outside the model p50 "
                  f"{overheads[len(overheads) // 2] * 1000:.0f} ms", file=sys.stderr)
        if not workspace_id:
            workspace.delete()


if __name__ == "__main__":
    main()
