from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.egress_body import EgressBody
from ...models.egress_view import EgressView
from ...models.error_body import ErrorBody
from ...types import Response


def _get_kwargs(
    id: str,
    *,
    body: EgressBody,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "put",
        "url": "/v1/workspaces/{id}/egress".format(
            id=quote(str(id), safe=""),
        ),
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> EgressView | ErrorBody | None:
    if response.status_code == 200:
        response_200 = EgressView.from_dict(response.json())

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

    if response.status_code == 413:
        response_413 = ErrorBody.from_dict(response.json())

        return response_413

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[EgressView | ErrorBody]:
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
    body: EgressBody,
) -> Response[EgressView | ErrorBody]:
    """
    Args:
        id (str):
        body (EgressBody): What a workspace may reach. Default: nothing.

            Allow rules: `example.org` (ports 80 and 443), `*.example.org:443`
            (names below it), `api.example.org:8000-8100,9000`,
            `203.0.113.0/24:*`, `127.0.0.1/32:8443`, `[fd00::/8]:443`. Loopback,
            private, link-local (cloud metadata), CGNAT, unique-local, multicast and
            IPv4-mapped addresses are refused after resolution unless a network
            rule inside that range names them.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[EgressView | ErrorBody]
    """

    kwargs = _get_kwargs(
        id=id,
        body=body,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    id: str,
    *,
    client: AuthenticatedClient | Client,
    body: EgressBody,
) -> EgressView | ErrorBody | None:
    """
    Args:
        id (str):
        body (EgressBody): What a workspace may reach. Default: nothing.

            Allow rules: `example.org` (ports 80 and 443), `*.example.org:443`
            (names below it), `api.example.org:8000-8100,9000`,
            `203.0.113.0/24:*`, `127.0.0.1/32:8443`, `[fd00::/8]:443`. Loopback,
            private, link-local (cloud metadata), CGNAT, unique-local, multicast and
            IPv4-mapped addresses are refused after resolution unless a network
            rule inside that range names them.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        EgressView | ErrorBody
    """

    return sync_detailed(
        id=id,
        client=client,
        body=body,
    ).parsed


async def asyncio_detailed(
    id: str,
    *,
    client: AuthenticatedClient | Client,
    body: EgressBody,
) -> Response[EgressView | ErrorBody]:
    """
    Args:
        id (str):
        body (EgressBody): What a workspace may reach. Default: nothing.

            Allow rules: `example.org` (ports 80 and 443), `*.example.org:443`
            (names below it), `api.example.org:8000-8100,9000`,
            `203.0.113.0/24:*`, `127.0.0.1/32:8443`, `[fd00::/8]:443`. Loopback,
            private, link-local (cloud metadata), CGNAT, unique-local, multicast and
            IPv4-mapped addresses are refused after resolution unless a network
            rule inside that range names them.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[EgressView | ErrorBody]
    """

    kwargs = _get_kwargs(
        id=id,
        body=body,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    id: str,
    *,
    client: AuthenticatedClient | Client,
    body: EgressBody,
) -> EgressView | ErrorBody | None:
    """
    Args:
        id (str):
        body (EgressBody): What a workspace may reach. Default: nothing.

            Allow rules: `example.org` (ports 80 and 443), `*.example.org:443`
            (names below it), `api.example.org:8000-8100,9000`,
            `203.0.113.0/24:*`, `127.0.0.1/32:8443`, `[fd00::/8]:443`. Loopback,
            private, link-local (cloud metadata), CGNAT, unique-local, multicast and
            IPv4-mapped addresses are refused after resolution unless a network
            rule inside that range names them.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        EgressView | ErrorBody
    """

    return (
        await asyncio_detailed(
            id=id,
            client=client,
            body=body,
        )
    ).parsed
