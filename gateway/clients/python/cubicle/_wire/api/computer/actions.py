from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.action_request import ActionRequest
from ...models.action_response import ActionResponse
from ...models.error_body import ErrorBody
from ...types import Response


def _get_kwargs(
    id: str,
    *,
    body: ActionRequest,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/workspaces/{id}/actions".format(
            id=quote(str(id), safe=""),
        ),
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> ActionResponse | ErrorBody | None:
    if response.status_code == 200:
        response_200 = ActionResponse.from_dict(response.json())

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

    if response.status_code == 429:
        response_429 = ErrorBody.from_dict(response.json())

        return response_429

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
) -> Response[ActionResponse | ErrorBody]:
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
    body: ActionRequest,
) -> Response[ActionResponse | ErrorBody]:
    """
    Args:
        id (str):
        body (ActionRequest): One computer-use action, in Anthropic's form (`action`: key,
            hold_key,
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

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ActionResponse | ErrorBody]
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
    body: ActionRequest,
) -> ActionResponse | ErrorBody | None:
    """
    Args:
        id (str):
        body (ActionRequest): One computer-use action, in Anthropic's form (`action`: key,
            hold_key,
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

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ActionResponse | ErrorBody
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
    body: ActionRequest,
) -> Response[ActionResponse | ErrorBody]:
    """
    Args:
        id (str):
        body (ActionRequest): One computer-use action, in Anthropic's form (`action`: key,
            hold_key,
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

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ActionResponse | ErrorBody]
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
    body: ActionRequest,
) -> ActionResponse | ErrorBody | None:
    """
    Args:
        id (str):
        body (ActionRequest): One computer-use action, in Anthropic's form (`action`: key,
            hold_key,
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

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ActionResponse | ErrorBody
    """

    return (
        await asyncio_detailed(
            id=id,
            client=client,
            body=body,
        )
    ).parsed
