from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="ProfileView")


@_attrs_define
class ProfileView:
    """A profile as the API shows it.

    Attributes:
        created_at_ms (int):
        id (str):
        name (str):
        owner_token (str): The token that made it.
        size (int): The kept archive's bytes (gzip'd tar); 0 until first saved.
        running_in (None | str | Unset): The running workspace using it now, if any.
        saved_at_ms (int | None | Unset):
        sha256 (None | str | Unset): The kept archive's SHA-256; null until first saved.
    """

    created_at_ms: int
    id: str
    name: str
    owner_token: str
    size: int
    running_in: None | str | Unset = UNSET
    saved_at_ms: int | None | Unset = UNSET
    sha256: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        created_at_ms = self.created_at_ms

        id = self.id

        name = self.name

        owner_token = self.owner_token

        size = self.size

        running_in: None | str | Unset
        if isinstance(self.running_in, Unset):
            running_in = UNSET
        else:
            running_in = self.running_in

        saved_at_ms: int | None | Unset
        if isinstance(self.saved_at_ms, Unset):
            saved_at_ms = UNSET
        else:
            saved_at_ms = self.saved_at_ms

        sha256: None | str | Unset
        if isinstance(self.sha256, Unset):
            sha256 = UNSET
        else:
            sha256 = self.sha256

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "created_at_ms": created_at_ms,
                "id": id,
                "name": name,
                "owner_token": owner_token,
                "size": size,
            }
        )
        if running_in is not UNSET:
            field_dict["running_in"] = running_in
        if saved_at_ms is not UNSET:
            field_dict["saved_at_ms"] = saved_at_ms
        if sha256 is not UNSET:
            field_dict["sha256"] = sha256

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        created_at_ms = d.pop("created_at_ms")

        id = d.pop("id")

        name = d.pop("name")

        owner_token = d.pop("owner_token")

        size = d.pop("size")

        def _parse_running_in(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        running_in = _parse_running_in(d.pop("running_in", UNSET))

        def _parse_saved_at_ms(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        saved_at_ms = _parse_saved_at_ms(d.pop("saved_at_ms", UNSET))

        def _parse_sha256(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        sha256 = _parse_sha256(d.pop("sha256", UNSET))

        profile_view = cls(
            created_at_ms=created_at_ms,
            id=id,
            name=name,
            owner_token=owner_token,
            size=size,
            running_in=running_in,
            saved_at_ms=saved_at_ms,
            sha256=sha256,
        )

        profile_view.additional_properties = d
        return profile_view

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
