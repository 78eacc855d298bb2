from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.webhook_view_last_type_0 import WebhookViewLastType0


T = TypeVar("T", bound="WebhookView")


@_attrs_define
class WebhookView:
    """A subscription as the API shows it (never its secret).

    Attributes:
        created_at_ms (int):
        cursor (int): The id of the last event dealt with.
        id (str):
        kinds (list[str]):
        owner_token (str): The token that made it: the events it may see are the ones delivered.
        url (str):
        last (None | Unset | WebhookViewLastType0): The last delivery's outcome: `{event, kind, attempt, ok, status?,
            error?, at_ms}`.
        workspace (None | str | Unset): Only this workspace's events; `null`: every workspace the token sees.
    """

    created_at_ms: int
    cursor: int
    id: str
    kinds: list[str]
    owner_token: str
    url: str
    last: None | Unset | WebhookViewLastType0 = UNSET
    workspace: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.webhook_view_last_type_0 import WebhookViewLastType0

        created_at_ms = self.created_at_ms

        cursor = self.cursor

        id = self.id

        kinds = self.kinds

        owner_token = self.owner_token

        url = self.url

        last: dict[str, Any] | None | Unset
        if isinstance(self.last, Unset):
            last = UNSET
        elif isinstance(self.last, WebhookViewLastType0):
            last = self.last.to_dict()
        else:
            last = self.last

        workspace: None | str | Unset
        if isinstance(self.workspace, Unset):
            workspace = UNSET
        else:
            workspace = self.workspace

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "created_at_ms": created_at_ms,
                "cursor": cursor,
                "id": id,
                "kinds": kinds,
                "owner_token": owner_token,
                "url": url,
            }
        )
        if last is not UNSET:
            field_dict["last"] = last
        if workspace is not UNSET:
            field_dict["workspace"] = workspace

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.webhook_view_last_type_0 import WebhookViewLastType0

        d = dict(src_dict)
        created_at_ms = d.pop("created_at_ms")

        cursor = d.pop("cursor")

        id = d.pop("id")

        kinds = cast(list[str], d.pop("kinds"))

        owner_token = d.pop("owner_token")

        url = d.pop("url")

        def _parse_last(data: object) -> None | Unset | WebhookViewLastType0:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                last_type_0 = WebhookViewLastType0.from_dict(data)

                return last_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Unset | WebhookViewLastType0, data)

        last = _parse_last(d.pop("last", UNSET))

        def _parse_workspace(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        workspace = _parse_workspace(d.pop("workspace", UNSET))

        webhook_view = cls(
            created_at_ms=created_at_ms,
            cursor=cursor,
            id=id,
            kinds=kinds,
            owner_token=owner_token,
            url=url,
            last=last,
            workspace=workspace,
        )

        webhook_view.additional_properties = d
        return webhook_view

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
