from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define

T = TypeVar("T", bound="Handoff")


@_attrs_define
class Handoff:
    """Body of `POST /v1/workspaces/{id}/handoff`.

    Attributes:
        reason (str): What a person should do, in words they read (1 to 1000 characters,
            no control characters but line breaks): shown in the page until an
            operator takes over.
    """

    reason: str

    def to_dict(self) -> dict[str, Any]:
        reason = self.reason

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "reason": reason,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        reason = d.pop("reason")

        handoff = cls(
            reason=reason,
        )

        return handoff
