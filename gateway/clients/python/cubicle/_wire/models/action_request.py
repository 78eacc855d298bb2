from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.action_request_action import (
    ActionRequestAction,
    check_action_request_action,
)
from ..models.action_request_type import ActionRequestType, check_action_request_type
from ..models.image_format import ImageFormat, check_image_format
from ..models.scroll_direction import ScrollDirection, check_scroll_direction
from ..types import UNSET, Unset

T = TypeVar("T", bound="ActionRequest")


@_attrs_define
class ActionRequest:
    """One computer-use action, in Anthropic's form (`action`: key, hold_key,
    type, cursor_position, mouse_move, left_click, right_click,
    middle_click, double_click, triple_click, left_mouse_down,
    left_mouse_up, left_click_drag, scroll, wait, screenshot, zoom) or
    OpenAI CUA's (`type`: click, double_click, scroll, keypress, type, wait,
    screenshot, move, drag). Or `{"actions": [...]}` for a batch (1..=100)
    run in order, stopping at the first error.

    `action` and `type` list the parser's own names ([`ActionNames`] fills
    them in from `crate::actions::parse`); which other fields an action
    needs depends on the action (a click its `coordinate`, `type` its
    `text`), which this schema does not spell out per action.

        Attributes:
            action (ActionRequestAction | Unset):
            actions (list[Any] | None | Unset): A batch: 1..=100 actions run in order.
            coordinate (list[int] | None | Unset): `[x, y]` in screen pixels, or in the space of the last scaled screenshot.
            duration (float | None | Unset): Seconds (0..=60) for `wait` and `hold_key`.
            format_ (ImageFormat | None | Unset):
            height (int | None | Unset):
            quality (int | None | Unset):
            region (list[int] | None | Unset): `[x0, y0, x1, y1]` for `zoom`.
            scroll_amount (int | None | Unset):
            scroll_direction (None | ScrollDirection | Unset):
            start_coordinate (list[int] | None | Unset):
            text (None | str | Unset): Text to type, xdotool key combination (`ctrl+shift+t`), or modifiers
                held during a click or scroll.
            type_ (ActionRequestType | Unset):
            width (int | None | Unset): Screenshot scaled to this size (both, or neither); later
                coordinates are in it.
    """

    action: ActionRequestAction | Unset = UNSET
    actions: list[Any] | None | Unset = UNSET
    coordinate: list[int] | None | Unset = UNSET
    duration: float | None | Unset = UNSET
    format_: ImageFormat | None | Unset = UNSET
    height: int | None | Unset = UNSET
    quality: int | None | Unset = UNSET
    region: list[int] | None | Unset = UNSET
    scroll_amount: int | None | Unset = UNSET
    scroll_direction: None | ScrollDirection | Unset = UNSET
    start_coordinate: list[int] | None | Unset = UNSET
    text: None | str | Unset = UNSET
    type_: ActionRequestType | Unset = UNSET
    width: int | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        action: str | Unset = UNSET
        if not isinstance(self.action, Unset):
            action = self.action

        actions: list[Any] | None | Unset
        if isinstance(self.actions, Unset):
            actions = UNSET
        elif isinstance(self.actions, list):
            actions = self.actions

        else:
            actions = self.actions

        coordinate: list[int] | None | Unset
        if isinstance(self.coordinate, Unset):
            coordinate = UNSET
        elif isinstance(self.coordinate, list):
            coordinate = self.coordinate

        else:
            coordinate = self.coordinate

        duration: float | None | Unset
        if isinstance(self.duration, Unset):
            duration = UNSET
        else:
            duration = self.duration

        format_: None | str | Unset
        if isinstance(self.format_, Unset):
            format_ = UNSET
        elif isinstance(self.format_, str):
            format_ = self.format_
        else:
            format_ = self.format_

        height: int | None | Unset
        if isinstance(self.height, Unset):
            height = UNSET
        else:
            height = self.height

        quality: int | None | Unset
        if isinstance(self.quality, Unset):
            quality = UNSET
        else:
            quality = self.quality

        region: list[int] | None | Unset
        if isinstance(self.region, Unset):
            region = UNSET
        elif isinstance(self.region, list):
            region = self.region

        else:
            region = self.region

        scroll_amount: int | None | Unset
        if isinstance(self.scroll_amount, Unset):
            scroll_amount = UNSET
        else:
            scroll_amount = self.scroll_amount

        scroll_direction: None | str | Unset
        if isinstance(self.scroll_direction, Unset):
            scroll_direction = UNSET
        elif isinstance(self.scroll_direction, str):
            scroll_direction = self.scroll_direction
        else:
            scroll_direction = self.scroll_direction

        start_coordinate: list[int] | None | Unset
        if isinstance(self.start_coordinate, Unset):
            start_coordinate = UNSET
        elif isinstance(self.start_coordinate, list):
            start_coordinate = self.start_coordinate

        else:
            start_coordinate = self.start_coordinate

        text: None | str | Unset
        if isinstance(self.text, Unset):
            text = UNSET
        else:
            text = self.text

        type_: str | Unset = UNSET
        if not isinstance(self.type_, Unset):
            type_ = self.type_

        width: int | None | Unset
        if isinstance(self.width, Unset):
            width = UNSET
        else:
            width = self.width

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({})
        if action is not UNSET:
            field_dict["action"] = action
        if actions is not UNSET:
            field_dict["actions"] = actions
        if coordinate is not UNSET:
            field_dict["coordinate"] = coordinate
        if duration is not UNSET:
            field_dict["duration"] = duration
        if format_ is not UNSET:
            field_dict["format"] = format_
        if height is not UNSET:
            field_dict["height"] = height
        if quality is not UNSET:
            field_dict["quality"] = quality
        if region is not UNSET:
            field_dict["region"] = region
        if scroll_amount is not UNSET:
            field_dict["scroll_amount"] = scroll_amount
        if scroll_direction is not UNSET:
            field_dict["scroll_direction"] = scroll_direction
        if start_coordinate is not UNSET:
            field_dict["start_coordinate"] = start_coordinate
        if text is not UNSET:
            field_dict["text"] = text
        if type_ is not UNSET:
            field_dict["type"] = type_
        if width is not UNSET:
            field_dict["width"] = width

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        _action = d.pop("action", UNSET)
        action: ActionRequestAction | Unset
        if isinstance(_action, Unset):
            action = UNSET
        else:
            action = check_action_request_action(_action)

        def _parse_actions(data: object) -> list[Any] | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, list):
                    raise TypeError()
                actions_type_0 = cast(list[Any], data)

                return actions_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(list[Any] | None | Unset, data)

        actions = _parse_actions(d.pop("actions", UNSET))

        def _parse_coordinate(data: object) -> list[int] | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, list):
                    raise TypeError()
                coordinate_type_0 = cast(list[int], data)

                return coordinate_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(list[int] | None | Unset, data)

        coordinate = _parse_coordinate(d.pop("coordinate", UNSET))

        def _parse_duration(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        duration = _parse_duration(d.pop("duration", UNSET))

        def _parse_format_(data: object) -> ImageFormat | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                format_type_1 = check_image_format(data)

                return format_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(ImageFormat | None | Unset, data)

        format_ = _parse_format_(d.pop("format", UNSET))

        def _parse_height(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        height = _parse_height(d.pop("height", UNSET))

        def _parse_quality(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        quality = _parse_quality(d.pop("quality", UNSET))

        def _parse_region(data: object) -> list[int] | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, list):
                    raise TypeError()
                region_type_0 = cast(list[int], data)

                return region_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(list[int] | None | Unset, data)

        region = _parse_region(d.pop("region", UNSET))

        def _parse_scroll_amount(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        scroll_amount = _parse_scroll_amount(d.pop("scroll_amount", UNSET))

        def _parse_scroll_direction(data: object) -> None | ScrollDirection | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                scroll_direction_type_1 = check_scroll_direction(data)

                return scroll_direction_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | ScrollDirection | Unset, data)

        scroll_direction = _parse_scroll_direction(d.pop("scroll_direction", UNSET))

        def _parse_start_coordinate(data: object) -> list[int] | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, list):
                    raise TypeError()
                start_coordinate_type_0 = cast(list[int], data)

                return start_coordinate_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(list[int] | None | Unset, data)

        start_coordinate = _parse_start_coordinate(d.pop("start_coordinate", UNSET))

        def _parse_text(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        text = _parse_text(d.pop("text", UNSET))

        _type_ = d.pop("type", UNSET)
        type_: ActionRequestType | Unset
        if isinstance(_type_, Unset):
            type_ = UNSET
        else:
            type_ = check_action_request_type(_type_)

        def _parse_width(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        width = _parse_width(d.pop("width", UNSET))

        action_request = cls(
            action=action,
            actions=actions,
            coordinate=coordinate,
            duration=duration,
            format_=format_,
            height=height,
            quality=quality,
            region=region,
            scroll_amount=scroll_amount,
            scroll_direction=scroll_direction,
            start_coordinate=start_coordinate,
            text=text,
            type_=type_,
            width=width,
        )

        action_request.additional_properties = d
        return action_request

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
