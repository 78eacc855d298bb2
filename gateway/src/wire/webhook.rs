//! `POST /v1/webhooks`.

use serde::Deserialize;
use utoipa::ToSchema;

use crate::error::OpError;
use crate::webhooks::Secret;

/// A subscription to make.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewWebhook {
    /// Where deliveries are POSTed: http or https. By default its host must
    /// resolve to public addresses only.
    #[schema(max_length = 2048, example = "https://example.com/hooks/cubicle")]
    pub url: String,
    /// Event kinds to deliver: a kind (`approval.request`), a family
    /// (`workspace.*`) or `*`; `webhook.*` never.
    #[schema(min_items = 1, max_items = 64)]
    pub kinds: Vec<String>,
    /// Only this workspace's events. Default: every workspace the token sees.
    pub workspace: Option<String>,
    /// `whsec_` + base64 of 24..=64 bytes, signing every delivery (Standard
    /// Webhooks). Default: one is made and shown in the answer, this once.
    pub secret: Option<String>,
}

/// A parsed, checked [`NewWebhook`] (its URL is checked by the service,
/// which resolves it).
#[derive(Debug)]
pub struct WebhookRequest {
    pub url: String,
    pub kinds: Vec<String>,
    pub workspace: Option<String>,
    pub secret: Option<Secret>,
}

impl NewWebhook {
    pub fn parse(body: &[u8]) -> Result<WebhookRequest, OpError> {
        let new = super::parse::<Self>(body)?;
        crate::webhooks::check_kinds(&new.kinds).map_err(OpError::bad_request)?;
        if let Some(id) = &new.workspace
            && (!id.starts_with("ws-") || id.len() > 64)
        {
            return Err(OpError::bad_request(
                "workspace: must be a workspace id such as \"ws-0123456789ab\"",
            ));
        }
        let secret = new
            .secret
            .as_deref()
            .map(Secret::parse)
            .transpose()
            .map_err(OpError::bad_request)?;
        Ok(WebhookRequest {
            url: new.url,
            kinds: new.kinds,
            workspace: new.workspace,
            secret,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_are_checked_field_by_field() {
        let ok = NewWebhook::parse(br#"{"url":"https://example.com/h","kinds":["workspace.*"]}"#)
            .unwrap();
        assert_eq!(ok.kinds, ["workspace.*"]);
        assert!(ok.secret.is_none());
        for (body, names) in [
            (r#"{"url":"https://e.com","kinds":[]}"#, "kinds"),
            (
                r#"{"url":"https://e.com","kinds":["webhook.failed"]}"#,
                "kinds",
            ),
            (
                r#"{"url":"https://e.com","kinds":["*"],"secret":"abc"}"#,
                "secret",
            ),
            (
                r#"{"url":"https://e.com","kinds":["*"],"workspace":"x"}"#,
                "workspace",
            ),
            (
                r#"{"url":"https://e.com","kinds":["*"],"extra":1}"#,
                "extra",
            ),
        ] {
            let err = NewWebhook::parse(body.as_bytes()).unwrap_err();
            assert!(err.message.contains(names), "{body}: {}", err.message);
        }
    }
}
