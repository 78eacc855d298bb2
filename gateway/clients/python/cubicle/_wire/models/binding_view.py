from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="BindingView")


@_attrs_define
class BindingView:
    """A secret given to a workspace, as the API shows it.

    Attributes:
        body (bool): Whether the value goes into request bodies too (else headers only).
        created_at_ms (int):
        hosts (list[str]):
        name (str):
        placeholder (str): What the workspace holds instead of the value. Example:
            cubicle_secret_0123456789abcdef0123456789abcdef.
        secret (str):
        env (None | str | Unset): The variable set to it in every command run through exec.
        path (None | str | Unset): The file it was written to.
    """

    body: bool
    created_at_ms: int
    hosts: list[str]
    name: str
    placeholder: str
    secret: str
    env: None | str | Unset = UNSET
    path: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        body = self.body

        created_at_ms = self.created_at_ms

        hosts = self.hosts

        name = self.name

        placeholder = self.placeholder

        secret = self.secret

        env: None | str | Unset
        if isinstance(self.env, Unset):
            env = UNSET
        else:
            env = self.env

        path: None | str | Unset
        if isinstance(self.path, Unset):
            path = UNSET
        else:
            path = self.path

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "body": body,
                "created_at_ms": created_at_ms,
                "hosts": hosts,
                "name": name,
                "placeholder": placeholder,
                "secret": secret,
            }
        )
        if env is not UNSET:
            field_dict["env"] = env
        if path is not UNSET:
            field_dict["path"] = path

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        body = d.pop("body")

        created_at_ms = d.pop("created_at_ms")

        hosts = cast(list[str], d.pop("hosts"))

        name = d.pop("name")

        placeholder = d.pop("placeholder")

        secret = d.pop("secret")

        def _parse_env(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        env = _parse_env(d.pop("env", UNSET))

        def _parse_path(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        path = _parse_path(d.pop("path", UNSET))

        binding_view = cls(
            body=body,
            created_at_ms=created_at_ms,
            hosts=hosts,
            name=name,
            placeholder=placeholder,
            secret=secret,
            env=env,
            path=path,
        )

        binding_view.additional_properties = d
        return binding_view

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
