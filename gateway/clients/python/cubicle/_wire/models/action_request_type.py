from typing import Literal

ActionRequestType = Literal[
    "click",
    "double_click",
    "drag",
    "keypress",
    "move",
    "screenshot",
    "scroll",
    "type",
    "wait",
]

ACTION_REQUEST_TYPE_VALUES: set[ActionRequestType] = {
    "click",
    "double_click",
    "drag",
    "keypress",
    "move",
    "screenshot",
    "scroll",
    "type",
    "wait",
}


def check_action_request_type(value: str) -> ActionRequestType:
    if value in ACTION_REQUEST_TYPE_VALUES:
        return value
    raise TypeError(
        f"Unexpected value {value!r}. Expected one of {ACTION_REQUEST_TYPE_VALUES!r}"
    )
