from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.hit_view import HitView


T = TypeVar("T", bound="DownloadView")


@_attrs_define
class DownloadView:
    """A download held in quarantine (or decided).

    Attributes:
        created_at_ms (int):
        hits (list[HitView]): YARA rules that matched.
        id (str):
        name (str): The cleaned name it is (or would be) released under.
        offered_name (str): The name the server offered, as it was.
        sha256 (str):
        size (int):
        state (str): `held`, `released` or `rejected`.
        url (str):
        workspace (str):
        claimed_type (None | str | Unset): The type the server claimed.
        decided_at_ms (int | None | Unset):
        decided_by (None | str | Unset):
        reason (None | str | Unset):
        released_path (None | str | Unset): Where it was written in the workspace.
        sniffed_type (None | str | Unset): The type the bytes look like.
    """

    created_at_ms: int
    hits: list[HitView]
    id: str
    name: str
    offered_name: str
    sha256: str
    size: int
    state: str
    url: str
    workspace: str
    claimed_type: None | str | Unset = UNSET
    decided_at_ms: int | None | Unset = UNSET
    decided_by: None | str | Unset = UNSET
    reason: None | str | Unset = UNSET
    released_path: None | str | Unset = UNSET
    sniffed_type: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        created_at_ms = self.created_at_ms

        hits = []
        for hits_item_data in self.hits:
            hits_item = hits_item_data.to_dict()
            hits.append(hits_item)

        id = self.id

        name = self.name

        offered_name = self.offered_name

        sha256 = self.sha256

        size = self.size

        state = self.state

        url = self.url

        workspace = self.workspace

        claimed_type: None | str | Unset
        if isinstance(self.claimed_type, Unset):
            claimed_type = UNSET
        else:
            claimed_type = self.claimed_type

        decided_at_ms: int | None | Unset
        if isinstance(self.decided_at_ms, Unset):
            decided_at_ms = UNSET
        else:
            decided_at_ms = self.decided_at_ms

        decided_by: None | str | Unset
        if isinstance(self.decided_by, Unset):
            decided_by = UNSET
        else:
            decided_by = self.decided_by

        reason: None | str | Unset
        if isinstance(self.reason, Unset):
            reason = UNSET
        else:
            reason = self.reason

        released_path: None | str | Unset
        if isinstance(self.released_path, Unset):
            released_path = UNSET
        else:
            released_path = self.released_path

        sniffed_type: None | str | Unset
        if isinstance(self.sniffed_type, Unset):
            sniffed_type = UNSET
        else:
            sniffed_type = self.sniffed_type

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "created_at_ms": created_at_ms,
                "hits": hits,
                "id": id,
                "name": name,
                "offered_name": offered_name,
                "sha256": sha256,
                "size": size,
                "state": state,
                "url": url,
                "workspace": workspace,
            }
        )
        if claimed_type is not UNSET:
            field_dict["claimed_type"] = claimed_type
        if decided_at_ms is not UNSET:
            field_dict["decided_at_ms"] = decided_at_ms
        if decided_by is not UNSET:
            field_dict["decided_by"] = decided_by
        if reason is not UNSET:
            field_dict["reason"] = reason
        if released_path is not UNSET:
            field_dict["released_path"] = released_path
        if sniffed_type is not UNSET:
            field_dict["sniffed_type"] = sniffed_type

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.hit_view import HitView

        d = dict(src_dict)
        created_at_ms = d.pop("created_at_ms")

        hits = []
        _hits = d.pop("hits")
        for hits_item_data in _hits:
            hits_item = HitView.from_dict(hits_item_data)

            hits.append(hits_item)

        id = d.pop("id")

        name = d.pop("name")

        offered_name = d.pop("offered_name")

        sha256 = d.pop("sha256")

        size = d.pop("size")

        state = d.pop("state")

        url = d.pop("url")

        workspace = d.pop("workspace")

        def _parse_claimed_type(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        claimed_type = _parse_claimed_type(d.pop("claimed_type", UNSET))

        def _parse_decided_at_ms(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        decided_at_ms = _parse_decided_at_ms(d.pop("decided_at_ms", UNSET))

        def _parse_decided_by(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        decided_by = _parse_decided_by(d.pop("decided_by", UNSET))

        def _parse_reason(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        reason = _parse_reason(d.pop("reason", UNSET))

        def _parse_released_path(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        released_path = _parse_released_path(d.pop("released_path", UNSET))

        def _parse_sniffed_type(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        sniffed_type = _parse_sniffed_type(d.pop("sniffed_type", UNSET))

        download_view = cls(
            created_at_ms=created_at_ms,
            hits=hits,
            id=id,
            name=name,
            offered_name=offered_name,
            sha256=sha256,
            size=size,
            state=state,
            url=url,
            workspace=workspace,
            claimed_type=claimed_type,
            decided_at_ms=decided_at_ms,
            decided_by=decided_by,
            reason=reason,
            released_path=released_path,
            sniffed_type=sniffed_type,
        )

        download_view.additional_properties = d
        return download_view

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
