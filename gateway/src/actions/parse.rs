//! Parsing one action from JSON, with errors that name the field.

use std::time::Duration;

use serde_json::{Map, Value};

use super::keys::{self, KeyError};
use super::{Action, Button, ImageRequest, MAX_DURATION, MAX_PATH, MAX_SCROLL, MAX_TEXT, Point};
use crate::screen::image_out::Format;

/// A request field that is wrong, and how.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

impl FieldError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }

    /// The same error under `prefix` (e.g. `actions[3]`).
    pub fn within(self, prefix: &str) -> Self {
        Self::new(format!("{prefix}.{}", self.field), self.message)
    }
}

/// The action names in Anthropic's form, as this parser takes them (the
/// MCP `computer` tool lists the same).
pub const ANTHROPIC: &[&str] = &[
    "key",
    "hold_key",
    "type",
    "cursor_position",
    "mouse_move",
    "left_click",
    "right_click",
    "middle_click",
    "double_click",
    "triple_click",
    "left_mouse_down",
    "left_mouse_up",
    "left_click_drag",
    "scroll",
    "wait",
    "screenshot",
    "zoom",
];
/// The action types in OpenAI's CUA form.
pub const OPENAI: &[&str] = &[
    "click",
    "double_click",
    "scroll",
    "keypress",
    "type",
    "wait",
    "screenshot",
    "move",
    "drag",
];

type Fields = Map<String, Value>;

/// Parses one action object: `{"action": ...}` (Anthropic) or `{"type": ...}` (OpenAI CUA).
pub fn parse_action(value: &Value) -> Result<Action, FieldError> {
    let fields = value
        .as_object()
        .ok_or_else(|| FieldError::new("action", "each action must be a JSON object"))?;
    if let Some(name) = fields.get("action") {
        let name = name
            .as_str()
            .ok_or_else(|| FieldError::new("action", "must be a string"))?;
        return anthropic(name, fields);
    }
    if let Some(name) = fields.get("type") {
        let name = name
            .as_str()
            .ok_or_else(|| FieldError::new("type", "must be a string"))?;
        return openai(name, fields);
    }
    Err(FieldError::new(
        "action",
        "missing: give \"action\" (Anthropic computer-use names) or \"type\" (OpenAI CUA names)",
    ))
}

fn anthropic(name: &str, f: &Fields) -> Result<Action, FieldError> {
    let click = |button, count| -> Result<Action, FieldError> {
        Ok(Action::Click {
            button,
            at: optional_point(f, "coordinate")?,
            count,
            modifiers: modifiers(f)?,
        })
    };
    Ok(match name {
        "key" => Action::Key(key_sequence(f, "text")?),
        "hold_key" => Action::HoldKey(key_combo(f, "text")?, duration(f, "duration")?),
        "type" => Action::Type(text(f)?),
        "cursor_position" => Action::CursorPosition,
        "mouse_move" => Action::MouseMove(point(f, "coordinate")?),
        "left_click" => click(Button::Left, 1)?,
        "right_click" => click(Button::Right, 1)?,
        "middle_click" => click(Button::Middle, 1)?,
        "double_click" => click(Button::Left, 2)?,
        "triple_click" => click(Button::Left, 3)?,
        "left_mouse_down" => Action::MouseDown(Button::Left),
        "left_mouse_up" => Action::MouseUp(Button::Left),
        "left_click_drag" => {
            Action::Drag(vec![point(f, "start_coordinate")?, point(f, "coordinate")?])
        }
        "scroll" => anthropic_scroll(f)?,
        "wait" => Action::Wait(duration(f, "duration")?),
        "screenshot" => Action::Screenshot(image_request(f)?),
        "zoom" => {
            let (a, b) = region(f)?;
            Action::Zoom(a, b, image_request(f)?)
        }
        other => return Err(unknown(other, "action", ANTHROPIC)),
    })
}

