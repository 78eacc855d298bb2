from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

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
        body (bool | Unset): Also put the value in place of the placeholder in request bodies to
            these hosts, not only in headers (default false: headers only). The
            proxy then reads such bodies up to 1 MiB; a longer one, or one with
            a `Content-Encoding`, is sent as it came. The value goes in as it
            is, not escaped for JSON or a form. Default: False.
    """

    hosts: list[str]
    name: str
    value: str
    body: bool | Unset = False

    def to_dict(self) -> dict[str, Any]:
        hosts = self.hosts

        name = self.name

        value = self.value

        body = self.body

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "hosts": hosts,
                "name": name,
                "value": value,
            }
        )
        if body is not UNSET:
            field_dict["body"] = body

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        hosts = cast(list[str], d.pop("hosts"))

        name = d.pop("name")

        value = d.pop("value")

        body = d.pop("body", UNSET)

        new_secret = cls(
            hosts=hosts,
            name=name,
            value=value,
            body=body,
        )

        return new_secret
