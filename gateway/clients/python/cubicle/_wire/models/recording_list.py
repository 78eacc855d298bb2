from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.recording_summary import RecordingSummary


T = TypeVar("T", bound="RecordingList")


@_attrs_define
class RecordingList:
    """`{"recordings": [...]}`, newest first.

    Attributes:
        recordings (list[RecordingSummary]):
    """

    recordings: list[RecordingSummary]
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        recordings = []
        for recordings_item_data in self.recordings:
            recordings_item = recordings_item_data.to_dict()
            recordings.append(recordings_item)

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "recordings": recordings,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.recording_summary import RecordingSummary

        d = dict(src_dict)
        recordings = []
        _recordings = d.pop("recordings")
        for recordings_item_data in _recordings:
            recordings_item = RecordingSummary.from_dict(recordings_item_data)

            recordings.append(recordings_item)

        recording_list = cls(
            recordings=recordings,
        )

        recording_list.additional_properties = d
        return recording_list

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