fn openai(name: &str, f: &Fields) -> Result<Action, FieldError> {
    let at = || -> Result<Point, FieldError> { xy(f) };
    Ok(match name {
        "click" => {
            let button = match f.get("button").and_then(Value::as_str).unwrap_or("left") {
                "left" => Button::Left,
                "right" => Button::Right,
                "wheel" | "middle" => Button::Middle,
                other => {
                    return Err(FieldError::new(
                        "button",
                        format!("{other:?} is not one of left, right, wheel"),
                    ));
                }
            };
            Action::Click {
                button,
                at: Some(at()?),
                count: 1,
                modifiers: held_keys(f)?,
            }
        }
        "double_click" => Action::Click {
            button: Button::Left,
            at: Some(at()?),
            count: 2,
            modifiers: held_keys(f)?,
        },
        "move" => {
            no_held_keys(f, name)?;
            Action::MouseMove(at()?)
        }
        "scroll" => Action::Scroll {
            at: Some(at()?),
            dx: pixels_to_clicks(f, "scroll_x")?,
            dy: pixels_to_clicks(f, "scroll_y")?,
            modifiers: held_keys(f)?,
        },
        "keypress" => {
            let keys = f
                .get("keys")
                .and_then(Value::as_array)
                .ok_or_else(|| FieldError::new("keys", "must be a list of key names"))?;
            let names: Vec<&str> = keys.iter().filter_map(Value::as_str).collect();
            if names.len() != keys.len() || names.is_empty() {
                return Err(FieldError::new(
                    "keys",
                    "must be a non-empty list of key names",
                ));
            }
            Action::Key(vec![key_err("keys", keys::combo(&names.join("+")))?])
        }
        "type" => Action::Type(text(f)?),
        "wait" => Action::Wait(match f.get("duration") {
            Some(_) => duration(f, "duration")?,
            None => Duration::from_secs(1),
        }),
        "screenshot" => Action::Screenshot(image_request(f)?),
        "drag" => {
            no_held_keys(f, name)?;
            Action::Drag(path(f)?)
        }
        other => return Err(unknown(other, "type", OPENAI)),
    })
}

fn unknown(name: &str, field: &str, known: &[&str]) -> FieldError {
    FieldError::new(
        field,
        format!("unknown action {name:?}; known: {}", known.join(", ")),
    )
}

fn key_err<T>(field: &str, result: Result<T, KeyError>) -> Result<T, FieldError> {
    result.map_err(|e| FieldError::new(field, e.to_string()))
}

fn string<'a>(f: &'a Fields, field: &str) -> Result<&'a str, FieldError> {
    f.get(field)
        .and_then(Value::as_str)
        .ok_or_else(|| FieldError::new(field, "missing or not a string"))
}

fn key_sequence(f: &Fields, field: &str) -> Result<Vec<Vec<u32>>, FieldError> {
    key_err(field, keys::sequence(string(f, field)?))
}

fn key_combo(f: &Fields, field: &str) -> Result<Vec<u32>, FieldError> {
    key_err(field, keys::combo(string(f, field)?))
}

/// The keys OpenAI's GA `computer` tool holds down during a click or a
/// scroll (`keys: ["ctrl", "shift"]`), as one combination.
fn held_keys(f: &Fields) -> Result<Vec<u32>, FieldError> {
    let Some(keys) = f.get("keys").filter(|k| !k.is_null()) else {
        return Ok(Vec::new());
    };
    let names: Option<Vec<&str>> = keys
        .as_array()
        .map(|list| list.iter().filter_map(Value::as_str).collect());
    match names {
        Some(names) if names.len() == keys.as_array().map_or(0, Vec::len) => match names.len() {
            0 => Ok(Vec::new()),
            _ => key_err("keys", keys::combo(&names.join("+"))),
        },
        _ => Err(FieldError::new("keys", "must be a list of key names")),
    }
}

