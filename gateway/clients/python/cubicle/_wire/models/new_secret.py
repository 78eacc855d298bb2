from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define

T = TypeVar("T", bound="NewSecret")


@_attrs_define
class NewSecret:
    """A secret to store. Its value is never shown again.

    Attributes:
        hosts (list[str]): The host names it may go to, exactly (no wildcards, no addresses):
            only requests to these, over TLS the proxy intercepts, get the value. Example: ['api.github.com'].
        name (str): A name for people: 1..=64 bytes, no control characters. Example: github.
        value (str): What the proxy sends in place of the placeholder: printable ASCII
            (it goes into HTTP headers), at most 8 KiB.
    """

    hosts: list[str]
    name: str
    value: str

    def to_dict(self) -> dict[str, Any]:
        hosts = self.hosts

        name = self.name

        value = self.value

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "hosts": hosts,
                "name": name,
                "value": value,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        hosts = cast(list[str], d.pop("hosts"))

        name = d.pop("name")

        value = d.pop("value")

        new_secret = cls(
            hosts=hosts,
            name=name,
            value=value,
        )

        return new_secret
