from typing import Literal

ShareMode = Literal["control", "view"]

SHARE_MODE_VALUES: set[ShareMode] = {
    "control",
    "view",
}


def check_share_mode(value: str) -> ShareMode:
    if value in SHARE_MODE_VALUES:
        return value
    raise TypeError(
        f"Unexpected value {value!r}. Expected one of {SHARE_MODE_VALUES!r}"
    )
