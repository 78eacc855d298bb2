from typing import Literal

ScrollDirection = Literal["down", "left", "right", "up"]

SCROLL_DIRECTION_VALUES: set[ScrollDirection] = {
    "down",
    "left",
    "right",
    "up",
}


def check_scroll_direction(value: str) -> ScrollDirection:
    if value in SCROLL_DIRECTION_VALUES:
        return value
    raise TypeError(
        f"Unexpected value {value!r}. Expected one of {SCROLL_DIRECTION_VALUES!r}"
    )
