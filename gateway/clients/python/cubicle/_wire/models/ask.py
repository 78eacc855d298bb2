from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.ask_details_type_0 import AskDetailsType0


T = TypeVar("T", bound="Ask")


@_attrs_define
class Ask:
    """Body of `POST /v1/workspaces/{id}/approvals`: a step the agent asks a
    person to confirm before it takes it.

        Attributes:
            question (str): The step, in words a person decides on (an OpenAI safety check's
                message, say); at most 1000 characters, no control characters but
                line breaks.
            details (AskDetailsType0 | None | Unset): What the person should see of it (at most 16 KiB of JSON): shown
                with the question and bound to the approval.
            expires_in_seconds (int | None | Unset): How long a person has to decide (default 600, at most 3600).
    """

    question: str
    details: AskDetailsType0 | None | Unset = UNSET
    expires_in_seconds: int | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        from ..models.ask_details_type_0 import AskDetailsType0

        question = self.question

        details: dict[str, Any] | None | Unset
        if isinstance(self.details, Unset):
            details = UNSET
        elif isinstance(self.details, AskDetailsType0):
            details = self.details.to_dict()
        else:
            details = self.details

        expires_in_seconds: int | None | Unset
        if isinstance(self.expires_in_seconds, Unset):
            expires_in_seconds = UNSET
        else:
            expires_in_seconds = self.expires_in_seconds

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "question": question,
            }
        )
        if details is not UNSET:
            field_dict["details"] = details
        if expires_in_seconds is not UNSET:
            field_dict["expires_in_seconds"] = expires_in_seconds

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.ask_details_type_0 import AskDetailsType0

        d = dict(src_dict)
        question = d.pop("question")

        def _parse_details(data: object) -> AskDetailsType0 | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                details_type_0 = AskDetailsType0.from_dict(data)

                return details_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(AskDetailsType0 | None | Unset, data)

        details = _parse_details(d.pop("details", UNSET))

        def _parse_expires_in_seconds(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        expires_in_seconds = _parse_expires_in_seconds(
            d.pop("expires_in_seconds", UNSET)
        )

        ask = cls(
            question=question,
            details=details,
            expires_in_seconds=expires_in_seconds,
        )

        return ask
