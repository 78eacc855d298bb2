//! The computer-use action vocabulary: Anthropic's computer-use tool names
//! (and OpenAI CUA's where they differ), parsed and validated at the edge
//! ([`parse`]), then run as RFB pointer and key events ([`run`]).

pub mod keys;
pub mod parse;
pub mod run;

use std::time::Duration;

pub use parse::{FieldError, parse_action};

/// Longest text one `type` action may carry.
pub const MAX_TEXT: usize = 10_000;
/// Longest `wait` or `hold_key`.
pub const MAX_DURATION: Duration = Duration::from_secs(60);
/// Most wheel clicks one `scroll` may send.
pub const MAX_SCROLL: u32 = 100;
/// Most points a `drag` path may have.
pub const MAX_PATH: usize = 100;
/// Most actions in one batch.
pub const MAX_BATCH: usize = 100;

/// A point in the agent's coordinate space (mapped to the screen when run).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Point {
    pub x: i64,
    pub y: i64,
    /// Where it came from in the request, for error messages.
    pub field: &'static str,
}

/// A mouse button.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Button {
    Left,
    Middle,
    Right,
}

impl Button {
    /// The RFB button-mask bit.
    pub fn mask(self) -> u8 {
        match self {
            Self::Left => 1,
            Self::Middle => 2,
            Self::Right => 4,
        }
    }
}

/// Screenshot encoding as requested.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageRequest {
    pub format: crate::screen::image_out::Format,
    /// Scale to this size; later coordinates are then in this space.
    pub size: Option<(u32, u32)>,
}

/// One validated action.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Combinations pressed one after another.
    Key(Vec<Vec<u32>>),
    HoldKey(Vec<u32>, Duration),
    Type(Vec<u32>),
    CursorPosition,
    MouseMove(Point),
    Click {
        button: Button,
        at: Option<Point>,
        count: u8,
        modifiers: Vec<u32>,
    },
    MouseDown(Button),
    MouseUp(Button),
    /// Press at the first point, move through the rest, release at the last.
    Drag(Vec<Point>),
    Scroll {
        at: Option<Point>,
        /// Wheel clicks: positive is right / down.
        dx: i32,
        dy: i32,
        modifiers: Vec<u32>,
    },
    Wait(Duration),
    Screenshot(ImageRequest),
    /// A region (x0, y0, x1, y1) returned at full resolution.
    Zoom(Point, Point, ImageRequest),
}

impl Action {
    /// Whether the action sends input (and so needs the control of the
    /// workspace), as opposed to only looking at it.
    pub fn is_input(&self) -> bool {
        !matches!(
            self,
            Self::CursorPosition | Self::Wait(_) | Self::Screenshot(_) | Self::Zoom(..)
        )
    }
}
