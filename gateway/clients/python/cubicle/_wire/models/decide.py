from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..models.scope import Scope, check_scope
from ..types import UNSET, Unset

T = TypeVar("T", bound="Decide")


@_attrs_define
class Decide:
    """Body of `POST /v1/approvals/{id}/approve` and `.../deny` (may be empty).

    Attributes:
        reason (None | str | Unset): Why: shown to the agent (on a deny) and kept in the event log; at
            most 1000 characters, no control characters but line breaks.
        scope (None | Scope | Unset):
    """

    reason: None | str | Unset = UNSET
    scope: None | Scope | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        reason: None | str | Unset
        if isinstance(self.reason, Unset):
            reason = UNSET
        else:
            reason = self.reason

        scope: None | str | Unset
        if isinstance(self.scope, Unset):
            scope = UNSET
        elif isinstance(self.scope, str):
            scope = self.scope
        else:
            scope = self.scope

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if reason is not UNSET:
            field_dict["reason"] = reason
        if scope is not UNSET:
            field_dict["scope"] = scope

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)

        def _parse_reason(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        reason = _parse_reason(d.pop("reason", UNSET))

        def _parse_scope(data: object) -> None | Scope | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                scope_type_1 = check_scope(data)

                return scope_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Scope | Unset, data)

        scope = _parse_scope(d.pop("scope", UNSET))

        decide = cls(
            reason=reason,
            scope=scope,
        )

        return decide
