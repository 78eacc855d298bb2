from typing import Literal

DownloadStateFilter = Literal["held", "rejected", "released"]

DOWNLOAD_STATE_FILTER_VALUES: set[DownloadStateFilter] = {
    "held",
    "rejected",
    "released",
}


def check_download_state_filter(value: str) -> DownloadStateFilter:
    if value in DOWNLOAD_STATE_FILTER_VALUES:
        return value
    raise TypeError(
        f"Unexpected value {value!r}. Expected one of {DOWNLOAD_STATE_FILTER_VALUES!r}"
    )
