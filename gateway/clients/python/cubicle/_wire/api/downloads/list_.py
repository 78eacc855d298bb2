from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.download_list import DownloadList
from ...models.download_state_filter import (
    DownloadStateFilter,
)
from ...models.error_body import ErrorBody
from ...types import UNSET, Response, Unset


def _get_kwargs(
    *,
    workspace: str | Unset = UNSET,
    state: DownloadStateFilter | Unset = UNSET,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    params["workspace"] = workspace

    json_state: str | Unset = UNSET
    if not isinstance(state, Unset):
        json_state = state

    params["state"] = json_state

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/v1/downloads",
        "params": params,
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> DownloadList | ErrorBody | None:
    if response.status_code == 200:
        response_200 = DownloadList.from_dict(response.json())

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

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[DownloadList | ErrorBody]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient | Client,
    workspace: str | Unset = UNSET,
    state: DownloadStateFilter | Unset = UNSET,
) -> Response[DownloadList | ErrorBody]:
    """
    Args:
        workspace (str | Unset):
        state (DownloadStateFilter | Unset): Which downloads `GET /v1/downloads?state=` lists.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[DownloadList | ErrorBody]
    """

    kwargs = _get_kwargs(
        workspace=workspace,
        state=state,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient | Client,
    workspace: str | Unset = UNSET,
    state: DownloadStateFilter | Unset = UNSET,
) -> DownloadList | ErrorBody | None:
    """
    Args:
        workspace (str | Unset):
        state (DownloadStateFilter | Unset): Which downloads `GET /v1/downloads?state=` lists.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        DownloadList | ErrorBody
    """

    return sync_detailed(
        client=client,
        workspace=workspace,
        state=state,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient | Client,
    workspace: str | Unset = UNSET,
    state: DownloadStateFilter | Unset = UNSET,
) -> Response[DownloadList | ErrorBody]:
    """
    Args:
        workspace (str | Unset):
        state (DownloadStateFilter | Unset): Which downloads `GET /v1/downloads?state=` lists.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[DownloadList | ErrorBody]
    """

    kwargs = _get_kwargs(
        workspace=workspace,
        state=state,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient | Client,
    workspace: str | Unset = UNSET,
    state: DownloadStateFilter | Unset = UNSET,
) -> DownloadList | ErrorBody | None:
    """
    Args:
        workspace (str | Unset):
        state (DownloadStateFilter | Unset): Which downloads `GET /v1/downloads?state=` lists.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        DownloadList | ErrorBody
    """

    return (
        await asyncio_detailed(
            client=client,
            workspace=workspace,
            state=state,
        )
    ).parsed
