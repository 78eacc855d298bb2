//! The clipboard's text, read and set.

use serde::Deserialize;
use utoipa::ToSchema;

/// The desktop's clipboard as UTF-8 text: the body of `PUT
/// .../clipboard` and the answer of `GET`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ClipboardText {
    /// At most 1 MiB (in UTF-8).
    #[schema(max_length = 1048576)]
    pub text: String,
}
