//! `POST /v1/tokens`.

use cubicle_runtime::tokens::{Role, Scope};
use serde::Deserialize;
use utoipa::ToSchema;

use crate::error::OpError;

/// Longest token name accepted.
pub const MAX_NAME: usize = 128;

/// A token to make; its secret is in the answer and nowhere else.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewToken {
    /// 1..=128 characters, no control characters.
    #[schema(
        min_length = 1,
        max_length = 128,
        pattern = r"^[^\u0000-\u001F\u007F-\u009F]+$"
    )]
    pub name: String,
    /// `admin`, `agent`, `operator` or `auditor`.
    #[schema(value_type = RoleName)]
    pub role: String,
    /// Workspaces it reaches besides the ones it creates: `"all"` or a list
    /// of ids. Default: agents their own only; other roles every workspace.
    #[schema(inline)]
    pub scope: Option<ScopeBody>,
}

/// A token's role.
#[derive(ToSchema)]
#[schema(rename_all = "lowercase")]
#[allow(dead_code)]
pub enum RoleName {
    Admin,
    Agent,
    Operator,
    Auditor,
}

/// `"all"` or `["ws-...", ...]`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum ScopeBody {
    All(String),
    Only(Vec<String>),
}

/// A parsed, checked [`NewToken`].
#[derive(Debug, PartialEq)]
pub struct TokenRequest {
    pub name: String,
    pub role: Role,
    pub scope: Scope,
}

impl NewToken {
    pub fn parse(body: &[u8]) -> Result<TokenRequest, OpError> {
        let new = super::parse::<Self>(body)?;
        if new.name.is_empty()
            || new.name.chars().count() > MAX_NAME
            || new.name.chars().any(char::is_control)
        {
            return Err(OpError::bad_request(format!(
                "name: must be a string of 1..={MAX_NAME} characters without control characters"
            )));
        }
        // `viewer` and `guest` are share links' roles: made only with an
        // end, for one workspace (POST /v1/workspaces/{id}/share).
        let role = Role::parse(&new.role)
            .filter(|role| !matches!(role, Role::Viewer | Role::Guest))
            .ok_or_else(|| {
                OpError::bad_request(
                    "role: must be one of \"admin\", \"agent\", \"operator\", \"auditor\" (a link for a person to watch or take over one workspace: POST /v1/workspaces/{id}/share)",
                )
            })?;
        let bad_scope = || {
            OpError::bad_request(
                "scope: must be \"all\" or a list of workspace ids such as [\"ws-0123456789ab\"]",
            )
        };
        let scope = match new.scope {
            None => Scope::Default,
            Some(ScopeBody::All(all)) if all == "all" => Scope::All,
            Some(ScopeBody::All(_)) => return Err(bad_scope()),
            Some(ScopeBody::Only(ids)) => {
                let valid = ids.len() <= 1000
                    && ids.iter().all(|id| id.starts_with("ws-") && id.len() <= 64);
                if !valid {
                    return Err(bad_scope());
                }
                Scope::Only(ids)
            }
        };
        Ok(TokenRequest {
            name: new.name,
            role,
            scope,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_bodies_are_checked_field_by_field() {
        let ok = NewToken::parse(br#"{"name":"alice","role":"operator"}"#).unwrap();
        assert_eq!(
            (ok.name.as_str(), ok.role, ok.scope),
            ("alice", Role::Operator, Scope::Default)
        );
        let scoped = NewToken::parse(br#"{"name":"a","role":"agent","scope":["ws-1"]}"#).unwrap();
        assert_eq!(scoped.scope, Scope::Only(vec!["ws-1".into()]));
        let all = NewToken::parse(br#"{"name":"a","role":"agent","scope":"all"}"#).unwrap();
        assert_eq!(all.scope, Scope::All);
        for (body, field) in [
            (r#"{"name":"a","role":"root"}"#, "role"),
            (r#"{"name":"a"}"#, "role"),
            (r#"{"role":"agent"}"#, "name"),
            (r#"{"name":"","role":"agent"}"#, "name"),
            (r#"{"name":"a","role":"agent","x":1}"#, "`x`"),
            (r#"{"name":"a","role":"agent","scope":"some"}"#, "scope"),
            (r#"{"name":"a","role":"agent","scope":[1]}"#, "scope"),
            ("[]", "request body"),
            ("{", "JSON"),
        ] {
            let message = NewToken::parse(body.as_bytes()).unwrap_err().message;
            assert!(message.contains(field), "{body}: {message}");
        }
    }
}
