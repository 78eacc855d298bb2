from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="BindSecret")


@_attrs_define
class BindSecret:
    """Gives a stored secret to a workspace: it gets a placeholder, in an
    environment variable of its commands, a file, both or neither (the
    answer shows it).

        Attributes:
            secret (str): The secret's id (`sec-…`). Example: sec-0123456789ab.
            env (None | str | Unset): Set to the placeholder in every command run through exec
                (`[A-Za-z_][A-Za-z0-9_]*`). Example: GITHUB_TOKEN.
            path (None | str | Unset): A file written with the placeholder (mode 0600, as the desktop user),
                through the files API and its policy. Example: /home/user/.config/github-token.
    """

    secret: str
    env: None | str | Unset = UNSET
    path: None | str | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
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

        field_dict.update(
            {
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

        bind_secret = cls(
            secret=secret,
            env=env,
            path=path,
        )

        return bind_secret
