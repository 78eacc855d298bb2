from http import HTTPStatus
from typing import Any, cast
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error_body import ErrorBody
from ...types import UNSET, Response, Unset


def _get_kwargs(
    id: str,
    *,
    path: str,
    offset: int | Unset = UNSET,
    length: int | Unset = UNSET,
    list_: bool | Unset = UNSET,
    stat: bool | Unset = UNSET,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    params["path"] = path

    params["offset"] = offset

    params["length"] = length

    params["list"] = list_

    params["stat"] = stat

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/v1/workspaces/{id}/files".format(
            id=quote(str(id), safe=""),
        ),
        "params": params,
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> ErrorBody | list[int] | None:
    if response.status_code == 200:
        response_200 = cast(list[int], response.content)

        return response_200

    if response.status_code == 400:
        response_400 = ErrorBody.from_dict(response.json())

        return response_400

    if response.status_code == 401:
        response_401 = ErrorBody.from_dict(response.json())

        return response_401

    if response.status_code == 403:
        response_403 = ErrorBody.from_dict(response.json())

        return response_403

    if response.status_code == 404:
        response_404 = ErrorBody.from_dict(response.json())

        return response_404

    if response.status_code == 409:
        response_409 = ErrorBody.from_dict(response.json())

        return response_409

    if response.status_code == 413:
        response_413 = ErrorBody.from_dict(response.json())

        return response_413

    if response.status_code == 502:
        response_502 = ErrorBody.from_dict(response.json())

        return response_502

    if response.status_code == 504:
        response_504 = ErrorBody.from_dict(response.json())

        return response_504

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[ErrorBody | list[int]]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    id: str,
    *,
    client: AuthenticatedClient | Client,
    path: str,
    offset: int | Unset = UNSET,
    length: int | Unset = UNSET,
    list_: bool | Unset = UNSET,
    stat: bool | Unset = UNSET,
) -> Response[ErrorBody | list[int]]:
    """`GET .../files`: read, or list / stat with `list=true` / `stat=true`.

    Args:
        id (str):
        path (str):
        offset (int | Unset):
        length (int | Unset):
        list_ (bool | Unset):
        stat (bool | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | list[int]]
    """

    kwargs = _get_kwargs(
        id=id,
        path=path,
        offset=offset,
        length=length,
        list_=list_,
        stat=stat,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    id: str,
    *,
    client: AuthenticatedClient | Client,
    path: str,
    offset: int | Unset = UNSET,
    length: int | Unset = UNSET,
    list_: bool | Unset = UNSET,
    stat: bool | Unset = UNSET,
) -> ErrorBody | list[int] | None:
    """`GET .../files`: read, or list / stat with `list=true` / `stat=true`.

    Args:
        id (str):
        path (str):
        offset (int | Unset):
        length (int | Unset):
        list_ (bool | Unset):
        stat (bool | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | list[int]
    """

    return sync_detailed(
        id=id,
        client=client,
        path=path,
        offset=offset,
        length=length,
        list_=list_,
        stat=stat,
    ).parsed


async def asyncio_detailed(
    id: str,
    *,
    client: AuthenticatedClient | Client,
    path: str,
    offset: int | Unset = UNSET,
    length: int | Unset = UNSET,
    list_: bool | Unset = UNSET,
    stat: bool | Unset = UNSET,
) -> Response[ErrorBody | list[int]]:
    """`GET .../files`: read, or list / stat with `list=true` / `stat=true`.

    Args:
        id (str):
        path (str):
        offset (int | Unset):
        length (int | Unset):
        list_ (bool | Unset):
        stat (bool | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | list[int]]
    """

    kwargs = _get_kwargs(
        id=id,
        path=path,
        offset=offset,
        length=length,
        list_=list_,
        stat=stat,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    id: str,
    *,
    client: AuthenticatedClient | Client,
    path: str,
    offset: int | Unset = UNSET,
    length: int | Unset = UNSET,
    list_: bool | Unset = UNSET,
    stat: bool | Unset = UNSET,
) -> ErrorBody | list[int] | None:
    """`GET .../files`: read, or list / stat with `list=true` / `stat=true`.

    Args:
        id (str):
        path (str):
        offset (int | Unset):
        length (int | Unset):
        list_ (bool | Unset):
        stat (bool | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | list[int]
    """

    return (
        await asyncio_detailed(
            id=id,
            client=client,
            path=path,
            offset=offset,
            length=length,
            list_=list_,
            stat=stat,
        )
    ).parsed
