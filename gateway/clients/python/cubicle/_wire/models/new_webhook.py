from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="NewWebhook")


@_attrs_define
class NewWebhook:
    """A subscription to make.

    Attributes:
        kinds (list[str]): Event kinds to deliver: a kind (`approval.request`), a family
            (`workspace.*`) or `*`; `webhook.*` never.
        url (str): Where deliveries are POSTed: http or https. By default its host must
            resolve to public addresses only. Example: https://example.com/hooks/cubicle.
        secret (None | str | Unset): `whsec_` + base64 of 24..=64 bytes, signing every delivery (Standard
            Webhooks). Default: one is made and shown in the answer, this once.
        workspace (None | str | Unset): Only this workspace's events. Default: every workspace the token sees.
    """

    kinds: list[str]
    url: str
    secret: None | str | Unset = UNSET
    workspace: None | str | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        kinds = self.kinds

        url = self.url

        secret: None | str | Unset
        if isinstance(self.secret, Unset):
            secret = UNSET
        else:
            secret = self.secret

        workspace: None | str | Unset
        if isinstance(self.workspace, Unset):
            workspace = UNSET
        else:
            workspace = self.workspace

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "kinds": kinds,
                "url": url,
            }
        )
        if secret is not UNSET:
            field_dict["secret"] = secret
        if workspace is not UNSET:
            field_dict["workspace"] = workspace

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        kinds = cast(list[str], d.pop("kinds"))

        url = d.pop("url")

        def _parse_secret(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        secret = _parse_secret(d.pop("secret", UNSET))

        def _parse_workspace(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        workspace = _parse_workspace(d.pop("workspace", UNSET))

        new_webhook = cls(
            kinds=kinds,
            url=url,
            secret=secret,
            workspace=workspace,
        )

        return new_webhook
