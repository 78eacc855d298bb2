from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.egress_body import EgressBody
    from ..models.time_limits_view import TimeLimitsView
    from ..models.workspace_view_call_type_0 import WorkspaceViewCallType0
    from ..models.workspace_view_geometry_type_0 import WorkspaceViewGeometryType0
    from ..models.workspace_view_limits import WorkspaceViewLimits
    from ..models.workspace_view_links import WorkspaceViewLinks
    from ..models.workspace_view_usage_type_0 import WorkspaceViewUsageType0


T = TypeVar("T", bound="WorkspaceView")


@_attrs_define
class WorkspaceView:
    """A workspace as the API shows it.

    Attributes:
        backend (str): `jail` or `microvm`.
        created_at_ms (int):
        geometry (str | WorkspaceViewGeometryType0): `{"width", "height"}` in pixels, or the string `"WIDTHxHEIGHT"`;
            320x240 ..= 7680x4320.
        host_uid (int): The unprivileged host uid its processes run as.
        id (str):
        limits (WorkspaceViewLimits): A workspace's limits on the wire (create and view).
        links (WorkspaceViewLinks): `self`, `vnc`.
        name (str):
        state (str): `creating`, `starting`, `running`, `paused`, `stopping`, `stopped`,
            `failed`.
        updated_at_ms (int):
        call (None | Unset | WorkspaceViewCallType0): The agent's call for a person (`reason`, `by`, `since_ms`), until
            an operator takes over (`POST .../handoff`; lists and reads).
        egress (EgressBody | None | Unset):
        error (None | str | Unset): Why it failed or stopped unexpectedly.
        owner_token (None | str | Unset): The token that created it (agents see only their own by default).
        policy (None | str | Unset): The policy it runs under (`GET /v1/workspaces/{id}` and create).
        record (bool | None | Unset): Whether its screen is recorded (create only).
        time_limits (None | TimeLimitsView | Unset):
        usage (None | Unset | WorkspaceViewUsageType0): Current use next to the limits (`GET /v1/workspaces/{id}` only):
            memory_bytes, memory_limit_bytes, cpu_usage_usec, cpus, pids,
            pids_limit, disk_used_bytes, disk_limit_bytes, oom_kills; null where
            not measured.
    """

    backend: str
    created_at_ms: int
    geometry: str | WorkspaceViewGeometryType0
    host_uid: int
    id: str
    limits: WorkspaceViewLimits
    links: WorkspaceViewLinks
    name: str
    state: str
    updated_at_ms: int
    call: None | Unset | WorkspaceViewCallType0 = UNSET
    egress: EgressBody | None | Unset = UNSET
    error: None | str | Unset = UNSET
    owner_token: None | str | Unset = UNSET
    policy: None | str | Unset = UNSET
    record: bool | None | Unset = UNSET
    time_limits: None | TimeLimitsView | Unset = UNSET
    usage: None | Unset | WorkspaceViewUsageType0 = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.egress_body import EgressBody
        from ..models.time_limits_view import TimeLimitsView
        from ..models.workspace_view_call_type_0 import WorkspaceViewCallType0
        from ..models.workspace_view_geometry_type_0 import WorkspaceViewGeometryType0
        from ..models.workspace_view_usage_type_0 import WorkspaceViewUsageType0

        backend = self.backend

        created_at_ms = self.created_at_ms

        geometry: dict[str, Any] | str
        if isinstance(self.geometry, WorkspaceViewGeometryType0):
            geometry = self.geometry.to_dict()
        else:
            geometry = self.geometry

        host_uid = self.host_uid

        id = self.id

        limits = self.limits.to_dict()

        links = self.links.to_dict()

        name = self.name

        state = self.state

        updated_at_ms = self.updated_at_ms

        call: dict[str, Any] | None | Unset
        if isinstance(self.call, Unset):
            call = UNSET
        elif isinstance(self.call, WorkspaceViewCallType0):
            call = self.call.to_dict()
        else:
            call = self.call

        egress: dict[str, Any] | None | Unset
        if isinstance(self.egress, Unset):
            egress = UNSET
        elif isinstance(self.egress, EgressBody):
            egress = self.egress.to_dict()
        else:
            egress = self.egress

        error: None | str | Unset
        if isinstance(self.error, Unset):
            error = UNSET
        else:
            error = self.error

        owner_token: None | str | Unset
        if isinstance(self.owner_token, Unset):
            owner_token = UNSET
        else:
            owner_token = self.owner_token

        policy: None | str | Unset
        if isinstance(self.policy, Unset):
            policy = UNSET
        else:
            policy = self.policy

        record: bool | None | Unset
        if isinstance(self.record, Unset):
            record = UNSET
        else:
            record = self.record

        time_limits: dict[str, Any] | None | Unset
        if isinstance(self.time_limits, Unset):
            time_limits = UNSET
        elif isinstance(self.time_limits, TimeLimitsView):
            time_limits = self.time_limits.to_dict()
        else:
            time_limits = self.time_limits

        usage: dict[str, Any] | None | Unset
        if isinstance(self.usage, Unset):
            usage = UNSET
        elif isinstance(self.usage, WorkspaceViewUsageType0):
            usage = self.usage.to_dict()
        else:
            usage = self.usage

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "backend": backend,
                "created_at_ms": created_at_ms,
                "geometry": geometry,
                "host_uid": host_uid,
                "id": id,
                "limits": limits,
                "links": links,
                "name": name,
                "state": state,
                "updated_at_ms": updated_at_ms,
            }
        )
        if call is not UNSET:
            field_dict["call"] = call
        if egress is not UNSET:
            field_dict["egress"] = egress
        if error is not UNSET:
            field_dict["error"] = error
        if owner_token is not UNSET:
            field_dict["owner_token"] = owner_token
        if policy is not UNSET:
            field_dict["policy"] = policy
        if record is not UNSET:
            field_dict["record"] = record
        if time_limits is not UNSET:
            field_dict["time_limits"] = time_limits
        if usage is not UNSET:
            field_dict["usage"] = usage

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.egress_body import EgressBody
        from ..models.time_limits_view import TimeLimitsView
        from ..models.workspace_view_call_type_0 import WorkspaceViewCallType0
        from ..models.workspace_view_geometry_type_0 import WorkspaceViewGeometryType0
        from ..models.workspace_view_limits import WorkspaceViewLimits
        from ..models.workspace_view_links import WorkspaceViewLinks
        from ..models.workspace_view_usage_type_0 import WorkspaceViewUsageType0

        d = dict(src_dict)
        backend = d.pop("backend")

        created_at_ms = d.pop("created_at_ms")

        def _parse_geometry(data: object) -> str | WorkspaceViewGeometryType0:
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                geometry_type_0 = WorkspaceViewGeometryType0.from_dict(data)

                return geometry_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(str | WorkspaceViewGeometryType0, data)

        geometry = _parse_geometry(d.pop("geometry"))

        host_uid = d.pop("host_uid")

        id = d.pop("id")

        limits = WorkspaceViewLimits.from_dict(d.pop("limits"))

        links = WorkspaceViewLinks.from_dict(d.pop("links"))

        name = d.pop("name")

        state = d.pop("state")

        updated_at_ms = d.pop("updated_at_ms")

        def _parse_call(data: object) -> None | Unset | WorkspaceViewCallType0:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                call_type_0 = WorkspaceViewCallType0.from_dict(data)

                return call_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Unset | WorkspaceViewCallType0, data)

        call = _parse_call(d.pop("call", UNSET))

        def _parse_egress(data: object) -> EgressBody | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                egress_type_1 = EgressBody.from_dict(data)

                return egress_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(EgressBody | None | Unset, data)

        egress = _parse_egress(d.pop("egress", UNSET))

        def _parse_error(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        error = _parse_error(d.pop("error", UNSET))

        def _parse_owner_token(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        owner_token = _parse_owner_token(d.pop("owner_token", UNSET))

        def _parse_policy(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        policy = _parse_policy(d.pop("policy", UNSET))

        def _parse_record(data: object) -> bool | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(bool | None | Unset, data)

        record = _parse_record(d.pop("record", UNSET))

        def _parse_time_limits(data: object) -> None | TimeLimitsView | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                time_limits_type_1 = TimeLimitsView.from_dict(data)

                return time_limits_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | TimeLimitsView | Unset, data)

        time_limits = _parse_time_limits(d.pop("time_limits", UNSET))

        def _parse_usage(data: object) -> None | Unset | WorkspaceViewUsageType0:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                usage_type_0 = WorkspaceViewUsageType0.from_dict(data)

                return usage_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Unset | WorkspaceViewUsageType0, data)

        usage = _parse_usage(d.pop("usage", UNSET))

        workspace_view = cls(
            backend=backend,
            created_at_ms=created_at_ms,
            geometry=geometry,
            host_uid=host_uid,
            id=id,
            limits=limits,
            links=links,
            name=name,
            state=state,
            updated_at_ms=updated_at_ms,
            call=call,
            egress=egress,
            error=error,
            owner_token=owner_token,
            policy=policy,
            record=record,
            time_limits=time_limits,
            usage=usage,
        )

        workspace_view.additional_properties = d
        return workspace_view

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
