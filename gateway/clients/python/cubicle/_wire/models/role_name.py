from typing import Literal

RoleName = Literal["admin", "agent", "auditor", "operator"]

ROLE_NAME_VALUES: set[RoleName] = {
    "admin",
    "agent",
    "auditor",
    "operator",
}


def check_role_name(value: str) -> RoleName:
    if value in ROLE_NAME_VALUES:
        return value
    raise TypeError(f"Unexpected value {value!r}. Expected one of {ROLE_NAME_VALUES!r}")
