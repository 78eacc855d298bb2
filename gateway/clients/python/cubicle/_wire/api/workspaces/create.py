from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.create_workspace import CreateWorkspace
from ...models.created_many import CreatedMany
from ...models.error_body import ErrorBody
from ...models.workspace_view import WorkspaceView
from ...types import Response


def _get_kwargs(
    *,
    body: CreateWorkspace,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/workspaces",
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> CreatedMany | WorkspaceView | ErrorBody | None:
    if response.status_code == 201:

        def _parse_response_201(data: object) -> CreatedMany | WorkspaceView:
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                componentsschemas_created_type_0 = WorkspaceView.from_dict(data)

                return componentsschemas_created_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            if not isinstance(data, dict):
                raise TypeError()
            componentsschemas_created_type_1 = CreatedMany.from_dict(data)

            return componentsschemas_created_type_1

        response_201 = _parse_response_201(response.json())

        return response_201

    if response.status_code == 400:
        response_400 = ErrorBody.from_dict(response.json())

        return response_400

    if response.status_code == 401:
        response_401 = ErrorBody.from_dict(response.json())

        return response_401

    if response.status_code == 403:
        response_403 = ErrorBody.from_dict(response.json())

        return response_403

    if response.status_code == 413:
        response_413 = ErrorBody.from_dict(response.json())

        return response_413

    if response.status_code == 502:
        response_502 = ErrorBody.from_dict(response.json())

        return response_502

    if response.status_code == 503:
        response_503 = ErrorBody.from_dict(response.json())

        return response_503

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[CreatedMany | WorkspaceView | ErrorBody]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient | Client,
    body: CreateWorkspace,
) -> Response[CreatedMany | WorkspaceView | ErrorBody]:
    """
    Args:
        body (CreateWorkspace): Body of `POST /v1/workspaces` (may be empty: all defaults).

            `egress`, `policy`, `time_limits`, `record` and `limits` are the
            workspace's guard rails. An agent gets the server's defaults (or those of
            the `template` it names) and may ask only for narrower ones: an egress
            each of whose rules a default rule covers, less memory, a shorter TTL,
            the default policy, recording on. Anything wider is a 403 naming the
            field; operators and admins may choose them.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[CreatedMany | WorkspaceView | ErrorBody]
    """

    kwargs = _get_kwargs(
        body=body,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient | Client,
    body: CreateWorkspace,
) -> CreatedMany | WorkspaceView | ErrorBody | None:
    """
    Args:
        body (CreateWorkspace): Body of `POST /v1/workspaces` (may be empty: all defaults).

            `egress`, `policy`, `time_limits`, `record` and `limits` are the
            workspace's guard rails. An agent gets the server's defaults (or those of
            the `template` it names) and may ask only for narrower ones: an egress
            each of whose rules a default rule covers, less memory, a shorter TTL,
            the default policy, recording on. Anything wider is a 403 naming the
            field; operators and admins may choose them.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        CreatedMany | WorkspaceView | ErrorBody
    """

    return sync_detailed(
        client=client,
        body=body,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient | Client,
    body: CreateWorkspace,
) -> Response[CreatedMany | WorkspaceView | ErrorBody]:
    """
    Args:
        body (CreateWorkspace): Body of `POST /v1/workspaces` (may be empty: all defaults).

            `egress`, `policy`, `time_limits`, `record` and `limits` are the
            workspace's guard rails. An agent gets the server's defaults (or those of
            the `template` it names) and may ask only for narrower ones: an egress
            each of whose rules a default rule covers, less memory, a shorter TTL,
            the default policy, recording on. Anything wider is a 403 naming the
            field; operators and admins may choose them.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[CreatedMany | WorkspaceView | ErrorBody]
    """

    kwargs = _get_kwargs(
        body=body,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient | Client,
    body: CreateWorkspace,
) -> CreatedMany | WorkspaceView | ErrorBody | None:
    """
    Args:
        body (CreateWorkspace): Body of `POST /v1/workspaces` (may be empty: all defaults).

            `egress`, `policy`, `time_limits`, `record` and `limits` are the
            workspace's guard rails. An agent gets the server's defaults (or those of
            the `template` it names) and may ask only for narrower ones: an egress
            each of whose rules a default rule covers, less memory, a shorter TTL,
            the default policy, recording on. Anything wider is a 403 naming the
            field; operators and admins may choose them.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        CreatedMany | WorkspaceView | ErrorBody
    """

    return (
        await asyncio_detailed(
            client=client,
            body=body,
        )
    ).parsed
