from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define

T = TypeVar("T", bound="ClipboardText")


@_attrs_define
class ClipboardText:
    """The desktop's clipboard as UTF-8 text: the body of `PUT
    .../clipboard` and the answer of `GET`.

        Attributes:
            text (str): At most 1 MiB (in UTF-8).
    """

    text: str

    def to_dict(self) -> dict[str, Any]:
        text = self.text

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "text": text,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        text = d.pop("text")

        clipboard_text = cls(
            text=text,
        )

        return clipboard_text