/// Keys held during a move or a drag are not carried out yet: refused,
/// never dropped (a shift-drag done as a plain drag selects something
/// else).
fn no_held_keys(f: &Fields, name: &str) -> Result<(), FieldError> {
    match held_keys(f)?.is_empty() {
        true => Ok(()),
        false => Err(FieldError::new(
            "keys",
            format!(
                "keys held during a {name} are not supported; press them with a keypress before and after, or leave keys out"
            ),
        )),
    }
}

fn modifiers(f: &Fields) -> Result<Vec<u32>, FieldError> {
    match f.get("text") {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(_) => key_combo(f, "text"),
    }
}

fn text(f: &Fields) -> Result<Vec<u32>, FieldError> {
    let text = string(f, "text")?;
    if text.chars().count() > MAX_TEXT {
        return Err(FieldError::new(
            "text",
            format!("longer than {MAX_TEXT} characters; split it into several type actions"),
        ));
    }
    text.chars()
        .map(|c| key_err("text", keys::char_keysym(c)))
        .collect()
}

fn duration(f: &Fields, field: &str) -> Result<Duration, FieldError> {
    let seconds = f
        .get(field)
        .and_then(Value::as_f64)
        .ok_or_else(|| FieldError::new(field, "missing or not a number of seconds"))?;
    if !seconds.is_finite() || seconds < 0.0 || seconds > MAX_DURATION.as_secs_f64() {
        return Err(FieldError::new(
            field,
            format!(
                "{seconds} is out of range: 0..={} seconds",
                MAX_DURATION.as_secs()
            ),
        ));
    }
    Ok(Duration::from_secs_f64(seconds))
}

fn coordinate(value: &Value, field: &'static str) -> Result<Point, FieldError> {
    let pair = value.as_array().filter(|a| a.len() == 2);
    let xy = pair.and_then(|a| Some((a[0].as_i64()?, a[1].as_i64()?)));
    let (x, y) = xy.ok_or_else(|| FieldError::new(field, "must be [x, y] with integer pixels"))?;
    Ok(Point { x, y, field })
}

fn point(f: &Fields, field: &'static str) -> Result<Point, FieldError> {
    let value = f
        .get(field)
        .ok_or_else(|| FieldError::new(field, "missing: give [x, y]"))?;
    coordinate(value, field)
}

fn optional_point(f: &Fields, field: &'static str) -> Result<Option<Point>, FieldError> {
    match f.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => coordinate(value, field).map(Some),
    }
}

fn xy(f: &Fields) -> Result<Point, FieldError> {
    let get = |name: &str| {
        f.get(name)
            .and_then(Value::as_i64)
            .ok_or_else(|| FieldError::new(name, "missing or not an integer pixel"))
    };
    Ok(Point {
        x: get("x")?,
        y: get("y")?,
        field: "x/y",
    })
}

fn path(f: &Fields) -> Result<Vec<Point>, FieldError> {
    let points = f
        .get("path")
        .and_then(Value::as_array)
        .ok_or_else(|| FieldError::new("path", "must be a list of {\"x\", \"y\"} points"))?;
    if points.len() < 2 || points.len() > MAX_PATH {
        return Err(FieldError::new(
            "path",
            format!("needs 2..={MAX_PATH} points, got {}", points.len()),
        ));
    }
    points
        .iter()
        .map(|p| {
            p.as_object()
                .ok_or_else(|| FieldError::new("path", "each point must be {\"x\", \"y\"}"))
                .and_then(xy)
                .map(|point| Point {
                    field: "path",
                    ..point
                })
        })
        .collect()
}

