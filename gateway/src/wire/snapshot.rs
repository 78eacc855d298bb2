//! `POST /v1/workspaces/{id}/snapshot` and `POST /v1/workspaces/{id}/rollback`.

use serde::Deserialize;
use utoipa::ToSchema;

use crate::error::OpError;

/// Checks a snapshot's name: 1..=64 of `A-Z a-z 0-9 . _ -`.
pub fn checked_name(field: &str, name: &str) -> Result<(), OpError> {
    let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    if name.is_empty() || name.len() > 64 || !name.chars().all(plain) {
        return Err(OpError::bad_request(format!(
            "{field}: must be 1..=64 of A-Z a-z 0-9 . _ -"
        )));
    }
    Ok(())
}

/// Checks a snapshot id as given in a body: `snap-` and 12 hex digits.
pub fn checked_id(field: &str, id: &str) -> Result<(), OpError> {
    let hex = id.strip_prefix("snap-").unwrap_or_default();
    if hex.len() != 12 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(OpError::bad_request(format!(
            "{field}: must be a snapshot id such as snap-0123456789ab (GET /v1/snapshots lists yours)"
        )));
    }
    Ok(())
}

/// A snapshot to take.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewSnapshot {
    /// Unique among the caller's snapshots; 1..=64 of `A-Z a-z 0-9 . _ -`.
    #[schema(min_length = 1, max_length = 64)]
    pub name: String,
}

impl NewSnapshot {
    pub fn parse(body: &[u8]) -> Result<String, OpError> {
        let new = super::parse::<Self>(body)?;
        checked_name("name", &new.name)?;
        Ok(new.name)
    }
}

/// The snapshot to roll a workspace back to.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Rollback {
    /// A snapshot id of the caller's.
    pub snapshot: String,
}

impl Rollback {
    pub fn parse(body: &[u8]) -> Result<String, OpError> {
        let rollback = super::parse::<Self>(body)?;
        checked_id("snapshot", &rollback.snapshot)?;
        Ok(rollback.snapshot)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_ids_are_checked_with_the_field_named() {
        assert_eq!(
            NewSnapshot::parse(br#"{"name": "logged-in"}"#).unwrap(),
            "logged-in"
        );
        for bad in [
            r#"{"name": ""}"#,
            r#"{"name": "a/b"}"#,
            r#"{"name": "x", "y": 1}"#,
        ] {
            assert!(NewSnapshot::parse(bad.as_bytes()).is_err(), "{bad}");
        }
        let err = NewSnapshot::parse(br#"{"name": "../x"}"#).unwrap_err();
        assert!(err.message.starts_with("name:"), "{}", err.message);
        assert_eq!(
            Rollback::parse(br#"{"snapshot": "snap-0123456789ab"}"#).unwrap(),
            "snap-0123456789ab"
        );
        let err = Rollback::parse(br#"{"snapshot": "snap-../../x"}"#).unwrap_err();
        assert!(err.message.starts_with("snapshot:"), "{}", err.message);
    }
}
