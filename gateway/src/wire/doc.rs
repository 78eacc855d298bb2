//! Shapes the OpenAPI document names that no handler parses or writes as a
//! type: the error body, the computer-use action (its parser is written by
//! hand), and the sets of error answers operations share in their
//! annotations ([`NoWorkspace`], [`Lifecycle`], [`InGuest`], [`Held`],
//! [`TooLarge`]). The document itself is assembled in [`crate::openapi`].

use std::collections::BTreeMap;

use serde_json::Value;
use utoipa::openapi::{ContentBuilder, Ref, RefOr, Response, ResponseBuilder};
use utoipa::{IntoResponses, ToSchema};

/// `{"error": {"code", "message"}}`: every error, with a 4xx for input the
/// caller chose.
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct ErrorBody {
    error: ErrorDetail,
}

#[derive(ToSchema)]
#[allow(dead_code)]
pub struct ErrorDetail {
    /// Machine-readable: `bad_request`, `unauthorized`, `forbidden`,
    /// `not_found`, `conflict`, `start_failed`, ...
    code: String,
    /// What failed, with which input, and what to do.
    message: String,
}

/// One computer-use action, in Anthropic's form (`action`: key, hold_key,
/// type, cursor_position, mouse_move, left_click, right_click,
/// middle_click, double_click, triple_click, left_mouse_down,
/// left_mouse_up, left_click_drag, scroll, wait, screenshot, zoom) or
/// OpenAI CUA's (`type`: click, double_click, scroll, keypress, type, wait,
/// screenshot, move, drag). Or `{"actions": [...]}` for a batch (1..=100)
/// run in order, stopping at the first error.
///
/// `action` and `type` list the parser's own names ([`ActionNames`] fills
/// them in from `crate::actions::parse`); which other fields an action
/// needs depends on the action (a click its `coordinate`, `type` its
/// `text`), which this schema does not spell out per action.
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct ActionRequest {
    action: Option<String>,
    r#type: Option<String>,
    /// `[x, y]` in screen pixels, or in the space of the last scaled screenshot.
    #[schema(min_items = 2, max_items = 2)]
    coordinate: Option<Vec<i64>>,
    #[schema(min_items = 2, max_items = 2)]
    start_coordinate: Option<Vec<i64>>,
    /// Text to type, xdotool key combination (`ctrl+shift+t`), or modifiers
    /// held during a click or scroll.
    text: Option<String>,
    /// Seconds (0..=60) for `wait` and `hold_key`.
    #[schema(minimum = 0, maximum = 60)]
    duration: Option<f64>,
    /// `up`, `down`, `left`, `right`.
    #[schema(value_type = Option<ScrollDirection>)]
    scroll_direction: Option<String>,
    #[schema(minimum = 1, maximum = 100)]
    scroll_amount: Option<u32>,
    /// `[x0, y0, x1, y1]` for `zoom`.
    #[schema(min_items = 4, max_items = 4)]
    region: Option<Vec<i64>>,
    /// Screenshot: `png` (default) or `jpeg`, with `quality` 1..=100.
    #[schema(value_type = Option<ImageFormat>)]
    format: Option<String>,
    #[schema(minimum = 1, maximum = 100)]
    quality: Option<u8>,
    /// Screenshot scaled to this size (both, or neither); later
    /// coordinates are in it.
    #[schema(minimum = 16, maximum = 7680)]
    width: Option<u32>,
    #[schema(minimum = 16, maximum = 7680)]
    height: Option<u32>,
    /// A batch: 1..=100 actions run in order.
    #[schema(min_items = 1, max_items = 100)]
    actions: Option<Vec<Value>>,
}

/// A screenshot's image format.
#[derive(ToSchema)]
#[schema(rename_all = "lowercase")]
#[allow(dead_code)]
pub enum ImageFormat {
    Png,
    Jpeg,
    Jpg,
}

/// Which way a scroll goes.
#[derive(ToSchema)]
#[schema(rename_all = "lowercase")]
#[allow(dead_code)]
pub enum ScrollDirection {
    Up,
    Down,
    Left,
    Right,
}

/// `{"result": ...}` for one action, `{"results": [...]}` for a batch. An
/// image result is `{"type": "image", "media_type", "width", "height", "data"}`
/// (base64).
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct ActionResponse {
    result: Option<Value>,
    results: Option<Vec<Value>>,
}

/// An answer with an [`ErrorBody`].
fn error_answer(description: &str) -> RefOr<Response> {
    let content = ContentBuilder::new()
        .schema(Some(Ref::from_schema_name("ErrorBody")))
        .build();
    ResponseBuilder::new()
        .description(description)
        .content("application/json", content)
        .build()
        .into()
}

/// A set of error answers several operations share, for their annotations'
/// `responses(...)` (a status the annotation also lists after it keeps
/// the annotation's description).
macro_rules! error_answers {
    ($(#[$doc:meta])* $name:ident { $($status:literal => $description:literal,)+ }) => {
        $(#[$doc])*
        pub struct $name;

        impl IntoResponses for $name {
            fn responses() -> BTreeMap<String, RefOr<Response>> {
                [$(($status.to_owned(), error_answer($description))),+].into_iter().collect()
            }
        }
    };
}

error_answers!(
    /// What any request can be refused for, by the token check every
    /// operation starts with (added to every operation by [`CallerRefusals`]).
    Refused {
        "400" => "A query parameter (such as `wait`) or a body this operation cannot take; the message names it",
        "401" => "No token, or one that is not valid or was revoked",
        "403" => "The token's role may not do this, or a cookie-authenticated request came from another origin",
    }
);

error_answers!(
    /// A workspace named by the path that the caller cannot reach.
    NoWorkspace {
        "404" => "No such workspace, or one outside the token's scope",
    }
);

error_answers!(
    /// A lifecycle change (start, stop, pause, resume, delete).
    Lifecycle {
        "404" => "No such workspace, or one outside the token's scope",
        "409" => "Not in a state this change applies to, or another lifecycle change on it is in progress",
    }
);

error_answers!(
    /// An operation carried out inside a running workspace (its guest,
    /// display or browser).
    InGuest {
        "404" => "No such workspace (or outside the token's scope), or no such path in it",
        "409" => "Not running, paused (`paused`), or an operator holds control (`control_held`)",
        "502" => "The workspace did not answer or failed to (`guest_unreachable`, `guest_error`, `display_unavailable`)",
        "504" => "The workspace did not answer in time (`guest_timeout`)",
    }
);

error_answers!(
    /// A change the workspace's policy may hold for an operator's approval.
    Held {
        "202" => "Held for an operator's approval (`held`), with `approval` {id, url, expires_at, reason, rule}: wait at its url, then send the same request again; a denied or expired approval, or a policy's deny, is a 403",
        "429" => "Too many approvals of this caller are pending (`too_many_pending`)",
    }
);

error_answers!(
    /// A body over the operation's limit.
    TooLarge {
        "413" => "Over the size limit (`too_large`)",
    }
);