fn anthropic_scroll(f: &Fields) -> Result<Action, FieldError> {
    let amount = match f.get("scroll_amount") {
        None => 3,
        Some(v) => v
            .as_u64()
            .filter(|n| (1..=u64::from(MAX_SCROLL)).contains(n))
            .ok_or_else(|| FieldError::new("scroll_amount", format!("must be 1..={MAX_SCROLL}")))?
            as i32,
    };
    let (dx, dy) = match string(f, "scroll_direction")? {
        "up" => (0, -amount),
        "down" => (0, amount),
        "left" => (-amount, 0),
        "right" => (amount, 0),
        other => {
            return Err(FieldError::new(
                "scroll_direction",
                format!("{other:?} is not one of up, down, left, right"),
            ));
        }
    };
    Ok(Action::Scroll {
        at: optional_point(f, "coordinate")?,
        dx,
        dy,
        modifiers: modifiers(f)?,
    })
}

/// OpenAI CUA scrolls by pixels; one wheel click is about 100 pixels.
fn pixels_to_clicks(f: &Fields, field: &str) -> Result<i32, FieldError> {
    let pixels = match f.get(field) {
        None => 0,
        Some(v) => v
            .as_i64()
            .ok_or_else(|| FieldError::new(field, "must be an integer number of pixels"))?,
    };
    let clicks = (pixels + pixels.signum() * 99) / 100;
    if clicks.unsigned_abs() > u64::from(MAX_SCROLL) {
        return Err(FieldError::new(
            field,
            format!("{pixels} pixels is more than {MAX_SCROLL} wheel clicks"),
        ));
    }
    Ok(clicks as i32)
}

fn region(f: &Fields) -> Result<(Point, Point), FieldError> {
    let values = f
        .get("region")
        .and_then(Value::as_array)
        .filter(|a| a.len() == 4)
        .and_then(|a| a.iter().map(Value::as_i64).collect::<Option<Vec<i64>>>())
        .ok_or_else(|| FieldError::new("region", "must be [x0, y0, x1, y1] in pixels"))?;
    let (a, b) = (
        Point {
            x: values[0],
            y: values[1],
            field: "region",
        },
        Point {
            x: values[2],
            y: values[3],
            field: "region",
        },
    );
    if a.x >= b.x || a.y >= b.y {
        return Err(FieldError::new(
            "region",
            "x1 must exceed x0 and y1 must exceed y0",
        ));
    }
    Ok((a, b))
}

