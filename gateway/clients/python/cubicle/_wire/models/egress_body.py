from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="EgressBody")


@_attrs_define
class EgressBody:
    """What a workspace may reach. Default: nothing.

    Allow rules: `example.org` (ports 80 and 443), `*.example.org:443`
    (names below it), `api.example.org:8000-8100,9000`,
    `203.0.113.0/24:*`, `127.0.0.1/32:8443`, `[fd00::/8]:443`. Loopback,
    private, link-local (cloud metadata), CGNAT, unique-local, multicast and
    IPv4-mapped addresses are refused after resolution unless a network
    rule inside that range names them.

        Attributes:
            allow (list[str] | Unset): Allow rules (at most 256).
            auto_release (list[str] | Unset): Sniffed media types released without an operator when the scan
                found nothing (e.g. `application/pdf`).
            intercept (bool | None | Unset): Intercept TLS so URLs and downloads are seen (default true).
            passthrough (list[str] | Unset): Hosts (`name` or `*.suffix`) whose TLS is not intercepted: host and
                port are still checked, but URLs are not seen and downloads from
                them are not captured.
    """

    allow: list[str] | Unset = UNSET
    auto_release: list[str] | Unset = UNSET
    intercept: bool | None | Unset = UNSET
    passthrough: list[str] | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        allow: list[str] | Unset = UNSET
        if not isinstance(self.allow, Unset):
            allow = self.allow

        auto_release: list[str] | Unset = UNSET
        if not isinstance(self.auto_release, Unset):
            auto_release = self.auto_release

        intercept: bool | None | Unset
        if isinstance(self.intercept, Unset):
            intercept = UNSET
        else:
            intercept = self.intercept

        passthrough: list[str] | Unset = UNSET
        if not isinstance(self.passthrough, Unset):
            passthrough = self.passthrough

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if allow is not UNSET:
            field_dict["allow"] = allow
        if auto_release is not UNSET:
            field_dict["auto_release"] = auto_release
        if intercept is not UNSET:
            field_dict["intercept"] = intercept
        if passthrough is not UNSET:
            field_dict["passthrough"] = passthrough

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        allow = cast(list[str], d.pop("allow", UNSET))

        auto_release = cast(list[str], d.pop("auto_release", UNSET))

        def _parse_intercept(data: object) -> bool | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(bool | None | Unset, data)

        intercept = _parse_intercept(d.pop("intercept", UNSET))

        passthrough = cast(list[str], d.pop("passthrough", UNSET))

        egress_body = cls(
            allow=allow,
            auto_release=auto_release,
            intercept=intercept,
            passthrough=passthrough,
        )

        return egress_body
