from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="MachineView")


@_attrs_define
class MachineView:
    """The parts of a `memory` snapshot, each named by its SHA-256.

    Attributes:
        disk_bytes (int): Bytes the guest had written to its root disk.
        disk_sha256 (str):
        host_disk_sha256 (str):
        memory_bytes (int): Bytes of it the guest had written (what the memory file holds).
        memory_sha256 (str):
        memory_size (int): The guest's RAM, bytes: a fork runs with exactly this much.
        state_sha256 (str): The VMM's state file (vCPUs, devices, interrupt controllers).
    """

    disk_bytes: int
    disk_sha256: str
    host_disk_sha256: str
    memory_bytes: int
    memory_sha256: str
    memory_size: int
    state_sha256: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        disk_bytes = self.disk_bytes

        disk_sha256 = self.disk_sha256

        host_disk_sha256 = self.host_disk_sha256

        memory_bytes = self.memory_bytes

        memory_sha256 = self.memory_sha256

        memory_size = self.memory_size

        state_sha256 = self.state_sha256

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "disk_bytes": disk_bytes,
                "disk_sha256": disk_sha256,
                "host_disk_sha256": host_disk_sha256,
                "memory_bytes": memory_bytes,
                "memory_sha256": memory_sha256,
                "memory_size": memory_size,
                "state_sha256": state_sha256,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        disk_bytes = d.pop("disk_bytes")

        disk_sha256 = d.pop("disk_sha256")

        host_disk_sha256 = d.pop("host_disk_sha256")

        memory_bytes = d.pop("memory_bytes")

        memory_sha256 = d.pop("memory_sha256")

        memory_size = d.pop("memory_size")

        state_sha256 = d.pop("state_sha256")

        machine_view = cls(
            disk_bytes=disk_bytes,
            disk_sha256=disk_sha256,
            host_disk_sha256=host_disk_sha256,
            memory_bytes=memory_bytes,
            memory_sha256=memory_sha256,
            memory_size=memory_size,
            state_sha256=state_sha256,
        )

        machine_view.additional_properties = d
        return machine_view

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
