from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="Uploaded")


@_attrs_define
class Uploaded:
    """What was handed to the page.

    Attributes:
        name (str): The file's name as the page sees it.
        origin (str):
        sha256 (str):
        size (int):
        sniffed_type (str): The type sniffed from the bytes.
        url (str): The page's URL and origin when it got the file.
    """

    name: str
    origin: str
    sha256: str
    size: int
    sniffed_type: str
    url: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        name = self.name

        origin = self.origin

        sha256 = self.sha256

        size = self.size

        sniffed_type = self.sniffed_type

        url = self.url

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "name": name,
                "origin": origin,
                "sha256": sha256,
                "size": size,
                "sniffed_type": sniffed_type,
                "url": url,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        name = d.pop("name")

        origin = d.pop("origin")

        sha256 = d.pop("sha256")

        size = d.pop("size")

        sniffed_type = d.pop("sniffed_type")

        url = d.pop("url")

        uploaded = cls(
            name=name,
            origin=origin,
            sha256=sha256,
            size=size,
            sniffed_type=sniffed_type,
            url=url,
        )

        uploaded.additional_properties = d
        return uploaded

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
