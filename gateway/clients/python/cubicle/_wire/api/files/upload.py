from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error_body import ErrorBody
from ...models.uploaded import Uploaded
from ...types import UNSET, Response, Unset


def _get_kwargs(
    id: str,
    *,
    body: list[int],
    name: str | Unset = UNSET,
    download: str | Unset = UNSET,
    selector: str | Unset = UNSET,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    params: dict[str, Any] = {}

    params["name"] = name

    params["download"] = download

    params["selector"] = selector

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/workspaces/{id}/upload".format(
            id=quote(str(id), safe=""),
        ),
        "params": params,
    }

    _kwargs["content"] = body.payload
    headers["Content-Type"] = "application/octet-stream"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> ErrorBody | Uploaded | None:
    if response.status_code == 200:
        response_200 = Uploaded.from_dict(response.json())

        return response_200

    if response.status_code == 202:
        response_202 = ErrorBody.from_dict(response.json())

        return response_202

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

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[ErrorBody | Uploaded]:
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
    body: list[int],
    name: str | Unset = UNSET,
    download: str | Unset = UNSET,
    selector: str | Unset = UNSET,
) -> Response[ErrorBody | Uploaded]:
    """
    Args:
        id (str):
        name (str | Unset):
        download (str | Unset):
        selector (str | Unset):
        body (list[int]):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | Uploaded]
    """

    kwargs = _get_kwargs(
        id=id,
        body=body,
        name=name,
        download=download,
        selector=selector,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    id: str,
    *,
    client: AuthenticatedClient | Client,
    body: list[int],
    name: str | Unset = UNSET,
    download: str | Unset = UNSET,
    selector: str | Unset = UNSET,
) -> ErrorBody | Uploaded | None:
    """
    Args:
        id (str):
        name (str | Unset):
        download (str | Unset):
        selector (str | Unset):
        body (list[int]):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | Uploaded
    """

    return sync_detailed(
        id=id,
        client=client,
        body=body,
        name=name,
        download=download,
        selector=selector,
    ).parsed


async def asyncio_detailed(
    id: str,
    *,
    client: AuthenticatedClient | Client,
    body: list[int],
    name: str | Unset = UNSET,
    download: str | Unset = UNSET,
    selector: str | Unset = UNSET,
) -> Response[ErrorBody | Uploaded]:
    """
    Args:
        id (str):
        name (str | Unset):
        download (str | Unset):
        selector (str | Unset):
        body (list[int]):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | Uploaded]
    """

    kwargs = _get_kwargs(
        id=id,
        body=body,
        name=name,
        download=download,
        selector=selector,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    id: str,
    *,
    client: AuthenticatedClient | Client,
    body: list[int],
    name: str | Unset = UNSET,
    download: str | Unset = UNSET,
    selector: str | Unset = UNSET,
) -> ErrorBody | Uploaded | None:
    """
    Args:
        id (str):
        name (str | Unset):
        download (str | Unset):
        selector (str | Unset):
        body (list[int]):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | Uploaded
    """

    return (
        await asyncio_detailed(
            id=id,
            client=client,
            body=body,
            name=name,
            download=download,
            selector=selector,
        )
    ).parsed
