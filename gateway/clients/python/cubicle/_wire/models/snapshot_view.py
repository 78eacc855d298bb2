from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.machine_view import MachineView


T = TypeVar("T", bound="SnapshotView")


@_attrs_define
class SnapshotView:
    """A snapshot as the API shows it.

    Attributes:
        backend (str):
        created_at_ms (int):
        home_sha256 (str):
        home_size (int): The archive of `/home/user` and `/tmp` (gzip'd tar): bytes, SHA-256.
        id (str):
        kind (str): `memory`: a microVM's whole machine (a fork goes on from the
            instant it was taken); `disk`: the user's files and the browser
            profile, no memory (a fork starts its programs afresh).
        name (str):
        owner_token (str): The token that made it.
        profile_sha256 (str):
        profile_size (int): The browser profile's archive: bytes, SHA-256.
        sha256 (str): SHA-256 naming its parts; every fork's audit chain records it.
        workspace_id (str): The workspace it was taken of (it may be gone since).
        machine (MachineView | None | Unset):
    """

    backend: str
    created_at_ms: int
    home_sha256: str
    home_size: int
    id: str
    kind: str
    name: str
    owner_token: str
    profile_sha256: str
    profile_size: int
    sha256: str
    workspace_id: str
    machine: MachineView | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.machine_view import MachineView

        backend = self.backend

        created_at_ms = self.created_at_ms

        home_sha256 = self.home_sha256

        home_size = self.home_size

        id = self.id

        kind = self.kind

        name = self.name

        owner_token = self.owner_token

        profile_sha256 = self.profile_sha256

        profile_size = self.profile_size

        sha256 = self.sha256

        workspace_id = self.workspace_id

        machine: dict[str, Any] | None | Unset
        if isinstance(self.machine, Unset):
            machine = UNSET
        elif isinstance(self.machine, MachineView):
            machine = self.machine.to_dict()
        else:
            machine = self.machine

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "backend": backend,
                "created_at_ms": created_at_ms,
                "home_sha256": home_sha256,
                "home_size": home_size,
                "id": id,
                "kind": kind,
                "name": name,
                "owner_token": owner_token,
                "profile_sha256": profile_sha256,
                "profile_size": profile_size,
                "sha256": sha256,
                "workspace_id": workspace_id,
            }
        )
        if machine is not UNSET:
            field_dict["machine"] = machine

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.machine_view import MachineView

        d = dict(src_dict)
        backend = d.pop("backend")

        created_at_ms = d.pop("created_at_ms")

        home_sha256 = d.pop("home_sha256")

        home_size = d.pop("home_size")

        id = d.pop("id")

        kind = d.pop("kind")

        name = d.pop("name")

        owner_token = d.pop("owner_token")

        profile_sha256 = d.pop("profile_sha256")

        profile_size = d.pop("profile_size")

        sha256 = d.pop("sha256")

        workspace_id = d.pop("workspace_id")

        def _parse_machine(data: object) -> MachineView | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                machine_type_1 = MachineView.from_dict(data)

                return machine_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(MachineView | None | Unset, data)

        machine = _parse_machine(d.pop("machine", UNSET))

        snapshot_view = cls(
            backend=backend,
            created_at_ms=created_at_ms,
            home_sha256=home_sha256,
            home_size=home_size,
            id=id,
            kind=kind,
            name=name,
            owner_token=owner_token,
            profile_sha256=profile_sha256,
            profile_size=profile_size,
            sha256=sha256,
            workspace_id=workspace_id,
            machine=machine,
        )

        snapshot_view.additional_properties = d
        return snapshot_view

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
