from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="ExecResult")


@_attrs_define
class ExecResult:
    """What a command did; each output is kept up to 1 MiB, as UTF-8 text
    (lossy), plus `*_base64` with the exact bytes when they are not UTF-8.

        Attributes:
            duration_ms (int):
            stderr (str):
            stderr_truncated (bool):
            stdout (str):
            stdout_truncated (bool):
            timed_out (bool):
            exit_code (int | None | Unset):
            signal (int | None | Unset):
            stderr_base64 (None | str | Unset):
            stdout_base64 (None | str | Unset):
    """

    duration_ms: int
    stderr: str
    stderr_truncated: bool
    stdout: str
    stdout_truncated: bool
    timed_out: bool
    exit_code: int | None | Unset = UNSET
    signal: int | None | Unset = UNSET
    stderr_base64: None | str | Unset = UNSET
    stdout_base64: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        duration_ms = self.duration_ms

        stderr = self.stderr

        stderr_truncated = self.stderr_truncated

        stdout = self.stdout

        stdout_truncated = self.stdout_truncated

        timed_out = self.timed_out

        exit_code: int | None | Unset
        if isinstance(self.exit_code, Unset):
            exit_code = UNSET
        else:
            exit_code = self.exit_code

        signal: int | None | Unset
        if isinstance(self.signal, Unset):
            signal = UNSET
        else:
            signal = self.signal

        stderr_base64: None | str | Unset
        if isinstance(self.stderr_base64, Unset):
            stderr_base64 = UNSET
        else:
            stderr_base64 = self.stderr_base64

        stdout_base64: None | str | Unset
        if isinstance(self.stdout_base64, Unset):
            stdout_base64 = UNSET
        else:
            stdout_base64 = self.stdout_base64

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "duration_ms": duration_ms,
                "stderr": stderr,
                "stderr_truncated": stderr_truncated,
                "stdout": stdout,
                "stdout_truncated": stdout_truncated,
                "timed_out": timed_out,
            }
        )
        if exit_code is not UNSET:
            field_dict["exit_code"] = exit_code
        if signal is not UNSET:
            field_dict["signal"] = signal
        if stderr_base64 is not UNSET:
            field_dict["stderr_base64"] = stderr_base64
        if stdout_base64 is not UNSET:
            field_dict["stdout_base64"] = stdout_base64

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        duration_ms = d.pop("duration_ms")

        stderr = d.pop("stderr")

        stderr_truncated = d.pop("stderr_truncated")

        stdout = d.pop("stdout")

        stdout_truncated = d.pop("stdout_truncated")

        timed_out = d.pop("timed_out")

        def _parse_exit_code(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        exit_code = _parse_exit_code(d.pop("exit_code", UNSET))

        def _parse_signal(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        signal = _parse_signal(d.pop("signal", UNSET))

        def _parse_stderr_base64(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        stderr_base64 = _parse_stderr_base64(d.pop("stderr_base64", UNSET))

        def _parse_stdout_base64(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        stdout_base64 = _parse_stdout_base64(d.pop("stdout_base64", UNSET))

        exec_result = cls(
            duration_ms=duration_ms,
            stderr=stderr,
            stderr_truncated=stderr_truncated,
            stdout=stdout,
            stdout_truncated=stdout_truncated,
            timed_out=timed_out,
            exit_code=exit_code,
            signal=signal,
            stderr_base64=stderr_base64,
            stdout_base64=stdout_base64,
        )

        exec_result.additional_properties = d
        return exec_result

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
