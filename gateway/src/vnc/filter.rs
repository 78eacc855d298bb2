//! What of a viewer's RFB reaches the workspace: input (keys, pointer,
//! clipboard) only while the viewer holds the control lock; everything else
//! as sent, except what would change the workspace for everyone
//! (SetDesktopSize, xvp power operations, pseudo-encodings that change the
//! protocol), which is dropped or stripped. Handshake messages never pass:
//! the gateway answers them. It also remembers which keys and buttons the holder left pressed,
//! so they can be released when it loses control or leaves.

use std::borrow::Cow;
use std::collections::BTreeMap;

use super::rfb_parse::{Kind, Message};

/// Pseudo-encodings a viewer may not ask for, because the server would then
/// change what the client sends: ExtendedMouseButtons (-316, 7-byte pointer
/// events), xvp (-309, power operations), gii (-305, its own messages),
/// and the extended clipboard (0xc0a1e5ce), whose compressed messages the
/// clipboard policy could not read: viewers paste in the classic form.
const STRIPPED_ENCODINGS: [i32; 4] = [-316, -309, -305, 0xc0a1_e5ce_u32 as i32];

/// The text of a classic ClientCutText (Latin-1); `None` for the
/// extended form (a negative length), which is never forwarded.
pub fn cut_text(bytes: &[u8]) -> Option<String> {
    let length = i32::from_be_bytes(bytes.get(4..8)?.try_into().ok()?);
    if length < 0 {
        return None;
    }
    Some(bytes.get(8..)?.iter().map(|&b| char::from(b)).collect())
}
/// Most keys remembered as pressed (a hostile holder cannot grow it further).
const MAX_HELD_KEYS: usize = 256;

/// What to do with one message.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict<'a> {
    Forward(Cow<'a, [u8]>),
    Drop,
}

/// Keys and buttons the holder has pressed and not released.
#[derive(Debug, Default)]
pub struct HeldInput {
    /// keysym → the QEMU keycode it was pressed with, if any.
    keys: BTreeMap<u32, Option<u32>>,
    buttons: u8,
    x: u16,
    y: u16,
}

impl HeldInput {
    fn note(&mut self, kind: Kind) {
        match kind {
            Kind::KeyEvent { keysym, down } => self.key(keysym, None, down),
            Kind::QemuKeyEvent {
                keysym,
                keycode,
                down,
            } => self.key(keysym, Some(keycode), down),
            Kind::PointerEvent { buttons, x, y } => {
                (self.buttons, self.x, self.y) = (buttons, x, y)
            }
            _ => {}
        }
    }

    fn key(&mut self, keysym: u32, keycode: Option<u32>, down: bool) {
        if !down {
            self.keys.remove(&keysym);
        } else if self.keys.len() < MAX_HELD_KEYS {
            self.keys.insert(keysym, keycode);
        }
    }

    /// RFB messages releasing everything still pressed (empty if nothing is).
    pub fn release(&mut self) -> Vec<u8> {
        let mut out = Vec::new();
        for (keysym, keycode) in std::mem::take(&mut self.keys) {
            match keycode {
                Some(code) => {
                    out.extend_from_slice(&[255, 0, 0, 0]);
                    out.extend_from_slice(&keysym.to_be_bytes());
                    out.extend_from_slice(&code.to_be_bytes());
                }
                None => {
                    out.extend_from_slice(&[4, 0, 0, 0]);
                    out.extend_from_slice(&keysym.to_be_bytes());
                }
            }
        }
        if self.buttons != 0 {
            self.buttons = 0;
            out.extend_from_slice(&[5, 0]);
            out.extend_from_slice(&self.x.to_be_bytes());
            out.extend_from_slice(&self.y.to_be_bytes());
        }
        out
    }
}

/// Decides one message; `may_input` is whether the viewer holds control now.
pub fn decide<'a>(message: &Message<'a>, may_input: bool, held: &mut HeldInput) -> Verdict<'a> {
    match message.kind {
        // Answered by the gateway (`super::handshake`); Xvnc has had its own.
        Kind::ProtocolVersion { .. } | Kind::SecurityChoice | Kind::ClientInit => Verdict::Drop,
        Kind::SetEncodings => Verdict::Forward(Cow::Owned(strip_encodings(message.bytes))),
        // The screen size is the workspace's, set when it was created.
        Kind::SetDesktopSize | Kind::Xvp => Verdict::Drop,
        kind if kind.is_input() => {
            if !may_input {
                return Verdict::Drop;
            }
            held.note(kind);
            Verdict::Forward(Cow::Borrowed(message.bytes))
        }
        _ => Verdict::Forward(Cow::Borrowed(message.bytes)),
    }
}

