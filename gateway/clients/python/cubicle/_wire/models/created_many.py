from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.create_failure import CreateFailure
    from ..models.workspace_view import WorkspaceView


T = TypeVar("T", bound="CreatedMany")


@_attrs_define
class CreatedMany:
    """The answer to a create with `count`.

    Attributes:
        failed (list[CreateFailure]): One entry per workspace not made, with the refusal's code and message.
        workspaces (list[WorkspaceView]): The workspaces made, running.
    """

    failed: list[CreateFailure]
    workspaces: list[WorkspaceView]
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        failed = []
        for failed_item_data in self.failed:
            failed_item = failed_item_data.to_dict()
            failed.append(failed_item)

        workspaces = []
        for workspaces_item_data in self.workspaces:
            workspaces_item = workspaces_item_data.to_dict()
            workspaces.append(workspaces_item)

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "failed": failed,
                "workspaces": workspaces,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.create_failure import CreateFailure
        from ..models.workspace_view import WorkspaceView

        d = dict(src_dict)
        failed = []
        _failed = d.pop("failed")
        for failed_item_data in _failed:
            failed_item = CreateFailure.from_dict(failed_item_data)

            failed.append(failed_item)

        workspaces = []
        _workspaces = d.pop("workspaces")
        for workspaces_item_data in _workspaces:
            workspaces_item = WorkspaceView.from_dict(workspaces_item_data)

            workspaces.append(workspaces_item)

        created_many = cls(
            failed=failed,
            workspaces=workspaces,
        )

        created_many.additional_properties = d
        return created_many

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
