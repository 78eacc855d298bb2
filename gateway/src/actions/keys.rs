//! Key names to X keysyms, the way xdotool reads them (`ctrl+shift+t`,
//! `Return`, `super`), and characters to keysyms for typing.
//!
//! Names are resolved by libxkbcommon (the same keysym names Xlib and
//! xdotool use), after a short table of the aliases agents commonly send
//! (`ctrl`, `enter`, `esc`, `cmd`, `pgup`, ...).

use xkbcommon::xkb;

/// The most keys one combination may hold at once.
pub const MAX_COMBO: usize = 16;

/// Why a key could not be resolved.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum KeyError {
    #[error(
        "unknown key {0:?}: use X keysym names such as Return, Tab, ctrl, alt, shift, super, F5, Page_Down, a, 1"
    )]
    Unknown(String),
    #[error("empty key name in {0:?}: write combinations as ctrl+shift+t")]
    Empty(String),
    #[error("combination {0:?} holds more than {MAX_COMBO} keys")]
    TooMany(String),
    #[error(
        "character {0:?} (U+{1:04X}) cannot be typed: control characters other than newline and tab have no key"
    )]
    Untypable(char, u32),
}

const ALIASES: &[(&str, &str)] = &[
    ("ctrl", "Control_L"),
    ("control", "Control_L"),
    ("alt", "Alt_L"),
    ("shift", "Shift_L"),
    ("super", "Super_L"),
    ("win", "Super_L"),
    ("windows", "Super_L"),
    ("meta", "Super_L"),
    ("cmd", "Super_L"),
    ("command", "Super_L"),
    ("enter", "Return"),
    ("return", "Return"),
    ("esc", "Escape"),
    ("escape", "Escape"),
    ("backspace", "BackSpace"),
    ("del", "Delete"),
    ("delete", "Delete"),
    ("ins", "Insert"),
    ("pgup", "Prior"),
    ("pageup", "Prior"),
    ("page_up", "Prior"),
    ("pgdn", "Next"),
    ("pagedown", "Next"),
    ("page_down", "Next"),
    ("arrowup", "Up"),
    ("arrowdown", "Down"),
    ("arrowleft", "Left"),
    ("arrowright", "Right"),
    ("space", "space"),
    ("tab", "Tab"),
    ("capslock", "Caps_Lock"),
    ("printscreen", "Print"),
];

/// The keysym of one key name.
pub fn keysym(name: &str) -> Result<u32, KeyError> {
    if name.is_empty() {
        return Err(KeyError::Empty(name.to_owned()));
    }
    let lower = name.to_ascii_lowercase();
    if let Some((_, real)) = ALIASES.iter().find(|(alias, _)| *alias == lower) {
        return Ok(xkb::keysym_from_name(real, xkb::KEYSYM_NO_FLAGS).raw());
    }
    let mut chars = name.chars();
    if let (Some(c), None) = (chars.next(), chars.next()) {
        return char_keysym(c);
    }
    // No keysym name holds a control character, and libxkbcommon's lookup
    // takes a C string, which a NUL would cut short (the binding panics on it).
    if name.chars().any(char::is_control) {
        return Err(KeyError::Unknown(name.to_owned()));
    }
    for flags in [xkb::KEYSYM_NO_FLAGS, xkb::KEYSYM_CASE_INSENSITIVE] {
        let sym = xkb::keysym_from_name(name, flags).raw();
        if sym != 0 {
            return Ok(sym);
        }
    }
    Err(KeyError::Unknown(name.to_owned()))
}

/// The keysyms of a combination such as `ctrl+shift+t` (pressed in order,
/// released in reverse). A lone `+` is the plus key.
pub fn combo(text: &str) -> Result<Vec<u32>, KeyError> {
    if text == "+" {
        return Ok(vec![keysym("plus")?]);
    }
    let names: Vec<&str> = text.split('+').collect();
    if names.len() > MAX_COMBO {
        return Err(KeyError::TooMany(text.to_owned()));
    }
    names
        .iter()
        .map(|name| {
            if name.is_empty() {
                Err(KeyError::Empty(text.to_owned()))
            } else {
                keysym(name.trim())
            }
        })
        .collect()
}

/// A sequence of combinations separated by spaces (`ctrl+a Delete`).
pub fn sequence(text: &str) -> Result<Vec<Vec<u32>>, KeyError> {
    let combos: Vec<Vec<u32>> = text
        .split_whitespace()
        .map(combo)
        .collect::<Result<_, _>>()?;
    if combos.is_empty() {
        return Err(KeyError::Empty(text.to_owned()));
    }
    Ok(combos)
}

/// The keysym that types `c`.
pub fn char_keysym(c: char) -> Result<u32, KeyError> {
    match c {
        '\n' | '\r' => Ok(xkb::keysym_from_name("Return", xkb::KEYSYM_NO_FLAGS).raw()),
        '\t' => Ok(xkb::keysym_from_name("Tab", xkb::KEYSYM_NO_FLAGS).raw()),
        c if c.is_control() => Err(KeyError::Untypable(c, u32::from(c))),
        c => {
            let sym = xkb::utf32_to_keysym(u32::from(c)).raw();
            if sym == 0 {
                Err(KeyError::Untypable(c, u32::from(c)))
            } else {
                Ok(sym)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xdotool_names_resolve() {
        assert_eq!(keysym("Return").unwrap(), 0xff0d);
        assert_eq!(keysym("enter").unwrap(), 0xff0d);
        assert_eq!(keysym("ctrl").unwrap(), 0xffe3);
        assert_eq!(keysym("super").unwrap(), 0xffeb);
        assert_eq!(keysym("F5").unwrap(), 0xffc2);
        assert_eq!(keysym("page_down").unwrap(), 0xff56);
        assert_eq!(keysym("a").unwrap(), 0x61);
        assert_eq!(keysym("A").unwrap(), 0x41);
        assert_eq!(keysym("minus").unwrap(), 0x2d);
        assert_eq!(combo("ctrl+shift+t").unwrap(), vec![0xffe3, 0xffe1, 0x74]);
        assert_eq!(sequence("ctrl+a Delete").unwrap().len(), 2);
        assert_eq!(combo("+").unwrap(), vec![0x2b]);
    }

    #[test]
    fn bad_names_are_refused() {
        assert!(matches!(keysym("notakey"), Err(KeyError::Unknown(_))));
        assert!(matches!(combo("ctrl+"), Err(KeyError::Empty(_))));
        assert!(matches!(sequence("   "), Err(KeyError::Empty(_))));
        assert!(matches!(combo(&"a+".repeat(20)), Err(KeyError::TooMany(_))));
        // Found by the action_body fuzzer: a NUL inside a name panicked in
        // the C-string conversion of the keysym lookup.
        assert!(matches!(keysym("c0\0U"), Err(KeyError::Unknown(_))));
        assert!(matches!(
            sequence("ctrl+Ret\u{7}urn"),
            Err(KeyError::Unknown(_))
        ));
    }

    #[test]
    fn typing_maps_unicode_and_refuses_controls() {
        assert_eq!(char_keysym('x').unwrap(), 0x78);
        assert_eq!(char_keysym('\n').unwrap(), 0xff0d);
        assert_eq!(char_keysym('é').unwrap(), 0xe9);
        assert_eq!(char_keysym('€').unwrap(), 0x20ac);
        assert!(char_keysym('ж').unwrap() > 0);
        assert!(matches!(char_keysym('\u{7}'), Err(KeyError::Untypable(..))));
    }
}
