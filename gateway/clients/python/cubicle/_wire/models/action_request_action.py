from typing import Literal

ActionRequestAction = Literal[
    "cursor_position",
    "double_click",
    "hold_key",
    "key",
    "left_click",
    "left_click_drag",
    "left_mouse_down",
    "left_mouse_up",
    "middle_click",
    "mouse_move",
    "right_click",
    "screenshot",
    "scroll",
    "triple_click",
    "type",
    "wait",
    "zoom",
]

ACTION_REQUEST_ACTION_VALUES: set[ActionRequestAction] = {
    "cursor_position",
    "double_click",
    "hold_key",
    "key",
    "left_click",
    "left_click_drag",
    "left_mouse_down",
    "left_mouse_up",
    "middle_click",
    "mouse_move",
    "right_click",
    "screenshot",
    "scroll",
    "triple_click",
    "type",
    "wait",
    "zoom",
}


def check_action_request_action(value: str) -> ActionRequestAction:
    if value in ACTION_REQUEST_ACTION_VALUES:
        return value
    raise TypeError(
        f"Unexpected value {value!r}. Expected one of {ACTION_REQUEST_ACTION_VALUES!r}"
    )
