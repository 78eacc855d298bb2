from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="TimelineEvent")


@_attrs_define
class TimelineEvent:
    """One event on the replay timeline.

    Attributes:
        at (int): Unix ms.
        detail (Any):
        id (int):
        kind (str):
        actor (Any | Unset): `{"id", "name", "role"}`; null when the daemon acted.
        outcome (None | str | Unset):
        request_id (None | str | Unset):
        video_ms (int | None | Unset): Where it is on the replay's timeline; null if nothing was recorded
            at or after it.
    """

    at: int
    detail: Any
    id: int
    kind: str
    actor: Any | Unset = UNSET
    outcome: None | str | Unset = UNSET
    request_id: None | str | Unset = UNSET
    video_ms: int | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        at = self.at

        detail = self.detail

        id = self.id

        kind = self.kind

        actor = self.actor

        outcome: None | str | Unset
        if isinstance(self.outcome, Unset):
            outcome = UNSET
        else:
            outcome = self.outcome

        request_id: None | str | Unset
        if isinstance(self.request_id, Unset):
            request_id = UNSET
        else:
            request_id = self.request_id

        video_ms: int | None | Unset
        if isinstance(self.video_ms, Unset):
            video_ms = UNSET
        else:
            video_ms = self.video_ms

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "at": at,
                "detail": detail,
                "id": id,
                "kind": kind,
            }
        )
        if actor is not UNSET:
            field_dict["actor"] = actor
        if outcome is not UNSET:
            field_dict["outcome"] = outcome
        if request_id is not UNSET:
            field_dict["request_id"] = request_id
        if video_ms is not UNSET:
            field_dict["video_ms"] = video_ms

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        at = d.pop("at")

        detail = d.pop("detail")

        id = d.pop("id")

        kind = d.pop("kind")

        actor = d.pop("actor", UNSET)

        def _parse_outcome(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        outcome = _parse_outcome(d.pop("outcome", UNSET))

        def _parse_request_id(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        request_id = _parse_request_id(d.pop("request_id", UNSET))

        def _parse_video_ms(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        video_ms = _parse_video_ms(d.pop("video_ms", UNSET))

        timeline_event = cls(
            at=at,
            detail=detail,
            id=id,
            kind=kind,
            actor=actor,
            outcome=outcome,
            request_id=request_id,
            video_ms=video_ms,
        )

        timeline_event.additional_properties = d
        return timeline_event

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
