//! `POST /v1/workspaces/{id}/share`.

use serde::Deserialize;
use utoipa::ToSchema;

use crate::error::OpError;

/// Shortest and longest life of a share link, and its default.
pub const MIN_EXPIRES_S: u64 = 60;
pub const MAX_EXPIRES_S: u64 = 7 * 24 * 3600;
pub const DEFAULT_EXPIRES_S: u64 = 3600;

/// What a share link lets its person do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ShareMode {
    /// Watch the screen; never any input.
    View,
    /// Watch, and take control (then their input reaches the desktop,
    /// the agent's is held off until they hand it back).
    Control,
}

/// A share link to make.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewShare {
    pub mode: ShareMode,
    /// Seconds until it stops working by itself: 60..=604800, 3600 by
    /// default.
    #[schema(minimum = 60, maximum = 604800)]
    pub expires_in_s: Option<u64>,
}

impl NewShare {
    /// Parses and checks a body; `(mode, seconds)`.
    pub fn parse(body: &[u8]) -> Result<(ShareMode, u64), OpError> {
        let new = super::parse::<Self>(body)?;
        let seconds = new.expires_in_s.unwrap_or(DEFAULT_EXPIRES_S);
        if !(MIN_EXPIRES_S..=MAX_EXPIRES_S).contains(&seconds) {
            return Err(OpError::bad_request(format!(
                "expires_in_s: must be {MIN_EXPIRES_S}..={MAX_EXPIRES_S} seconds (a minute to a week)"
            )));
        }
        Ok((new.mode, seconds))
    }
}
