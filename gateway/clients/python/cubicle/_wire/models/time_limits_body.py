from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..models.on_expiry_body import OnExpiryBody, check_on_expiry_body
from ..types import UNSET, Unset

T = TypeVar("T", bound="TimeLimitsBody")


@_attrs_define
class TimeLimitsBody:
    """`"time_limits"` of a create body; each field left out takes the
    server's default (`--ttl-seconds`, `--idle-timeout-seconds`,
    `--on-expiry`; none by default).

        Attributes:
            idle_seconds (int | None | Unset): Expire after this many seconds with no agent, operator or viewer
                activity (an open live view counts as activity); 0: no limit.
            on_expiry (None | OnExpiryBody | Unset):
            ttl_seconds (int | None | Unset): Longest it may run after each start, in seconds; 0: no limit.
    """

    idle_seconds: int | None | Unset = UNSET
    on_expiry: None | OnExpiryBody | Unset = UNSET
    ttl_seconds: int | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        idle_seconds: int | None | Unset
        if isinstance(self.idle_seconds, Unset):
            idle_seconds = UNSET
        else:
            idle_seconds = self.idle_seconds

        on_expiry: None | str | Unset
        if isinstance(self.on_expiry, Unset):
            on_expiry = UNSET
        elif isinstance(self.on_expiry, str):
            on_expiry = self.on_expiry
        else:
            on_expiry = self.on_expiry

        ttl_seconds: int | None | Unset
        if isinstance(self.ttl_seconds, Unset):
            ttl_seconds = UNSET
        else:
            ttl_seconds = self.ttl_seconds

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if idle_seconds is not UNSET:
            field_dict["idle_seconds"] = idle_seconds
        if on_expiry is not UNSET:
            field_dict["on_expiry"] = on_expiry
        if ttl_seconds is not UNSET:
            field_dict["ttl_seconds"] = ttl_seconds

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)

        def _parse_idle_seconds(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        idle_seconds = _parse_idle_seconds(d.pop("idle_seconds", UNSET))

        def _parse_on_expiry(data: object) -> None | OnExpiryBody | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                on_expiry_type_1 = check_on_expiry_body(data)

                return on_expiry_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | OnExpiryBody | Unset, data)

        on_expiry = _parse_on_expiry(d.pop("on_expiry", UNSET))

        def _parse_ttl_seconds(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        ttl_seconds = _parse_ttl_seconds(d.pop("ttl_seconds", UNSET))

        time_limits_body = cls(
            idle_seconds=idle_seconds,
            on_expiry=on_expiry,
            ttl_seconds=ttl_seconds,
        )

        return time_limits_body
