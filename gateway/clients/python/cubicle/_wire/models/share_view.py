from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="ShareView")


@_attrs_define
class ShareView:
    """A share link as the API shows it (the secret only once, at its making).

    Attributes:
        created_at_ms (int):
        expires_at_ms (int):
        id (str):
        mode (str): `view` or `control`.
        state (str): `live`, `expired` or `revoked`.
        workspace (str):
        revoked_at_ms (int | None | Unset):
        url (None | str | Unset): The link to send (make only): `/share#<secret>`, to be opened on
            this gateway's address.
    """

    created_at_ms: int
    expires_at_ms: int
    id: str
    mode: str
    state: str
    workspace: str
    revoked_at_ms: int | None | Unset = UNSET
    url: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        created_at_ms = self.created_at_ms

        expires_at_ms = self.expires_at_ms

        id = self.id

        mode = self.mode

        state = self.state

        workspace = self.workspace

        revoked_at_ms: int | None | Unset
        if isinstance(self.revoked_at_ms, Unset):
            revoked_at_ms = UNSET
        else:
            revoked_at_ms = self.revoked_at_ms

        url: None | str | Unset
        if isinstance(self.url, Unset):
            url = UNSET
        else:
            url = self.url

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "created_at_ms": created_at_ms,
                "expires_at_ms": expires_at_ms,
                "id": id,
                "mode": mode,
                "state": state,
                "workspace": workspace,
            }
        )
        if revoked_at_ms is not UNSET:
            field_dict["revoked_at_ms"] = revoked_at_ms
        if url is not UNSET:
            field_dict["url"] = url

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        created_at_ms = d.pop("created_at_ms")

        expires_at_ms = d.pop("expires_at_ms")

        id = d.pop("id")

        mode = d.pop("mode")

        state = d.pop("state")

        workspace = d.pop("workspace")

        def _parse_revoked_at_ms(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        revoked_at_ms = _parse_revoked_at_ms(d.pop("revoked_at_ms", UNSET))

        def _parse_url(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        url = _parse_url(d.pop("url", UNSET))

        share_view = cls(
            created_at_ms=created_at_ms,
            expires_at_ms=expires_at_ms,
            id=id,
            mode=mode,
            state=state,
            workspace=workspace,
            revoked_at_ms=revoked_at_ms,
            url=url,
        )

        share_view.additional_properties = d
        return share_view

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
