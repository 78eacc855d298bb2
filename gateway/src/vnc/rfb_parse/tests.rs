use super::*;

const HANDSHAKE: &[u8] = b"RFB 003.008\n\x01\x01";

fn key(down: bool, keysym: u32) -> Vec<u8> {
    let mut m = vec![4, u8::from(down), 0, 0];
    m.extend_from_slice(&keysym.to_be_bytes());
    m
}

fn pointer(buttons: u8, x: u16, y: u16) -> Vec<u8> {
    let mut m = vec![5, buttons];
    m.extend_from_slice(&x.to_be_bytes());
    m.extend_from_slice(&y.to_be_bytes());
    m
}

fn cut_text(len: i32, payload: &[u8]) -> Vec<u8> {
    let mut m = vec![6, 0, 0, 0];
    m.extend_from_slice(&len.to_be_bytes());
    m.extend_from_slice(payload);
    m
}

/// A session as noVNC opens it, then one of every message it may send.
fn session() -> Vec<u8> {
    let mut s = HANDSHAKE.to_vec();
    s.extend_from_slice(&[0; 20]); // SetPixelFormat
    s.extend_from_slice(&[2, 0, 0, 2, 0, 0, 0, 16, 0xff, 0xff, 0xfe, 0xc4]); // SetEncodings
    s.extend_from_slice(&[3, 1, 0, 0, 0, 0, 5, 0, 3, 32]); // FramebufferUpdateRequest
    s.extend_from_slice(&key(true, 0x61));
    s.extend_from_slice(&pointer(1, 10, 20));
    s.extend_from_slice(&cut_text(5, b"hello"));
    s.extend_from_slice(&cut_text(-8, &[0, 0, 0, 1, 9, 9, 9, 9])); // extended
    s.extend_from_slice(&[150, 1, 0, 0, 0, 0, 5, 0, 3, 32]);
    s.extend_from_slice(&[248, 0, 0, 0, 0, 0, 0, 3, 2, 7, 7]); // Fence
    s.extend_from_slice(&[250, 0, 1, 2]); // xvp
    let mut size = vec![251, 0, 5, 0, 3, 32, 1, 0];
    size.extend_from_slice(&[0; 16]);
    s.extend_from_slice(&size);
    s.extend_from_slice(&[255, 0, 0, 1, 0, 0, 0, 0x62, 0, 0, 0, 56]); // QEMU key
    s.extend_from_slice(&[255, 1, 0, 2, 3, 2, 0, 0, 0xac, 0x44]); // QEMU audio format
    s
}

fn kinds_of(parser: &mut RfbParser) -> Result<Vec<(Kind, usize)>, RfbError> {
    let mut out = Vec::new();
    while let Some(message) = parser.next_message()? {
        out.push((message.kind, message.bytes.len()));
    }
    Ok(out)
}

#[test]
fn splits_every_message_novnc_sends() {
    let mut parser = RfbParser::default();
    parser.push(&session());
    let kinds = kinds_of(&mut parser).unwrap();
    let names: Vec<Kind> = kinds.iter().map(|(k, _)| *k).collect();
    assert_eq!(
        names,
        [
            Kind::ProtocolVersion { minor: 8 },
            Kind::SecurityChoice,
            Kind::ClientInit,
            Kind::SetPixelFormat,
            Kind::SetEncodings,
            Kind::FramebufferUpdateRequest,
            Kind::KeyEvent {
                keysym: 0x61,
                down: true
            },
            Kind::PointerEvent {
                buttons: 1,
                x: 10,
                y: 20
            },
            Kind::ClientCutText,
            Kind::ClientCutText,
            Kind::EnableContinuousUpdates,
            Kind::Fence,
            Kind::Xvp,
            Kind::SetDesktopSize,
            Kind::QemuKeyEvent {
                keysym: 0x62,
                keycode: 56,
                down: true
            },
            Kind::QemuAudio,
        ]
    );
    let total: usize = kinds.iter().map(|(_, n)| n).sum();
    assert_eq!(total, session().len());
    assert_eq!(parser.pending(), 0);
}

#[test]
fn byte_by_byte_gives_the_same_messages() {
    let whole = {
        let mut parser = RfbParser::default();
        parser.push(&session());
        kinds_of(&mut parser).unwrap()
    };
    let mut parser = RfbParser::default();
    let mut pieces = Vec::new();
    for byte in session() {
        parser.push(&[byte]);
        pieces.extend(kinds_of(&mut parser).unwrap());
    }
    assert_eq!(pieces, whole);
}

#[test]
fn version_3_3_has_no_security_choice() {
    let mut parser = RfbParser::default();
    parser.push(b"RFB 003.003\n\x01");
    parser.push(&key(false, 1));
    let kinds: Vec<Kind> = kinds_of(&mut parser)
        .unwrap()
        .into_iter()
        .map(|k| k.0)
        .collect();
    assert_eq!(kinds[1], Kind::ClientInit);
    assert!(matches!(kinds[2], Kind::KeyEvent { down: false, .. }));
}

