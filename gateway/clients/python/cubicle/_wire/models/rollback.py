from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define

T = TypeVar("T", bound="Rollback")


@_attrs_define
class Rollback:
    """The snapshot to roll a workspace back to.

    Attributes:
        snapshot (str): A snapshot id of the caller's.
    """

    snapshot: str

    def to_dict(self) -> dict[str, Any]:
        snapshot = self.snapshot

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "snapshot": snapshot,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        snapshot = d.pop("snapshot")

        rollback = cls(
            snapshot=snapshot,
        )

        return rollback
