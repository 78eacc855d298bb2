//! `POST /v1/secrets` and `POST /v1/workspaces/{id}/secrets`.

use serde::Deserialize;
use utoipa::ToSchema;

use crate::error::OpError;

/// Longest secret value, in bytes.
pub const MAX_VALUE: usize = 8 * 1024;

/// Most hosts one secret may go to.
pub const MAX_HOSTS: usize = 16;

/// A secret to store. Its value is never shown again.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewSecret {
    /// A name for people: 1..=64 bytes, no control characters.
    #[schema(min_length = 1, max_length = 64, example = "github")]
    pub name: String,
    /// What the proxy sends in place of the placeholder: printable ASCII
    /// (it goes into HTTP headers), at most 8 KiB.
    #[schema(min_length = 1, max_length = 8192)]
    pub value: String,
    /// The host names it may go to, exactly (no wildcards, no addresses):
    /// only requests to these, over TLS the proxy intercepts, get the value.
    #[schema(min_items = 1, max_items = 16, example = json!(["api.github.com"]))]
    pub hosts: Vec<String>,
    /// Also put the value in place of the placeholder in request bodies to
    /// these hosts, not only in headers (default false: headers only). The
    /// proxy then reads such bodies up to 1 MiB; a longer one, or one with
    /// a `Content-Encoding`, is sent as it came. The value goes in as it
    /// is, not escaped for JSON or a form.
    #[serde(default)]
    #[schema(default = false)]
    pub body: bool,
}

/// A checked [`NewSecret`] (hosts lowercased, without a trailing dot).
#[derive(Clone)]
pub struct SecretRequest {
    pub name: String,
    pub value: String,
    pub hosts: Vec<String>,
    pub body: bool,
}

impl std::fmt::Debug for SecretRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretRequest")
            .field("name", &self.name)
            .field("hosts", &self.hosts)
            .field("body", &self.body)
            .finish_non_exhaustive()
    }
}

impl NewSecret {
    pub fn parse(body: &[u8]) -> Result<SecretRequest, OpError> {
        let new = super::parse::<Self>(body)?;
        if new.name.trim().is_empty()
            || new.name.len() > 64
            || new.name.chars().any(char::is_control)
        {
            return Err(OpError::bad_request(
                "name: 1..=64 bytes without control characters",
            ));
        }
        if new.value.is_empty()
            || new.value.len() > MAX_VALUE
            || !new.value.bytes().all(|b| (0x20..0x7f).contains(&b))
        {
            return Err(OpError::bad_request(format!(
                "value: 1..={MAX_VALUE} bytes of printable ASCII (it is sent in HTTP headers)"
            )));
        }
        if new.value.contains(cubicle_runtime::egress::secrets::PREFIX) {
            return Err(OpError::bad_request(
                "value: holds a placeholder; give the secret itself",
            ));
        }
        if new.hosts.is_empty() || new.hosts.len() > MAX_HOSTS {
            return Err(OpError::bad_request(format!(
                "hosts: 1..={MAX_HOSTS} host names the secret may go to"
            )));
        }
        let mut hosts = Vec::with_capacity(new.hosts.len());
        for (i, host) in new.hosts.iter().enumerate() {
            let host = host.trim_end_matches('.').to_ascii_lowercase();
            let name_like = !host.is_empty()
                && host.len() <= 253
                && host.parse::<std::net::IpAddr>().is_err()
                && host.contains(|c: char| c.is_ascii_alphabetic())
                && host.split('.').all(|label| {
                    !label.is_empty()
                        && label.len() <= 63
                        && label
                            .bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b == b'-')
                });
            if !name_like {
                return Err(OpError::bad_request(format!(
                    "hosts[{i}]: {:?} is not a host name (exact names only: no wildcard, port or address)",
                    new.hosts[i]
                )));
            }
            if !hosts.contains(&host) {
                hosts.push(host);
            }
        }
        Ok(SecretRequest {
            name: new.name,
            value: new.value,
            hosts,
            body: new.body,
        })
    }
}

/// Gives a stored secret to a workspace: it gets a placeholder, in an
/// environment variable of its commands, a file, both or neither (the
/// answer shows it).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BindSecret {
    /// The secret's id (`sec-…`).
    #[schema(example = "sec-0123456789ab")]
    pub secret: String,
    /// Set to the placeholder in every command run through exec
    /// (`[A-Za-z_][A-Za-z0-9_]*`).
    #[schema(example = "GITHUB_TOKEN")]
    pub env: Option<String>,
    /// A file written with the placeholder (mode 0600, as the desktop user),
    /// through the files API and its policy.
    #[schema(example = "/home/user/.config/github-token")]
    pub path: Option<String>,
}

impl BindSecret {
    pub fn parse(body: &[u8]) -> Result<Self, OpError> {
        let bind = super::parse::<Self>(body)?;
        if !bind.secret.starts_with("sec-") || bind.secret.len() > 64 {
            return Err(OpError::bad_request(
                "secret: a secret id such as \"sec-0123456789ab\" (GET /v1/secrets lists them)",
            ));
        }
        if let Some(env) = &bind.env {
            let mut bytes = env.bytes();
            let first = bytes.next();
            let ok = env.len() <= 128
                && first.is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
                && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_');
            if !ok {
                return Err(OpError::bad_request(
                    "env: a variable name ([A-Za-z_][A-Za-z0-9_]*, at most 128 bytes)",
                ));
            }
        }
        Ok(bind)
    }
}

