from typing import Literal

Scope = Literal["once", "workspace"]

SCOPE_VALUES: set[Scope] = {
    "once",
    "workspace",
}


def check_scope(value: str) -> Scope:
    if value in SCOPE_VALUES:
        return value
    raise TypeError(f"Unexpected value {value!r}. Expected one of {SCOPE_VALUES!r}")
