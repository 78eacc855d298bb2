from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="Filled")


@_attrs_define
class Filled:
    """What was filled (never the value).

    Attributes:
        field (str): `password`, or `autocomplete:<token>` for another marked field
            (shown masked, as a password field is). Example: password.
        host (str):
        secret (str): The secret's id.
        url (str): The page's URL at the moment of filling.
    """

    field: str
    host: str
    secret: str
    url: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        field = self.field

        host = self.host

        secret = self.secret

        url = self.url

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "field": field,
                "host": host,
                "secret": secret,
                "url": url,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        field = d.pop("field")

        host = d.pop("host")

        secret = d.pop("secret")

        url = d.pop("url")

        filled = cls(
            field=field,
            host=host,
            secret=secret,
            url=url,
        )

        filled.additional_properties = d
        return filled

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
