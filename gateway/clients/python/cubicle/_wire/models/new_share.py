from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..models.share_mode import ShareMode, check_share_mode
from ..types import UNSET, Unset

T = TypeVar("T", bound="NewShare")


@_attrs_define
class NewShare:
    """A share link to make.

    Attributes:
        mode (ShareMode): What a share link lets its person do.
        expires_in_s (int | None | Unset): Seconds until it stops working by itself: 60..=604800, 3600 by
            default.
    """

    mode: ShareMode
    expires_in_s: int | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        mode: str = self.mode

        expires_in_s: int | None | Unset
        if isinstance(self.expires_in_s, Unset):
            expires_in_s = UNSET
        else:
            expires_in_s = self.expires_in_s

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "mode": mode,
            }
        )
        if expires_in_s is not UNSET:
            field_dict["expires_in_s"] = expires_in_s

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        mode = check_share_mode(d.pop("mode"))

        def _parse_expires_in_s(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        expires_in_s = _parse_expires_in_s(d.pop("expires_in_s", UNSET))

        new_share = cls(
            mode=mode,
            expires_in_s=expires_in_s,
        )

        return new_share
