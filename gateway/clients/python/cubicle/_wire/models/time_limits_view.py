from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.on_expiry_body import OnExpiryBody, check_on_expiry_body
from ..types import UNSET, Unset

T = TypeVar("T", bound="TimeLimitsView")


@_attrs_define
class TimeLimitsView:
    """The time limits a workspace runs under: null where it has none.

    Attributes:
        on_expiry (OnExpiryBody): What expiry does.
        idle_seconds (int | None | Unset):
        ttl_seconds (int | None | Unset):
    """

    on_expiry: OnExpiryBody
    idle_seconds: int | None | Unset = UNSET
    ttl_seconds: int | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        on_expiry: str = self.on_expiry

        idle_seconds: int | None | Unset
        if isinstance(self.idle_seconds, Unset):
            idle_seconds = UNSET
        else:
            idle_seconds = self.idle_seconds

        ttl_seconds: int | None | Unset
        if isinstance(self.ttl_seconds, Unset):
            ttl_seconds = UNSET
        else:
            ttl_seconds = self.ttl_seconds

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "on_expiry": on_expiry,
            }
        )
        if idle_seconds is not UNSET:
            field_dict["idle_seconds"] = idle_seconds
        if ttl_seconds is not UNSET:
            field_dict["ttl_seconds"] = ttl_seconds

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        on_expiry = check_on_expiry_body(d.pop("on_expiry"))

        def _parse_idle_seconds(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        idle_seconds = _parse_idle_seconds(d.pop("idle_seconds", UNSET))

        def _parse_ttl_seconds(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        ttl_seconds = _parse_ttl_seconds(d.pop("ttl_seconds", UNSET))

        time_limits_view = cls(
            on_expiry=on_expiry,
            idle_seconds=idle_seconds,
            ttl_seconds=ttl_seconds,
        )

        time_limits_view.additional_properties = d
        return time_limits_view

    @property
    def additional_keys(self) -> list[str]:
        return list(self.additional_properties.keys())

    def __getitem__(self, key: str) -> Any:
        return self.additional_properties[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.additional_properties[key] = value

    def __delitem__(self, key: str) -> None:
        del self.additional_properties[key]

    def __contains__(self, key: str) -> bool:
        return key in self.additional_properties
