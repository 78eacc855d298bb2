from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.exec_body_env import ExecBodyEnv


T = TypeVar("T", bound="ExecBody")


@_attrs_define
class ExecBody:
    """A command to run as the workspace user: `argv`, or `command` (a shell
    line run by `/bin/bash -lc`).

        Attributes:
            argv (list[str] | Unset): The program and its arguments.
            command (None | str | Unset): A shell line, run by `/bin/bash -lc`.
            cwd (None | str | Unset): Absolute working directory; the home by default.
            env (ExecBodyEnv | Unset): Added to the session's environment.
            stdin (None | str | Unset): Text for stdin.
            stdin_base64 (None | str | Unset): Bytes for stdin, base64.
            timeout_ms (int | None | Unset): 1..=600000 milliseconds, default 30000; the process group is killed after it.
    """

    argv: list[str] | Unset = UNSET
    command: None | str | Unset = UNSET
    cwd: None | str | Unset = UNSET
    env: ExecBodyEnv | Unset = UNSET
    stdin: None | str | Unset = UNSET
    stdin_base64: None | str | Unset = UNSET
    timeout_ms: int | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        argv: list[str] | Unset = UNSET
        if not isinstance(self.argv, Unset):
            argv = self.argv

        command: None | str | Unset
        if isinstance(self.command, Unset):
            command = UNSET
        else:
            command = self.command

        cwd: None | str | Unset
        if isinstance(self.cwd, Unset):
            cwd = UNSET
        else:
            cwd = self.cwd

        env: dict[str, Any] | Unset = UNSET
        if not isinstance(self.env, Unset):
            env = self.env.to_dict()

        stdin: None | str | Unset
        if isinstance(self.stdin, Unset):
            stdin = UNSET
        else:
            stdin = self.stdin

        stdin_base64: None | str | Unset
        if isinstance(self.stdin_base64, Unset):
            stdin_base64 = UNSET
        else:
            stdin_base64 = self.stdin_base64

        timeout_ms: int | None | Unset
        if isinstance(self.timeout_ms, Unset):
            timeout_ms = UNSET
        else:
            timeout_ms = self.timeout_ms

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if argv is not UNSET:
            field_dict["argv"] = argv
        if command is not UNSET:
            field_dict["command"] = command
        if cwd is not UNSET:
            field_dict["cwd"] = cwd
        if env is not UNSET:
            field_dict["env"] = env
        if stdin is not UNSET:
            field_dict["stdin"] = stdin
        if stdin_base64 is not UNSET:
            field_dict["stdin_base64"] = stdin_base64
        if timeout_ms is not UNSET:
            field_dict["timeout_ms"] = timeout_ms

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.exec_body_env import ExecBodyEnv

        d = dict(src_dict)
        argv = cast(list[str], d.pop("argv", UNSET))

        def _parse_command(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        command = _parse_command(d.pop("command", UNSET))

        def _parse_cwd(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        cwd = _parse_cwd(d.pop("cwd", UNSET))

        _env = d.pop("env", UNSET)
        env: ExecBodyEnv | Unset
        if isinstance(_env, Unset):
            env = UNSET
        else:
            env = ExecBodyEnv.from_dict(_env)

        def _parse_stdin(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        stdin = _parse_stdin(d.pop("stdin", UNSET))

        def _parse_stdin_base64(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        stdin_base64 = _parse_stdin_base64(d.pop("stdin_base64", UNSET))

        def _parse_timeout_ms(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        timeout_ms = _parse_timeout_ms(d.pop("timeout_ms", UNSET))

        exec_body = cls(
            argv=argv,
            command=command,
            cwd=cwd,
            env=env,
            stdin=stdin,
            stdin_base64=stdin_base64,
            timeout_ms=timeout_ms,
        )

        return exec_body
