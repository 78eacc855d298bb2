//! A parser for the client→server half of RFB (RFC 6143, versions 3.3, 3.7
//! and 3.8) and the extensions noVNC sends: QEMU extended key events (255),
//! EnableContinuousUpdates (150), Fence (248), xvp (250), SetDesktopSize
//! (251) and the extended clipboard's negative ClientCutText lengths.
//!
//! Bytes from a viewer are outside data: every length is checked before it is
//! trusted, nothing is buffered beyond one message (the largest is a
//! ClientCutText of [`MAX_CUT_TEXT`]), and anything it does not know is an
//! error rather than a guess. It only splits and classifies; what to forward
//! is decided by [`super::filter`].

/// Largest ClientCutText payload accepted from a viewer.
pub const MAX_CUT_TEXT: usize = 1 << 20;
/// Largest Fence payload (RFB says 64).
const MAX_FENCE: usize = 64;

/// One client→server message, with what the filter needs to know of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `RFB 003.00<minor>`: 3, 7 or 8.
    ProtocolVersion {
        minor: u16,
    },
    SecurityChoice,
    ClientInit,
    SetPixelFormat,
    SetEncodings,
    FramebufferUpdateRequest,
    KeyEvent {
        keysym: u32,
        down: bool,
    },
    PointerEvent {
        buttons: u8,
        x: u16,
        y: u16,
    },
    ClientCutText,
    EnableContinuousUpdates,
    Fence,
    Xvp,
    SetDesktopSize,
    QemuKeyEvent {
        keysym: u32,
        keycode: u32,
        down: bool,
    },
    QemuAudio,
}

impl Kind {
    /// Whether the message acts on the desktop (so only the holder of the
    /// control lock may send it).
    pub fn is_input(self) -> bool {
        matches!(
            self,
            Self::KeyEvent { .. }
                | Self::PointerEvent { .. }
                | Self::ClientCutText
                | Self::QemuKeyEvent { .. }
                | Self::Xvp
                | Self::SetDesktopSize
        )
    }
}

/// Why a viewer's stream is not RFB we accept.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RfbError {
    #[error("bad RFB ProtocolVersion {0:?}: expected \"RFB 003.008\\n\"")]
    BadVersion(String),
    #[error("RFB version {0}.{1} is not supported: use 3.3, 3.7 or 3.8")]
    UnsupportedVersion(u16, u16),
    #[error("security type {0} is not offered (only None, 1)")]
    SecurityType(u8),
    #[error("unknown RFB message type {0}")]
    UnknownType(u8),
    #[error("ClientCutText of {0} bytes is over the 1 MiB limit")]
    CutTextTooLong(u64),
    #[error("extended ClientCutText of {0} bytes lacks its 4-byte flags")]
    CutTextTooShort(u32),
    #[error("Fence payload of {0} bytes is over 64")]
    FenceTooLong(u8),
    #[error("unknown QEMU message subtype {0}")]
    QemuSubtype(u8),
    #[error("unknown QEMU audio operation {0}")]
    QemuAudio(u16),
    #[error("truncated RFB {kind}: {have} of {need} bytes, then {then}")]
    Truncated {
        kind: &'static str,
        have: usize,
        need: usize,
        then: &'static str,
    },
}

/// Where the viewer is in the conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Version,
    Security,
    ClientInit,
    Messages,
}

/// How much of a message the pending bytes hold.
enum Measure {
    /// Not all there: `need` bytes in all (as far as known yet).
    Need {
        kind: &'static str,
        need: usize,
    },
    Done {
        kind: Kind,
        len: usize,
        next: Phase,
    },
}

/// One complete message as the viewer sent it.
#[derive(Debug, PartialEq, Eq)]
pub struct Message<'a> {
    pub kind: Kind,
    pub bytes: &'a [u8],
}

/// Splits a viewer's byte stream into messages. The handshake messages are
/// answered by the gateway itself ([`super::handshake`]), never forwarded.
pub struct RfbParser {
    phase: Phase,
    buf: Vec<u8>,
    pos: usize,
}

