from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="SecretView")


@_attrs_define
class SecretView:
    """A secret as the API shows it: never its value.

    Attributes:
        body (bool): Whether the value goes into request bodies too (else headers only).
        created_at_ms (int):
        hosts (list[str]): The host names it may go to.
        id (str):
        name (str):
        owner_token (str): The token that stored it.
    """

    body: bool
    created_at_ms: int
    hosts: list[str]
    id: str
    name: str
    owner_token: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        body = self.body

        created_at_ms = self.created_at_ms

        hosts = self.hosts

        id = self.id

        name = self.name

        owner_token = self.owner_token

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "body": body,
                "created_at_ms": created_at_ms,
                "hosts": hosts,
                "id": id,
                "name": name,
                "owner_token": owner_token,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        body = d.pop("body")

        created_at_ms = d.pop("created_at_ms")

        hosts = cast(list[str], d.pop("hosts"))

        id = d.pop("id")

        name = d.pop("name")

        owner_token = d.pop("owner_token")

        secret_view = cls(
            body=body,
            created_at_ms=created_at_ms,
            hosts=hosts,
            id=id,
            name=name,
            owner_token=owner_token,
        )

        secret_view.additional_properties = d
        return secret_view

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
