from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="RecordingSummary")


@_attrs_define
class RecordingSummary:
    """A recorded session, for the list.

    Attributes:
        duration_ms (int): Total video length.
        end_ms (int):
        name (str):
        segments (int):
        start_ms (int): Wall-clock span recorded, Unix ms.
        state (str): The workspace's state now (`deleted` ones stay listed).
        workspace (str):
    """

    duration_ms: int
    end_ms: int
    name: str
    segments: int
    start_ms: int
    state: str
    workspace: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        duration_ms = self.duration_ms

        end_ms = self.end_ms

        name = self.name

        segments = self.segments

        start_ms = self.start_ms

        state = self.state

        workspace = self.workspace

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "duration_ms": duration_ms,
                "end_ms": end_ms,
                "name": name,
                "segments": segments,
                "start_ms": start_ms,
                "state": state,
                "workspace": workspace,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        duration_ms = d.pop("duration_ms")

        end_ms = d.pop("end_ms")

        name = d.pop("name")

        segments = d.pop("segments")

        start_ms = d.pop("start_ms")

        state = d.pop("state")

        workspace = d.pop("workspace")

        recording_summary = cls(
            duration_ms=duration_ms,
            end_ms=end_ms,
            name=name,
            segments=segments,
            start_ms=start_ms,
            state=state,
            workspace=workspace,
        )

        recording_summary.additional_properties = d
        return recording_summary

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
