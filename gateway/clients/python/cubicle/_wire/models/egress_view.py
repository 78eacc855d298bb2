from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.egress_view_policy import EgressViewPolicy


T = TypeVar("T", bound="EgressView")


@_attrs_define
class EgressView:
    """`GET /v1/workspaces/{id}/egress`.

    Attributes:
        is_default (bool): True when none was set and the server's default applies.
        policy (EgressViewPolicy): What a workspace may reach. Default: nothing.

            Allow rules: `example.org` (ports 80 and 443), `*.example.org:443`
            (names below it), `api.example.org:8000-8100,9000`,
            `203.0.113.0/24:*`, `127.0.0.1/32:8443`, `[fd00::/8]:443`. Loopback,
            private, link-local (cloud metadata), CGNAT, unique-local, multicast and
            IPv4-mapped addresses are refused after resolution unless a network
            rule inside that range names them.
        workspace (str):
    """

    is_default: bool
    policy: EgressViewPolicy
    workspace: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        is_default = self.is_default

        policy = self.policy.to_dict()

        workspace = self.workspace

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "is_default": is_default,
                "policy": policy,
                "workspace": workspace,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.egress_view_policy import EgressViewPolicy

        d = dict(src_dict)
        is_default = d.pop("is_default")

        policy = EgressViewPolicy.from_dict(d.pop("policy"))

        workspace = d.pop("workspace")

        egress_view = cls(
            is_default=is_default,
            policy=policy,
            workspace=workspace,
        )

        egress_view.additional_properties = d
        return egress_view

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