fn error_after_handshake(bytes: &[u8]) -> RfbError {
    let mut parser = RfbParser::default();
    parser.push(HANDSHAKE);
    parser.push(bytes);
    kinds_of(&mut parser).unwrap_err()
}

#[test]
fn malformed_streams_are_errors_with_a_reason() {
    assert_eq!(error_after_handshake(&[7]), RfbError::UnknownType(7));
    assert_eq!(error_after_handshake(&[1, 0, 0]), RfbError::UnknownType(1));
    assert_eq!(
        error_after_handshake(&cut_text(0x7fff_ffff, b"")),
        RfbError::CutTextTooLong(0x7fff_ffff)
    );
    assert_eq!(
        error_after_handshake(&cut_text(i32::MIN, b"")),
        RfbError::CutTextTooLong(1 << 31)
    );
    assert_eq!(
        error_after_handshake(&cut_text(-2, b"")),
        RfbError::CutTextTooShort(2)
    );
    assert_eq!(
        error_after_handshake(&cut_text((MAX_CUT_TEXT + 1) as i32, b"")),
        RfbError::CutTextTooLong(MAX_CUT_TEXT as u64 + 1)
    );
    assert_eq!(
        error_after_handshake(&[248, 0, 0, 0, 0, 0, 0, 0, 65]),
        RfbError::FenceTooLong(65)
    );
    assert_eq!(error_after_handshake(&[255, 9]), RfbError::QemuSubtype(9));
    assert_eq!(
        error_after_handshake(&[255, 1, 0, 7]),
        RfbError::QemuAudio(7)
    );
    for reason in [
        error_after_handshake(&cut_text(i32::MIN, b"")).to_string(),
        RfbError::BadVersion("x".repeat(12)).to_string(),
    ] {
        assert!(
            reason.len() <= 123,
            "close reasons fit a close frame: {reason}"
        );
    }
}

#[test]
fn a_cut_text_at_the_limit_is_accepted() {
    let mut parser = RfbParser::default();
    parser.push(HANDSHAKE);
    parser.push(&cut_text(MAX_CUT_TEXT as i32, &vec![b'a'; MAX_CUT_TEXT]));
    let kinds = kinds_of(&mut parser).unwrap();
    assert_eq!(kinds.last(), Some(&(Kind::ClientCutText, MAX_CUT_TEXT + 8)));
}

#[test]
fn bad_handshakes_are_errors() {
    for (bytes, expected) in [
        (&b"HTTP/1.1 200"[..], "ProtocolVersion"),
        (b"RFB 003.00x\n", "ProtocolVersion"),
        (b"RFB 004.001\n", "4.1"),
        (b"RFB 003.008\n\x10", "security type 16"),
        (b"RFB 003.007\n\x02", "security type 2"),
    ] {
        let mut parser = RfbParser::default();
        parser.push(bytes);
        let err = kinds_of(&mut parser).unwrap_err().to_string();
        assert!(err.contains(expected), "{bytes:?}: {err}");
    }
}

#[test]
fn a_message_cut_short_is_reported_as_truncated() {
    let mut parser = RfbParser::default();
    parser.push(HANDSHAKE);
    assert!(parser.truncated("end").is_none());
    parser.push(&pointer(1, 2, 3)[..3]);
    kinds_of(&mut parser).unwrap();
    let err = parser.truncated("nothing for 5s").unwrap();
    assert_eq!(
        err,
        RfbError::Truncated {
            kind: "PointerEvent",
            have: 3,
            need: 6,
            then: "nothing for 5s"
        }
    );
    let mut parser = RfbParser::default();
    parser.push(HANDSHAKE);
    parser.push(&cut_text(100, b"abc"));
    kinds_of(&mut parser).unwrap();
    let message = parser.truncated("end of stream").unwrap().to_string();
    assert!(message.contains("ClientCutText: 11 of 108"), "{message}");
}

#[test]
fn only_desktop_acting_messages_are_input() {
    assert!(
        Kind::KeyEvent {
            keysym: 1,
            down: true
        }
        .is_input()
    );
    assert!(
        Kind::PointerEvent {
            buttons: 0,
            x: 0,
            y: 0
        }
        .is_input()
    );
    assert!(Kind::ClientCutText.is_input());
    assert!(
        Kind::QemuKeyEvent {
            keysym: 1,
            keycode: 2,
            down: true
        }
        .is_input()
    );
    assert!(Kind::SetDesktopSize.is_input());
    assert!(Kind::Xvp.is_input());
    for kind in [
        Kind::SetPixelFormat,
        Kind::SetEncodings,
        Kind::FramebufferUpdateRequest,
        Kind::EnableContinuousUpdates,
        Kind::Fence,
        Kind::ClientInit,
    ] {
        assert!(!kind.is_input(), "{kind:?}");
    }
}
