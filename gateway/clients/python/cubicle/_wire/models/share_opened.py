from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="ShareOpened")


@_attrs_define
class ShareOpened:
    """What the share page learns when it opens: the workspace and what it may
    do there.

        Attributes:
            expires_at_ms (int):
            mode (str):
            workspace (str):
    """

    expires_at_ms: int
    mode: str
    workspace: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        expires_at_ms = self.expires_at_ms

        mode = self.mode

        workspace = self.workspace

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "expires_at_ms": expires_at_ms,
                "mode": mode,
                "workspace": workspace,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        expires_at_ms = d.pop("expires_at_ms")

        mode = d.pop("mode")

        workspace = d.pop("workspace")

        share_opened = cls(
            expires_at_ms=expires_at_ms,
            mode=mode,
            workspace=workspace,
        )

        share_opened.additional_properties = d
        return share_opened

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