/// A selector of a field in the page, if given: 1..=1024 bytes without
/// control characters.
pub fn check_selector(selector: Option<&str>) -> Result<(), OpError> {
    if let Some(selector) = selector
        && (selector.trim().is_empty()
            || selector.len() > crate::browser_fill::MAX_SELECTOR
            || selector.chars().any(char::is_control))
    {
        return Err(OpError::bad_request(format!(
            "selector: a CSS selector of 1..={} bytes without control characters, or leave it out for the focused field",
            crate::browser_fill::MAX_SELECTOR
        )));
    }
    Ok(())
}

/// Fills a secret the workspace was given into a field of the page on
/// screen, without the caller seeing it (`fill_secret`).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FillSecret {
    /// The secret's id (`sec-…`), or the placeholder the workspace holds.
    #[schema(example = "sec-0123456789ab")]
    pub secret: String,
    /// A CSS selector of the field in the page on screen; without it, the
    /// focused field. It must be a password field or an input marked with
    /// an `autocomplete` token (`username`, `one-time-code`, ...).
    #[schema(max_length = 1024, example = "#password")]
    pub selector: Option<String>,
}

impl FillSecret {
    pub fn parse(body: &[u8]) -> Result<Self, OpError> {
        let fill = super::parse::<Self>(body)?;
        let placeholder = fill
            .secret
            .strip_prefix(cubicle_runtime::egress::secrets::PREFIX)
            .is_some_and(|digits| {
                digits.len() == 32 && digits.bytes().all(|b| b.is_ascii_hexdigit())
            });
        if !(placeholder || fill.secret.starts_with("sec-") && fill.secret.len() <= 64) {
            return Err(OpError::bad_request(
                "secret: a secret id such as \"sec-0123456789ab\" or the workspace's placeholder for it (GET /v1/workspaces/{id}/secrets lists both)",
            ));
        }
        check_selector(fill.selector.as_deref())?;
        Ok(fill)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_checked_field_by_field() {
        let ok = NewSecret::parse(
            br#"{"name":"gh","value":"ghp_x","hosts":["API.GitHub.com.","api.github.com"]}"#,
        )
        .unwrap();
        assert_eq!(ok.hosts, ["api.github.com"]);
        assert!(!ok.body, "headers only unless asked");
        assert!(!format!("{ok:?}").contains("ghp_x"));
        let body = NewSecret::parse(br#"{"name":"gh","value":"v","hosts":["a.b"],"body":true}"#);
        assert!(body.unwrap().body);
        for (body, names) in [
            (r#"{"name":"","value":"v","hosts":["a.b"]}"#, "name"),
            (r#"{"name":"n","value":"","hosts":["a.b"]}"#, "value"),
            (r#"{"name":"n","value":"a\nb","hosts":["a.b"]}"#, "value"),
            (r#"{"name":"n","value":"v","hosts":[]}"#, "hosts"),
            (r#"{"name":"n","value":"v","hosts":["*.a.b"]}"#, "hosts[0]"),
            (
                r#"{"name":"n","value":"v","hosts":["a.b","10.0.0.1"]}"#,
                "hosts[1]",
            ),
            (
                r#"{"name":"n","value":"v","hosts":["a.b:443"]}"#,
                "hosts[0]",
            ),
            (r#"{"name":"n","value":"v","hosts":["a.b"],"x":1}"#, "x"),
            (
                r#"{"name":"n","value":"v","hosts":["a.b"],"body":"yes"}"#,
                "body",
            ),
            (
                r#"{"name":"n","value":"cubicle_secret_00","hosts":["a.b"]}"#,
                "placeholder",
            ),
        ] {
            let err = NewSecret::parse(body.as_bytes()).unwrap_err();
            assert!(err.message.contains(names), "{body}: {}", err.message);
        }
        assert!(BindSecret::parse(br#"{"secret":"sec-1","env":"GH_TOKEN"}"#).is_ok());
        for (body, names) in [
            (r#"{"secret":"x"}"#, "secret"),
            (r#"{"secret":"sec-1","env":"1A"}"#, "env"),
            (r#"{"secret":"sec-1","env":"A B"}"#, "env"),
        ] {
            let err = BindSecret::parse(body.as_bytes()).unwrap_err();
            assert!(err.message.contains(names), "{body}: {}", err.message);
        }
    }

    #[test]
    fn a_fill_names_a_secret_and_maybe_a_field() {
        let by_id =
            FillSecret::parse(br##"{"secret":"sec-0123456789ab","selector":"#pw"}"##).unwrap();
        assert_eq!(by_id.selector.as_deref(), Some("#pw"));
        let placeholder = format!(r#"{{"secret":"cubicle_secret_{}"}}"#, "ab".repeat(16));
        assert!(
            FillSecret::parse(placeholder.as_bytes())
                .unwrap()
                .selector
                .is_none()
        );
        for (body, starts) in [
            (r#"{"secret":"pw"}"#, "secret:"),
            (r#"{"secret":"cubicle_secret_00"}"#, "secret:"),
            (r#"{"secret":"sec-1","selector":" "}"#, "selector:"),
            (r#"{"secret":"sec-1","selector":"a\nb"}"#, "selector:"),
            (r#"{"secret":"sec-1","value":"x"}"#, "value"),
        ] {
            let message = FillSecret::parse(body.as_bytes()).unwrap_err().message;
            assert!(message.contains(starts), "{body} → {message}");
        }
    }
}
