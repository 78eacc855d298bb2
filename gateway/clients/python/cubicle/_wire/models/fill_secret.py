from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="FillSecret")


@_attrs_define
class FillSecret:
    """Fills a secret the workspace was given into a field of the page on
    screen, without the caller seeing it (`fill_secret`).

        Attributes:
            secret (str): The secret's id (`sec-…`), or the placeholder the workspace holds. Example: sec-0123456789ab.
            selector (None | str | Unset): A CSS selector of the field in the page on screen; without it, the
                focused field. It must be a password field or an input marked with
                an `autocomplete` token (`username`, `one-time-code`, ...). Example: #password.
    """

    secret: str
    selector: None | str | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        secret = self.secret

        selector: None | str | Unset
        if isinstance(self.selector, Unset):
            selector = UNSET
        else:
            selector = self.selector

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "secret": secret,
            }
        )
        if selector is not UNSET:
            field_dict["selector"] = selector

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        secret = d.pop("secret")

        def _parse_selector(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        selector = _parse_selector(d.pop("selector", UNSET))

        fill_secret = cls(
            secret=secret,
            selector=selector,
        )

        return fill_secret
