from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="WorkspaceViewLimits")


@_attrs_define
class WorkspaceViewLimits:
    """A workspace's limits on the wire (create and view).

    Attributes:
        cpu_weight (int | None | Unset): CPU weight against other workspaces (default 100).
        cpus (float | None | Unset): CPU quota in CPUs (default 2.0).
        disk_mb (int | None | Unset): Disk for home and /tmp in MiB (default 4096).
        memory_mb (int | None | Unset): Memory in MiB (default 2048), up to the server's maximum.
        pids (int | None | Unset): Processes and threads (default 4096).
    """

    cpu_weight: int | None | Unset = UNSET
    cpus: float | None | Unset = UNSET
    disk_mb: int | None | Unset = UNSET
    memory_mb: int | None | Unset = UNSET
    pids: int | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        cpu_weight: int | None | Unset
        if isinstance(self.cpu_weight, Unset):
            cpu_weight = UNSET
        else:
            cpu_weight = self.cpu_weight

        cpus: float | None | Unset
        if isinstance(self.cpus, Unset):
            cpus = UNSET
        else:
            cpus = self.cpus

        disk_mb: int | None | Unset
        if isinstance(self.disk_mb, Unset):
            disk_mb = UNSET
        else:
            disk_mb = self.disk_mb

        memory_mb: int | None | Unset
        if isinstance(self.memory_mb, Unset):
            memory_mb = UNSET
        else:
            memory_mb = self.memory_mb

        pids: int | None | Unset
        if isinstance(self.pids, Unset):
            pids = UNSET
        else:
            pids = self.pids

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if cpu_weight is not UNSET:
            field_dict["cpu_weight"] = cpu_weight
        if cpus is not UNSET:
            field_dict["cpus"] = cpus
        if disk_mb is not UNSET:
            field_dict["disk_mb"] = disk_mb
        if memory_mb is not UNSET:
            field_dict["memory_mb"] = memory_mb
        if pids is not UNSET:
            field_dict["pids"] = pids

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)

        def _parse_cpu_weight(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        cpu_weight = _parse_cpu_weight(d.pop("cpu_weight", UNSET))

        def _parse_cpus(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        cpus = _parse_cpus(d.pop("cpus", UNSET))

        def _parse_disk_mb(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        disk_mb = _parse_disk_mb(d.pop("disk_mb", UNSET))

        def _parse_memory_mb(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        memory_mb = _parse_memory_mb(d.pop("memory_mb", UNSET))

        def _parse_pids(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        pids = _parse_pids(d.pop("pids", UNSET))

        workspace_view_limits = cls(
            cpu_weight=cpu_weight,
            cpus=cpus,
            disk_mb=disk_mb,
            memory_mb=memory_mb,
            pids=pids,
        )

        return workspace_view_limits
