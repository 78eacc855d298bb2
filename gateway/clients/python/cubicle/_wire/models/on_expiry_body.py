from typing import Literal

OnExpiryBody = Literal["delete", "stop"]

ON_EXPIRY_BODY_VALUES: set[OnExpiryBody] = {
    "delete",
    "stop",
}


def check_on_expiry_body(value: str) -> OnExpiryBody:
    if value in ON_EXPIRY_BODY_VALUES:
        return value
    raise TypeError(
        f"Unexpected value {value!r}. Expected one of {ON_EXPIRY_BODY_VALUES!r}"
    )