fn image_request(f: &Fields) -> Result<ImageRequest, FieldError> {
    // Checked whatever the format: a value the schema refuses is refused.
    let quality = match f.get("quality") {
        None => 80,
        Some(q) => q
            .as_u64()
            .filter(|q| (1..=100).contains(q))
            .ok_or_else(|| FieldError::new("quality", "must be 1..=100"))? as u8,
    };
    let format = match f.get("format").and_then(Value::as_str).unwrap_or("png") {
        "png" => Format::Png,
        "jpeg" | "jpg" => Format::Jpeg(quality),
        other => {
            return Err(FieldError::new(
                "format",
                format!("{other:?} is not png or jpeg"),
            ));
        }
    };
    let size = match (f.get("width"), f.get("height")) {
        (None, None) => None,
        (Some(w), Some(h)) => {
            let side = |v: &Value, name: &str| {
                v.as_u64()
                    .filter(|n| (16..=7680).contains(n))
                    .map(|n| n as u32)
                    .ok_or_else(|| FieldError::new(name, "must be 16..=7680 pixels"))
            };
            Some((side(w, "width")?, side(h, "height")?))
        }
        _ => {
            return Err(FieldError::new(
                "width",
                "give both width and height, or neither",
            ));
        }
    };
    Ok(ImageRequest { format, size })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn err(value: Value) -> FieldError {
        parse_action(&value).unwrap_err()
    }

    #[test]
    fn anthropic_and_openai_forms_parse() {
        let click =
            parse_action(&json!({"action": "left_click", "coordinate": [10, 20], "text": "shift"}))
                .unwrap();
        assert!(
            matches!(click, Action::Click { count: 1, ref modifiers, .. } if modifiers.len() == 1)
        );
        let drag =
            parse_action(&json!({"type": "drag", "path": [{"x": 1, "y": 2}, {"x": 3, "y": 4}]}))
                .unwrap();
        assert!(matches!(drag, Action::Drag(ref p) if p.len() == 2));
        let scroll =
            parse_action(&json!({"type": "scroll", "x": 5, "y": 5, "scroll_y": 250})).unwrap();
        assert!(matches!(scroll, Action::Scroll { dy: 3, dx: 0, .. }));
        let key = parse_action(&json!({"type": "keypress", "keys": ["CTRL", "A"]})).unwrap();
        assert_eq!(key, Action::Key(vec![vec![0xffe3, 0x41]]));
        let shot =
            parse_action(&json!({"action": "screenshot", "width": 1024, "height": 768})).unwrap();
        assert!(matches!(
            shot,
            Action::Screenshot(ImageRequest {
                size: Some((1024, 768)),
                ..
            })
        ));
    }

    /// OpenAI's GA `computer` tool holds `keys` during a click or a
    /// scroll: they are pressed, never dropped; during a move or a drag
    /// they are refused.
    #[test]
    fn keys_held_by_the_ga_computer_tool() {
        let click = parse_action(
            &json!({"type": "click", "button": "left", "x": 1, "y": 2, "keys": ["ctrl", "shift"]}),
        )
        .unwrap();
        assert!(
            matches!(click, Action::Click { ref modifiers, .. } if *modifiers == vec![0xffe3, 0xffe1]),
            "{click:?}"
        );
        let scroll = parse_action(&json!({"type": "scroll", "x": 5, "y": 5, "scroll_x": 0, "scroll_y": 100, "keys": ["shift"]}))
            .unwrap();
        assert!(matches!(scroll, Action::Scroll { ref modifiers, .. } if modifiers.len() == 1));
        let plain =
            parse_action(&json!({"type": "double_click", "x": 1, "y": 2, "keys": []})).unwrap();
        assert!(
            matches!(plain, Action::Click { count: 2, ref modifiers, .. } if modifiers.is_empty())
        );
        for refused in [
            json!({"type": "drag", "path": [{"x": 1, "y": 2}, {"x": 3, "y": 4}], "keys": ["shift"]}),
            json!({"type": "move", "x": 1, "y": 2, "keys": ["alt"]}),
            json!({"type": "click", "x": 1, "y": 2, "keys": "ctrl"}),
            json!({"type": "click", "x": 1, "y": 2, "keys": ["nokey"]}),
        ] {
            assert_eq!(err(refused.clone()).field, "keys", "{refused}");
        }
    }

    #[test]
    fn bad_input_names_the_field() {
        assert_eq!(err(json!({"action": "fly"})).field, "action");
        assert_eq!(
            err(json!({"action": "left_click", "coordinate": [1]})).field,
            "coordinate"
        );
        assert_eq!(
            err(json!({"action": "wait", "duration": -1})).field,
            "duration"
        );
        assert_eq!(
            err(json!({"action": "wait", "duration": 1e9})).field,
            "duration"
        );
        assert_eq!(
            err(json!({"action": "key", "text": "ctrl+nokey"})).field,
            "text"
        );
        assert_eq!(
            err(json!({"action": "type", "text": "a".repeat(MAX_TEXT + 1)})).field,
            "text"
        );
        assert_eq!(
            err(json!({"action": "type", "text": "bell\u{7}"})).field,
            "text"
        );
        assert_eq!(
            err(json!({"action": "scroll", "scroll_direction": "sideways"})).field,
            "scroll_direction"
        );
        assert_eq!(
            err(json!({"action": "zoom", "region": [5, 5, 1, 1]})).field,
            "region"
        );
        assert_eq!(err(json!({"type": "click", "x": 1})).field, "y");
        assert_eq!(err(json!({"nothing": 1})).field, "action");
    }
}