impl Default for RfbParser {
    fn default() -> Self {
        Self {
            phase: Phase::Version,
            buf: Vec::new(),
            pos: 0,
        }
    }
}

impl RfbParser {
    /// Appends bytes that arrived from the viewer.
    pub fn push(&mut self, data: &[u8]) {
        if self.pos > 0 {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
        self.buf.extend_from_slice(data);
    }

    /// Bytes received that do not make a whole message yet.
    pub fn pending(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// The next whole message, if one has arrived.
    pub fn next_message(&mut self) -> Result<Option<Message<'_>>, RfbError> {
        match measure(self.phase, &self.buf[self.pos..])? {
            Measure::Need { .. } => Ok(None),
            Measure::Done { kind, len, next } => {
                self.phase = next;
                let start = self.pos;
                self.pos += len;
                Ok(Some(Message {
                    kind,
                    bytes: &self.buf[start..self.pos],
                }))
            }
        }
    }

    /// The error to report when the stream stops (`then`) in mid-message;
    /// `None` if nothing is pending.
    pub fn truncated(&self, then: &'static str) -> Option<RfbError> {
        let have = self.pending();
        if have == 0 {
            return None;
        }
        match measure(self.phase, &self.buf[self.pos..]) {
            Ok(Measure::Need { kind, need }) => Some(RfbError::Truncated {
                kind,
                have,
                need,
                then,
            }),
            Ok(Measure::Done { .. }) => None,
            Err(err) => Some(err),
        }
    }
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Whole if `input` holds `len` bytes, else how many are needed.
fn fixed(input: &[u8], name: &'static str, len: usize, kind: Kind, next: Phase) -> Measure {
    if input.len() < len {
        Measure::Need {
            kind: name,
            need: len,
        }
    } else {
        Measure::Done { kind, len, next }
    }
}

fn measure(phase: Phase, input: &[u8]) -> Result<Measure, RfbError> {
    let need = |kind, need| Ok(Measure::Need { kind, need });
    match phase {
        Phase::Version => {
            if input.len() < 12 {
                return need("ProtocolVersion", 12);
            }
            let (next, minor) = match parse_version(&input[..12])? {
                (3, 3) => (Phase::ClientInit, 3),
                (3, minor @ (7 | 8)) => (Phase::Security, minor),
                (major, minor) => return Err(RfbError::UnsupportedVersion(major, minor)),
            };
            Ok(fixed(input, "", 12, Kind::ProtocolVersion { minor }, next))
        }
        Phase::Security => match input.first() {
            None => need("security type", 1),
            Some(1) => Ok(fixed(input, "", 1, Kind::SecurityChoice, Phase::ClientInit)),
            Some(&other) => Err(RfbError::SecurityType(other)),
        },
        Phase::ClientInit => Ok(fixed(
            input,
            "ClientInit",
            1,
            Kind::ClientInit,
            Phase::Messages,
        )),
        Phase::Messages => match input.first() {
            None => need("message", 1),
            Some(&kind) => message(kind, input),
        },
    }
}

/// `RFB xxx.yyy\n` → (xxx, yyy).
fn parse_version(text: &[u8]) -> Result<(u16, u16), RfbError> {
    let bad = || RfbError::BadVersion(String::from_utf8_lossy(text).into_owned());
    let digits = |range: std::ops::Range<usize>| -> Result<u16, RfbError> {
        let part = &text[range];
        if !part.iter().all(u8::is_ascii_digit) {
            return Err(bad());
        }
        part.iter()
            .try_fold(0u16, |n, d| {
                n.checked_mul(10)?.checked_add(u16::from(d - b'0'))
            })
            .ok_or_else(bad)
    };
    if &text[..4] != b"RFB " || text[7] != b'.' || text[11] != b'\n' {
        return Err(bad());
    }
    Ok((digits(4..7)?, digits(8..11)?))
}

fn message(kind: u8, b: &[u8]) -> Result<Measure, RfbError> {
    let m = Phase::Messages;
    Ok(match kind {
        0 => fixed(b, "SetPixelFormat", 20, Kind::SetPixelFormat, m),
        2 if b.len() < 4 => Measure::Need {
            kind: "SetEncodings",
            need: 4,
        },
        2 => {
            let len = 4 + 4 * usize::from(u16_at(b, 2));
            fixed(b, "SetEncodings", len, Kind::SetEncodings, m)
        }
        3 => fixed(
            b,
            "FramebufferUpdateRequest",
            10,
            Kind::FramebufferUpdateRequest,
            m,
        ),
        4 if b.len() < 8 => Measure::Need {
            kind: "KeyEvent",
            need: 8,
        },
        4 => {
            let key = Kind::KeyEvent {
                down: b[1] != 0,
                keysym: u32_at(b, 4),
            };
            fixed(b, "KeyEvent", 8, key, m)
        }
        5 if b.len() < 6 => Measure::Need {
            kind: "PointerEvent",
            need: 6,
        },
        5 => {
            let pointer = Kind::PointerEvent {
                buttons: b[1],
                x: u16_at(b, 2),
                y: u16_at(b, 4),
            };
            fixed(b, "PointerEvent", 6, pointer, m)
        }
        6 if b.len() < 8 => Measure::Need {
            kind: "ClientCutText",
            need: 8,
        },
        6 => fixed(
            b,
            "ClientCutText",
            8 + cut_text_len(b)?,
            Kind::ClientCutText,
            m,
        ),
        150 => fixed(
            b,
            "EnableContinuousUpdates",
            10,
            Kind::EnableContinuousUpdates,
            m,
        ),
        248 if b.len() < 9 => Measure::Need {
            kind: "Fence",
            need: 9,
        },
        248 => {
            let payload = b[8];
            if usize::from(payload) > MAX_FENCE {
                return Err(RfbError::FenceTooLong(payload));
            }
            fixed(b, "Fence", 9 + usize::from(payload), Kind::Fence, m)
        }
        250 => fixed(b, "xvp", 4, Kind::Xvp, m),
        251 if b.len() < 8 => Measure::Need {
            kind: "SetDesktopSize",
            need: 8,
        },
        251 => {
            let len = 8 + 16 * usize::from(b[6]);
            fixed(b, "SetDesktopSize", len, Kind::SetDesktopSize, m)
        }
        255 => qemu(b)?,
        other => return Err(RfbError::UnknownType(other)),
    })
}

/// The payload length of a ClientCutText; negative means the extended
/// clipboard format (flags then data), whose size is the absolute value.
fn cut_text_len(b: &[u8]) -> Result<usize, RfbError> {
    let raw = i32::from_be_bytes([b[4], b[5], b[6], b[7]]);
    let len = raw.unsigned_abs();
    if len as usize > MAX_CUT_TEXT {
        return Err(RfbError::CutTextTooLong(u64::from(len)));
    }
    if raw < 0 && len < 4 {
        return Err(RfbError::CutTextTooShort(len));
    }
    Ok(len as usize)
}

fn qemu(b: &[u8]) -> Result<Measure, RfbError> {
    let m = Phase::Messages;
    let Some(&sub) = b.get(1) else {
        return Ok(Measure::Need {
            kind: "QEMU message",
            need: 2,
        });
    };
    match sub {
        0 if b.len() < 12 => Ok(Measure::Need {
            kind: "QEMU key event",
            need: 12,
        }),
        0 => {
            let key = Kind::QemuKeyEvent {
                down: u16_at(b, 2) != 0,
                keysym: u32_at(b, 4),
                keycode: u32_at(b, 8),
            };
            Ok(fixed(b, "QEMU key event", 12, key, m))
        }
        1 if b.len() < 4 => Ok(Measure::Need {
            kind: "QEMU audio",
            need: 4,
        }),
        1 => match u16_at(b, 2) {
            0 | 1 => Ok(fixed(b, "QEMU audio", 4, Kind::QemuAudio, m)),
            2 => Ok(fixed(b, "QEMU audio", 10, Kind::QemuAudio, m)),
            op => Err(RfbError::QemuAudio(op)),
        },
        other => Err(RfbError::QemuSubtype(other)),
    }
}

#[cfg(test)]
mod tests;
