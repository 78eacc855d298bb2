from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..models.role_name import RoleName, check_role_name
from ..types import UNSET, Unset

T = TypeVar("T", bound="NewToken")


@_attrs_define
class NewToken:
    """A token to make; its secret is in the answer and nowhere else.

    Attributes:
        name (str): 1..=128 characters, no control characters.
        role (RoleName): A token's role.
        scope (list[str] | None | str | Unset): Workspaces it reaches besides the ones it creates: `"all"` or a list
            of ids. Default: agents their own only; other roles every workspace.
    """

    name: str
    role: RoleName
    scope: list[str] | None | str | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        name = self.name

        role: str = self.role

        scope: list[str] | None | str | Unset
        if isinstance(self.scope, Unset):
            scope = UNSET
        elif isinstance(self.scope, list):
            scope = self.scope

        else:
            scope = self.scope

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "name": name,
                "role": role,
            }
        )
        if scope is not UNSET:
            field_dict["scope"] = scope

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        name = d.pop("name")

        role = check_role_name(d.pop("role"))

        def _parse_scope(data: object) -> list[str] | None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, list):
                    raise TypeError()
                scope_type_1_type_1 = cast(list[str], data)

                return scope_type_1_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(list[str] | None | str | Unset, data)

        scope = _parse_scope(d.pop("scope", UNSET))

        new_token = cls(
            name=name,
            role=role,
            scope=scope,
        )

        return new_token
