from typing import Literal

ApprovalStateFilter = Literal["all", "approved", "denied", "expired", "pending"]

APPROVAL_STATE_FILTER_VALUES: set[ApprovalStateFilter] = {
    "all",
    "approved",
    "denied",
    "expired",
    "pending",
}


def check_approval_state_filter(value: str) -> ApprovalStateFilter:
    if value in APPROVAL_STATE_FILTER_VALUES:
        return value
    raise TypeError(
        f"Unexpected value {value!r}. Expected one of {APPROVAL_STATE_FILTER_VALUES!r}"
    )
