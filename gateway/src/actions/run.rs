//! Running validated actions as RFB input on a workspace's screen session.

use std::time::Duration;

use base64::Engine;
use serde_json::{Value, json};

use super::parse::FieldError;
use super::{Action, Button, ImageRequest, Point};
use crate::screen::ScreenSession;
use crate::screen::image_out::{self, EncodeError};

/// Pause between the clicks of a double or triple click (well under the
/// desktop's double-click time).
const CLICK_GAP: Duration = Duration::from_millis(80);
/// Characters sent per chunk while typing, and the pause between chunks, so
/// slow X clients keep up.
const TYPE_CHUNK: usize = 32;
const TYPE_PAUSE: Duration = Duration::from_millis(15);
/// Longest wait, after a shortcut, for the screen to show it was handled.
const SHORTCUT_SETTLE: Duration = Duration::from_millis(200);
/// Steps of the pointer between two points of a drag.
const DRAG_STEPS: u32 = 8;
/// How long a drag rests on each point of its path.
const VERTEX_DWELL: Duration = Duration::from_millis(60);

/// What can go wrong running an action.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Field(#[from] FieldError),
    #[error(transparent)]
    Screen(#[from] crate::screen::ScreenError),
    #[error(transparent)]
    Encode(#[from] EncodeError),
}

/// Runs one action; returns its result as JSON.
pub async fn run(session: &ScreenSession, action: &Action) -> Result<Value, RunError> {
    match action {
        Action::Key(combos) => {
            for combo in combos {
                press_combo(session, combo).await?;
            }
        }
        Action::HoldKey(keys, duration) => {
            hold(session, keys, true).await?;
            tokio::time::sleep(*duration).await;
            hold(session, keys, false).await?;
        }
        Action::Type(keysyms) => type_text(session, keysyms).await?,
        Action::CursorPosition => return Ok(cursor(session)),
        Action::MouseMove(to) => move_to(session, *to).await?,
        Action::Click {
            button,
            at,
            count,
            modifiers,
        } => click(session, *button, *at, *count, modifiers).await?,
        Action::MouseDown(button) => set_button(session, *button, true).await?,
        Action::MouseUp(button) => set_button(session, *button, false).await?,
        Action::Drag(path) => drag(session, path).await?,
        Action::Scroll {
            at,
            dx,
            dy,
            modifiers,
        } => scroll(session, *at, *dx, *dy, modifiers).await?,
        Action::Wait(duration) => tokio::time::sleep(*duration).await,
        Action::Screenshot(request) => return screenshot(session, *request),
        Action::Zoom(a, b, request) => return zoom(session, *a, *b, *request),
    }
    Ok(json!({ "ok": true }))
}

/// The agent's coordinate space: the size of its last scaled screenshot, or
/// the screen.
fn space(session: &ScreenSession) -> (u32, u32) {
    let screen = session.size();
    session
        .coordinate_space
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .unwrap_or(screen)
}

/// Maps a point from the agent's space to the screen, refusing off-screen ones.
pub fn to_screen(session: &ScreenSession, point: Point) -> Result<(u16, u16), FieldError> {
    let (sw, sh) = space(session);
    let (w, h) = session.size();
    if point.x < 0 || point.y < 0 || point.x >= i64::from(sw) || point.y >= i64::from(sh) {
        let scaled = if (sw, sh) == (w, h) {
            String::new()
        } else {
            format!(" (coordinates are in the {sw}x{sh} space of your last scaled screenshot)")
        };
        return Err(FieldError::new(
            point.field,
            format!(
                "[{}, {}] is outside the screen: x must be 0..{sw}, y 0..{sh}{scaled}",
                point.x, point.y
            ),
        ));
    }
    let x = point.x * i64::from(w) / i64::from(sw);
    let y = point.y * i64::from(h) / i64::from(sh);
    Ok((
        u16::try_from(x).unwrap_or(u16::MAX),
        u16::try_from(y).unwrap_or(u16::MAX),
    ))
}

fn cursor(session: &ScreenSession) -> Value {
    let pointer = session.pointer();
    let (sw, sh) = space(session);
    let (w, h) = session.size();
    let x = u32::from(pointer.x) * sw / w.max(1);
    let y = u32::from(pointer.y) * sh / h.max(1);
    json!({ "coordinate": [x, y] })
}

/// Presses and releases `combo`. A shortcut (a combo with Ctrl, Alt, Super
/// or Meta) usually moves the focus or opens something, and the
/// application handles it on its own time: keys sent before it has land in
/// the old focus (Chromium's ctrl+l then typed text lost its first letters,
/// and the address went to search as "bout:blank…"). So after a shortcut
/// the next input waits for the screen to change — the application's
/// repaint, which it makes after handling the key — or [`SHORTCUT_SETTLE`],
/// whichever comes first.
async fn press_combo(session: &ScreenSession, combo: &[u32]) -> Result<(), RunError> {
    let mut repainted = session.version();
    repainted.mark_unchanged();
    hold(session, combo, true).await?;
    hold(session, combo, false).await?;
    if combo.iter().any(|&key| is_shortcut_modifier(key)) {
        let _ = tokio::time::timeout(SHORTCUT_SETTLE, repainted.changed()).await;
    }
    Ok(())
}

/// Control, Alt, Meta and Super, left and right (X keysyms).
fn is_shortcut_modifier(keysym: u32) -> bool {
    matches!(keysym, 0xffe3 | 0xffe4 | 0xffe7..=0xffec)
}

/// Presses `keys` in order, or releases them in reverse.
async fn hold(session: &ScreenSession, keys: &[u32], down: bool) -> Result<(), RunError> {
    if down {
        for &key in keys {
            session.key_event(key, true).await?;
        }
    } else {
        for &key in keys.iter().rev() {
            session.key_event(key, false).await?;
        }
    }
    Ok(())
}

async fn type_text(session: &ScreenSession, keysyms: &[u32]) -> Result<(), RunError> {
    for chunk in keysyms.chunks(TYPE_CHUNK) {
        for &key in chunk {
            session.key_event(key, true).await?;
            session.key_event(key, false).await?;
        }
        tokio::time::sleep(TYPE_PAUSE).await;
    }
    Ok(())
}

async fn move_to(session: &ScreenSession, to: Point) -> Result<(), RunError> {
    let (x, y) = to_screen(session, to)?;
    let buttons = session.pointer().buttons;
    Ok(session.pointer_event(x, y, buttons).await?)
}

async fn set_button(session: &ScreenSession, button: Button, down: bool) -> Result<(), RunError> {
    let pointer = session.pointer();
    let buttons = if down {
        pointer.buttons | button.mask()
    } else {
        pointer.buttons & !button.mask()
    };
    Ok(session.pointer_event(pointer.x, pointer.y, buttons).await?)
}

/// Checks `at`, presses `modifiers` and moves the pointer there (the caller
/// releases the modifiers). Validating first means a bad point leaves no
/// key down.
async fn press_modifiers_at(
    session: &ScreenSession,
    at: Option<Point>,
    modifiers: &[u32],
) -> Result<(), RunError> {
    let target = at.map(|p| to_screen(session, p)).transpose()?;
    hold(session, modifiers, true).await?;
    if let Some((x, y)) = target {
        let buttons = session.pointer().buttons;
        session.pointer_event(x, y, buttons).await?;
    }
    Ok(())
}

async fn click(
    session: &ScreenSession,
    button: Button,
    at: Option<Point>,
    count: u8,
    modifiers: &[u32],
) -> Result<(), RunError> {
    press_modifiers_at(session, at, modifiers).await?;
    for i in 0..count {
        if i > 0 {
            tokio::time::sleep(CLICK_GAP).await;
        }
        set_button(session, button, true).await?;
        set_button(session, button, false).await?;
    }
    hold(session, modifiers, false).await
}

async fn drag(session: &ScreenSession, path: &[Point]) -> Result<(), RunError> {
    let points: Vec<(u16, u16)> = path
        .iter()
        .map(|p| to_screen(session, *p))
        .collect::<Result<_, _>>()?;
    let Some(&(x0, y0)) = points.first() else {
        return Ok(());
    };
    session.pointer_event(x0, y0, 0).await?;
    session.pointer_event(x0, y0, Button::Left.mask()).await?;
    let mut from = (x0, y0);
    for &to in &points[1..] {
        for step in 1..=DRAG_STEPS {
            let lerp = |a: u16, b: u16| {
                let (a, b) = (i64::from(a), i64::from(b));
                (a + (b - a) * i64::from(step) / i64::from(DRAG_STEPS)) as u16
            };
            session
                .pointer_event(lerp(from.0, to.0), lerp(from.1, to.1), Button::Left.mask())
                .await?;
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // Rest on each point the path names: a program that reads its
        // pointer events in batches (Chromium folds queued motion into the
        // last one) then sees the corner itself, not only the next segment.
        tokio::time::sleep(VERTEX_DWELL).await;
        from = to;
    }
    Ok(session.pointer_event(from.0, from.1, 0).await?)
}

async fn scroll(
    session: &ScreenSession,
    at: Option<Point>,
    dx: i32,
    dy: i32,
    modifiers: &[u32],
) -> Result<(), RunError> {
    press_modifiers_at(session, at, modifiers).await?;
    // X wheel buttons: 4 up, 5 down, 6 left, 7 right (mask bits 8..64).
    for (clicks, negative, positive) in [(dy, 8u8, 16u8), (dx, 32, 64)] {
        let mask = if clicks < 0 { negative } else { positive };
        for _ in 0..clicks.unsigned_abs() {
            let pointer = session.pointer();
            session
                .pointer_event(pointer.x, pointer.y, pointer.buttons | mask)
                .await?;
            session
                .pointer_event(pointer.x, pointer.y, pointer.buttons)
                .await?;
        }
    }
    hold(session, modifiers, false).await
}

fn image_json(encoded: &image_out::Encoded) -> Value {
    json!({
        "type": "image",
        "media_type": encoded.media_type,
        "width": encoded.width,
        "height": encoded.height,
        "data": base64::engine::general_purpose::STANDARD.encode(&encoded.bytes),
    })
}

fn screenshot(session: &ScreenSession, request: ImageRequest) -> Result<Value, RunError> {
    let encoded = session.screenshot(request.format, request.size)?;
    // Later coordinates are in the space of this screenshot.
    *session
        .coordinate_space
        .lock()
        .unwrap_or_else(|p| p.into_inner()) = request.size;
    Ok(image_json(&encoded))
}

fn zoom(
    session: &ScreenSession,
    a: Point,
    b: Point,
    request: ImageRequest,
) -> Result<Value, RunError> {
    let (x0, y0) = to_screen(session, a)?;
    let last = Point {
        x: b.x - 1,
        y: b.y - 1,
        ..b
    };
    let (x1, y1) = to_screen(session, last)?;
    let frame = session.snapshot();
    let region = frame.crop(
        u32::from(x0),
        u32::from(y0),
        u32::from(x1) - u32::from(x0) + 1,
        u32::from(y1) - u32::from(y0) + 1,
    );
    Ok(image_json(&image_out::encode(
        &region,
        request.format,
        request.size,
    )?))
}
