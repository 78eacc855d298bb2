from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define

T = TypeVar("T", bound="SetPolicy")


@_attrs_define
class SetPolicy:
    """Body of `PUT /v1/workspaces/{id}/policy`.

    Attributes:
        policy (str): A policy name the server loaded (see `GET .../policy`).
    """

    policy: str

    def to_dict(self) -> dict[str, Any]:
        policy = self.policy

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "policy": policy,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        policy = d.pop("policy")

        set_policy = cls(
            policy=policy,
        )

        return set_policy
