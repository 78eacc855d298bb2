from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="SegmentView")


@_attrs_define
class SegmentView:
    """A closed video segment: fragmented MP4 (H.264), sealed in the chain.

    Attributes:
        bytes_ (int):
        end_ms (int):
        file (str):
        offset_ms (int): Where it starts on the replay's timeline (the segments back to back).
        partial (bool): Cut short by a daemon that died; sealed at the next start.
        seq (int): Its record's seq in the workspace's chain.
        sha256 (str):
        start_ms (int): Wall-clock Unix ms of its first frame (its time 0) and of its end.
        url (str): Where to fetch it.
    """

    bytes_: int
    end_ms: int
    file: str
    offset_ms: int
    partial: bool
    seq: int
    sha256: str
    start_ms: int
    url: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        bytes_ = self.bytes_

        end_ms = self.end_ms

        file = self.file

        offset_ms = self.offset_ms

        partial = self.partial

        seq = self.seq

        sha256 = self.sha256

        start_ms = self.start_ms

        url = self.url

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "bytes": bytes_,
                "end_ms": end_ms,
                "file": file,
                "offset_ms": offset_ms,
                "partial": partial,
                "seq": seq,
                "sha256": sha256,
                "start_ms": start_ms,
                "url": url,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        bytes_ = d.pop("bytes")

        end_ms = d.pop("end_ms")

        file = d.pop("file")

        offset_ms = d.pop("offset_ms")

        partial = d.pop("partial")

        seq = d.pop("seq")

        sha256 = d.pop("sha256")

        start_ms = d.pop("start_ms")

        url = d.pop("url")

        segment_view = cls(
            bytes_=bytes_,
            end_ms=end_ms,
            file=file,
            offset_ms=offset_ms,
            partial=partial,
            seq=seq,
            sha256=sha256,
            start_ms=start_ms,
            url=url,
        )

        segment_view.additional_properties = d
        return segment_view

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