/// A SetEncodings message without [`STRIPPED_ENCODINGS`].
fn strip_encodings(bytes: &[u8]) -> Vec<u8> {
    let kept: Vec<&[u8]> = bytes
        .get(4..)
        .unwrap_or_default()
        .chunks_exact(4)
        .filter(|e| !STRIPPED_ENCODINGS.contains(&i32::from_be_bytes([e[0], e[1], e[2], e[3]])))
        .collect();
    let count = u16::try_from(kept.len()).unwrap_or(u16::MAX);
    let mut out = vec![2, 0];
    out.extend_from_slice(&count.to_be_bytes());
    for encoding in kept {
        out.extend_from_slice(encoding);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(kind: Kind, bytes: &[u8]) -> Message<'_> {
        Message { kind, bytes }
    }

    #[test]
    fn input_passes_only_while_holding_control() {
        let mut held = HeldInput::default();
        let key = [4, 1, 0, 0, 0, 0, 0, 0x61];
        let kind = Kind::KeyEvent {
            keysym: 0x61,
            down: true,
        };
        assert_eq!(
            decide(&message(kind, &key), false, &mut held),
            Verdict::Drop
        );
        assert!(held.release().is_empty(), "dropped input is not remembered");
        assert_eq!(
            decide(&message(kind, &key), true, &mut held),
            Verdict::Forward(Cow::Borrowed(&key[..]))
        );
        let request = [3, 1, 0, 0, 0, 0, 1, 0, 1, 0];
        let kind = Kind::FramebufferUpdateRequest;
        assert!(matches!(
            decide(&message(kind, &request), false, &mut held),
            Verdict::Forward(_)
        ));
    }

    #[test]
    fn handshake_messages_and_resizes_are_dropped() {
        let mut held = HeldInput::default();
        for kind in [
            Kind::ProtocolVersion { minor: 8 },
            Kind::SecurityChoice,
            Kind::ClientInit,
        ] {
            assert_eq!(decide(&message(kind, &[0]), true, &mut held), Verdict::Drop);
        }
        let size = decide(&message(Kind::SetDesktopSize, &[251; 24]), true, &mut held);
        assert_eq!(size, Verdict::Drop);
    }

    #[test]
    fn set_encodings_loses_the_stripped_pseudo_encodings() {
        let mut bytes = vec![2, 0, 0, 3];
        for encoding in [16i32, -316, -309] {
            bytes.extend_from_slice(&encoding.to_be_bytes());
        }
        let mut held = HeldInput::default();
        let Verdict::Forward(out) = decide(&message(Kind::SetEncodings, &bytes), false, &mut held)
        else {
            panic!("SetEncodings is forwarded");
        };
        assert_eq!(&out[..], &[2, 0, 0, 1, 0, 0, 0, 16]);
    }

    #[test]
    fn pressed_keys_and_buttons_are_released() {
        let mut held = HeldInput::default();
        held.note(Kind::KeyEvent {
            keysym: 0xffe1,
            down: true,
        });
        held.note(Kind::QemuKeyEvent {
            keysym: 0x61,
            keycode: 30,
            down: true,
        });
        held.note(Kind::KeyEvent {
            keysym: 0x62,
            down: true,
        });
        held.note(Kind::KeyEvent {
            keysym: 0x62,
            down: false,
        });
        held.note(Kind::PointerEvent {
            buttons: 1,
            x: 300,
            y: 2,
        });
        let release = held.release();
        assert_eq!(
            release,
            [
                &[255, 0, 0, 0, 0, 0, 0, 0x61, 0, 0, 0, 30][..],
                &[4, 0, 0, 0, 0, 0, 0xff, 0xe1],
                &[5, 0, 1, 44, 0, 2],
            ]
            .concat()
        );
        assert!(held.release().is_empty());
    }
}
