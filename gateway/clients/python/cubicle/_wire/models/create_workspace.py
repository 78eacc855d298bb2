from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.create_workspace_geometry_type_1_type_0 import (
        CreateWorkspaceGeometryType1Type0,
    )
    from ..models.create_workspace_limits_type_1 import CreateWorkspaceLimitsType1
    from ..models.egress_body import EgressBody
    from ..models.time_limits_body import TimeLimitsBody


T = TypeVar("T", bound="CreateWorkspace")


@_attrs_define
class CreateWorkspace:
    """Body of `POST /v1/workspaces` (may be empty: all defaults).

    `egress`, `policy`, `time_limits`, `record` and `limits` are the
    workspace's guard rails. An agent gets the server's defaults (or those of
    the `template` it names) and may ask only for narrower ones: an egress
    each of whose rules a default rule covers, less memory, a shorter TTL,
    the default policy, recording on. Anything wider is a 403 naming the
    field; operators and admins may choose them.

        Attributes:
            count (int | None | Unset): With `from_snapshot`: start this many workspaces from it at once
                (1..=10); the reply is then `{"workspaces": [...], "failed":
                [...]}`.
            egress (EgressBody | None | Unset):
            from_snapshot (None | str | Unset): A snapshot of the caller's to start from (`POST
                /v1/workspaces/{id}/snapshot` takes one): its files in `/home/user`
                and `/tmp` and its browser profile are in place before the
                workspace is handed out. Not with `profile`.
            geometry (CreateWorkspaceGeometryType1Type0 | None | str | Unset): Screen size; 1280x800 by default. Read as a
                [`GeometryBody`] by
                hand so that an error names `geometry.width` or `geometry.height`.
            limits (CreateWorkspaceLimitsType1 | None | Unset): What it may use; each missing field takes the server's
                default (or
                the template's). Agents: no more than that.
            name (None | str | Unset): 1..=128 bytes without control characters; the id by default.
            policy (None | str | Unset): The policy it runs under (a name the server loaded, such as
                `default`, `strict`, `open`); the server's default (or the
                template's) when left out. Agents: only that one.
            profile (None | str | Unset): A browser profile of the caller's to run Chromium on (made empty
                the first time this name is used): its cookies, local storage and
                IndexedDB are loaded as the workspace starts and saved when it
                stops. One running workspace at a time (409 `profile_in_use`).
                1..=64 of `A-Z a-z 0-9 . _ -`.
            record (bool | None | Unset): Whether its screen is recorded: true by default (unless the server
                runs with `--no-record`). With `false` no video is kept; its events
                are sealed in its audit chain all the same. Agents may not turn it
                off.
            template (None | str | Unset): A template the server's admin configured (`cubicle serve --template
                NAME=FILE`): its guard rails instead of the server's defaults.
            time_limits (None | TimeLimitsBody | Unset):
    """

    count: int | None | Unset = UNSET
    egress: EgressBody | None | Unset = UNSET
    from_snapshot: None | str | Unset = UNSET
    geometry: CreateWorkspaceGeometryType1Type0 | None | str | Unset = UNSET
    limits: CreateWorkspaceLimitsType1 | None | Unset = UNSET
    name: None | str | Unset = UNSET
    policy: None | str | Unset = UNSET
    profile: None | str | Unset = UNSET
    record: bool | None | Unset = UNSET
    template: None | str | Unset = UNSET
    time_limits: None | TimeLimitsBody | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        from ..models.create_workspace_geometry_type_1_type_0 import (
            CreateWorkspaceGeometryType1Type0,
        )
        from ..models.create_workspace_limits_type_1 import CreateWorkspaceLimitsType1
        from ..models.egress_body import EgressBody
        from ..models.time_limits_body import TimeLimitsBody

        count: int | None | Unset
        if isinstance(self.count, Unset):
            count = UNSET
        else:
            count = self.count

        egress: dict[str, Any] | None | Unset
        if isinstance(self.egress, Unset):
            egress = UNSET
        elif isinstance(self.egress, EgressBody):
            egress = self.egress.to_dict()
        else:
            egress = self.egress

        from_snapshot: None | str | Unset
        if isinstance(self.from_snapshot, Unset):
            from_snapshot = UNSET
        else:
            from_snapshot = self.from_snapshot

        geometry: dict[str, Any] | None | str | Unset
        if isinstance(self.geometry, Unset):
            geometry = UNSET
        elif isinstance(self.geometry, CreateWorkspaceGeometryType1Type0):
            geometry = self.geometry.to_dict()
        else:
            geometry = self.geometry

        limits: dict[str, Any] | None | Unset
        if isinstance(self.limits, Unset):
            limits = UNSET
        elif isinstance(self.limits, CreateWorkspaceLimitsType1):
            limits = self.limits.to_dict()
        else:
            limits = self.limits

        name: None | str | Unset
        if isinstance(self.name, Unset):
            name = UNSET
        else:
            name = self.name

        policy: None | str | Unset
        if isinstance(self.policy, Unset):
            policy = UNSET
        else:
            policy = self.policy

        profile: None | str | Unset
        if isinstance(self.profile, Unset):
            profile = UNSET
        else:
            profile = self.profile

        record: bool | None | Unset
        if isinstance(self.record, Unset):
            record = UNSET
        else:
            record = self.record

        template: None | str | Unset
        if isinstance(self.template, Unset):
            template = UNSET
        else:
            template = self.template

        time_limits: dict[str, Any] | None | Unset
        if isinstance(self.time_limits, Unset):
            time_limits = UNSET
        elif isinstance(self.time_limits, TimeLimitsBody):
            time_limits = self.time_limits.to_dict()
        else:
            time_limits = self.time_limits

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if count is not UNSET:
            field_dict["count"] = count
        if egress is not UNSET:
            field_dict["egress"] = egress
        if from_snapshot is not UNSET:
            field_dict["from_snapshot"] = from_snapshot
        if geometry is not UNSET:
            field_dict["geometry"] = geometry
        if limits is not UNSET:
            field_dict["limits"] = limits
        if name is not UNSET:
            field_dict["name"] = name
        if policy is not UNSET:
            field_dict["policy"] = policy
        if profile is not UNSET:
            field_dict["profile"] = profile
        if record is not UNSET:
            field_dict["record"] = record
        if template is not UNSET:
            field_dict["template"] = template
        if time_limits is not UNSET:
            field_dict["time_limits"] = time_limits

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.create_workspace_geometry_type_1_type_0 import (
            CreateWorkspaceGeometryType1Type0,
        )
        from ..models.create_workspace_limits_type_1 import CreateWorkspaceLimitsType1
        from ..models.egress_body import EgressBody
        from ..models.time_limits_body import TimeLimitsBody

        d = dict(src_dict)

        def _parse_count(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        count = _parse_count(d.pop("count", UNSET))

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

        def _parse_from_snapshot(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        from_snapshot = _parse_from_snapshot(d.pop("from_snapshot", UNSET))

        def _parse_geometry(
            data: object,
        ) -> CreateWorkspaceGeometryType1Type0 | None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                geometry_type_1_type_0 = CreateWorkspaceGeometryType1Type0.from_dict(
                    data
                )

                return geometry_type_1_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(CreateWorkspaceGeometryType1Type0 | None | str | Unset, data)

        geometry = _parse_geometry(d.pop("geometry", UNSET))

        def _parse_limits(data: object) -> CreateWorkspaceLimitsType1 | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                limits_type_1 = CreateWorkspaceLimitsType1.from_dict(data)

                return limits_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(CreateWorkspaceLimitsType1 | None | Unset, data)

        limits = _parse_limits(d.pop("limits", UNSET))

        def _parse_name(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        name = _parse_name(d.pop("name", UNSET))

        def _parse_policy(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        policy = _parse_policy(d.pop("policy", UNSET))

        def _parse_profile(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        profile = _parse_profile(d.pop("profile", UNSET))

        def _parse_record(data: object) -> bool | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(bool | None | Unset, data)

        record = _parse_record(d.pop("record", UNSET))

        def _parse_template(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        template = _parse_template(d.pop("template", UNSET))

        def _parse_time_limits(data: object) -> None | TimeLimitsBody | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                time_limits_type_1 = TimeLimitsBody.from_dict(data)

                return time_limits_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | TimeLimitsBody | Unset, data)

        time_limits = _parse_time_limits(d.pop("time_limits", UNSET))

        create_workspace = cls(
            count=count,
            egress=egress,
            from_snapshot=from_snapshot,
            geometry=geometry,
            limits=limits,
            name=name,
            policy=policy,
            profile=profile,
            record=record,
            template=template,
            time_limits=time_limits,
        )

        return create_workspace
