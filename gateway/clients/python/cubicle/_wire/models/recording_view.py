from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.recording_summary import RecordingSummary
    from ..models.segment_view import SegmentView
    from ..models.timeline_event import TimelineEvent


T = TypeVar("T", bound="RecordingView")


@_attrs_define
class RecordingView:
    """A recorded session: its segments and its events.

    Attributes:
        events (list[TimelineEvent]):
        recording (RecordingSummary): A recorded session, for the list.
        segments (list[SegmentView]):
    """

    events: list[TimelineEvent]
    recording: RecordingSummary
    segments: list[SegmentView]
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        events = []
        for events_item_data in self.events:
            events_item = events_item_data.to_dict()
            events.append(events_item)

        recording = self.recording.to_dict()

        segments = []
        for segments_item_data in self.segments:
            segments_item = segments_item_data.to_dict()
            segments.append(segments_item)

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "events": events,
                "recording": recording,
                "segments": segments,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.recording_summary import RecordingSummary
        from ..models.segment_view import SegmentView
        from ..models.timeline_event import TimelineEvent

        d = dict(src_dict)
        events = []
        _events = d.pop("events")
        for events_item_data in _events:
            events_item = TimelineEvent.from_dict(events_item_data)

            events.append(events_item)

        recording = RecordingSummary.from_dict(d.pop("recording"))

        segments = []
        _segments = d.pop("segments")
        for segments_item_data in _segments:
            segments_item = SegmentView.from_dict(segments_item_data)

            segments.append(segments_item)

        recording_view = cls(
            events=events,
            recording=recording,
            segments=segments,
        )

        recording_view.additional_properties = d
        return recording_view

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
