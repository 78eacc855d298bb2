from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.download_view import DownloadView


T = TypeVar("T", bound="DownloadList")


@_attrs_define
class DownloadList:
    """`{"downloads": [...]}`.

    Attributes:
        downloads (list[DownloadView]):
    """

    downloads: list[DownloadView]
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        downloads = []
        for downloads_item_data in self.downloads:
            downloads_item = downloads_item_data.to_dict()
            downloads.append(downloads_item)

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "downloads": downloads,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.download_view import DownloadView

        d = dict(src_dict)
        downloads = []
        _downloads = d.pop("downloads")
        for downloads_item_data in _downloads:
            downloads_item = DownloadView.from_dict(downloads_item_data)

            downloads.append(downloads_item)

        download_list = cls(
            downloads=downloads,
        )

        download_list.additional_properties = d
        return download_list

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
