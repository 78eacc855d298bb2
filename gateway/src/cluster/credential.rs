//! The internal credential an edge puts on every request it routes to a
//! node: who the caller is (the token the edge verified), for which request
//! (method and path), until when, signed with the edges' Ed25519 key. The
//! node checks it with the edges' public key and takes the caller from it;
//! the caller's own secret never reaches the node.
//!
//! Bound to the request and short-lived ([`LIFETIME_MS`]): a credential
//! read off the internal network can only repeat the same request for a
//! minute. The network between edges and nodes is the cluster's own.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use cubicle_runtime::tokens::{Role, Scope, Token};
use ed25519_dalek::{Signature, Signer, SigningKey, Verifier, VerifyingKey};
use serde::{Deserialize, Serialize};

/// The header it travels in.
pub const HEADER: &str = "x-cubicle-edge";
/// How long one is good for.
pub const LIFETIME_MS: i64 = 60_000;

/// Why a credential is refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CredentialError {
    #[error("the edge credential is malformed: {0}")]
    Malformed(&'static str),
    #[error("the edge credential's signature is not the edges' key's")]
    BadSignature,
    #[error("the edge credential expired {0} ms ago")]
    Expired(i64),
    #[error("the edge credential is for {want}, not for this request ({got})")]
    OtherRequest { want: String, got: String },
    #[error("the edge key is not 32 bytes of hex: {0}")]
    BadKey(String),
}

#[derive(Serialize, Deserialize)]
struct Claims {
    token_id: String,
    name: String,
    role: String,
    /// As the store keeps a scope (`Scope::to_column`).
    scope: Option<String>,
    /// `METHOD path?query`.
    request: String,
    /// Unix ms.
    expires: i64,
    /// The edge that signed it (for the node's log).
    edge: String,
}

fn request_line(method: &str, path_and_query: &str) -> String {
    format!("{method} {path_and_query}")
}

fn key_bytes(hex_text: &str) -> Result<[u8; 32], CredentialError> {
    let mut out = [0u8; 32];
    hex::decode_to_slice(hex_text.trim(), &mut out)
        .map_err(|e| CredentialError::BadKey(e.to_string()))?;
    Ok(out)
}

/// An edge's signing side.
pub struct EdgeSigner {
    key: SigningKey,
    edge: String,
}

impl EdgeSigner {
    /// From the edges' private key (32 bytes, hex) and this edge's name.
    pub fn from_hex(seed: &str, edge: &str) -> Result<Self, CredentialError> {
        Ok(Self {
            key: SigningKey::from_bytes(&key_bytes(seed)?),
            edge: edge.to_owned(),
        })
    }

    /// A new random key's private half, hex (what `cubicle edge keygen` prints).
    pub fn generate_hex() -> String {
        hex::encode(SigningKey::from_bytes(&rand::random()).to_bytes())
    }

    /// The public half nodes are given, hex.
    pub fn public_hex(&self) -> String {
        hex::encode(self.key.verifying_key().to_bytes())
    }

    /// A credential for `token` making the request `method path_and_query`.
    pub fn sign(&self, token: &Token, method: &str, path_and_query: &str, now: i64) -> String {
        let claims = Claims {
            token_id: token.id.clone(),
            name: token.name.clone(),
            role: token.role.as_str().to_owned(),
            scope: token.scope.to_column(),
            request: request_line(method, path_and_query),
            expires: now + LIFETIME_MS,
            edge: self.edge.clone(),
        };
        let body = serde_json::to_vec(&claims).expect("claims are plain strings and numbers");
        let signature = self.key.sign(&body);
        format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(&body),
            URL_SAFE_NO_PAD.encode(signature.to_bytes())
        )
    }
}

/// A node's checking side.
pub struct EdgeTrust {
    key: VerifyingKey,
}

impl EdgeTrust {
    /// From the edges' public key (32 bytes, hex).
    pub fn from_hex(public: &str) -> Result<Self, CredentialError> {
        let key = VerifyingKey::from_bytes(&key_bytes(public)?)
            .map_err(|e| CredentialError::BadKey(e.to_string()))?;
        Ok(Self { key })
    }

    /// The caller `value` vouches for, if it is the edges', unexpired and
    /// for this very request; and the edge's name.
    pub fn verify(
        &self,
        value: &str,
        method: &str,
        path_and_query: &str,
        now: i64,
    ) -> Result<(Token, String), CredentialError> {
        let (body, signature) = value
            .split_once('.')
            .ok_or(CredentialError::Malformed("no signature"))?;
        let body = URL_SAFE_NO_PAD
            .decode(body)
            .map_err(|_| CredentialError::Malformed("the claims are not base64url"))?;
        let signature: [u8; 64] = URL_SAFE_NO_PAD
            .decode(signature)
            .ok()
            .and_then(|bytes| bytes.try_into().ok())
            .ok_or(CredentialError::Malformed(
                "the signature is not 64 bytes of base64url",
            ))?;
        self.key
            .verify(&body, &Signature::from_bytes(&signature))
            .map_err(|_| CredentialError::BadSignature)?;
        let claims: Claims = serde_json::from_slice(&body)
            .map_err(|_| CredentialError::Malformed("the claims are not the edge's JSON"))?;
        if claims.expires <= now {
            return Err(CredentialError::Expired(now - claims.expires));
        }
        let got = request_line(method, path_and_query);
        if claims.request != got {
            return Err(CredentialError::OtherRequest {
                want: claims.request,
                got,
            });
        }
        let role = Role::parse(&claims.role).ok_or(CredentialError::Malformed("unknown role"))?;
        let token = Token {
            id: claims.token_id,
            name: claims.name,
            role,
            scope: Scope::from_column(claims.scope),
        };
        Ok((token, claims.edge))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent() -> Token {
        Token {
            id: "tok-a".into(),
            name: "agent".into(),
            role: Role::Agent,
            scope: Scope::Only(vec!["ws-1".into()]),
        }
    }

    #[test]
    fn a_node_takes_the_caller_only_from_the_edges_key_for_that_request() {
        let signer = EdgeSigner::from_hex(&EdgeSigner::generate_hex(), "edge-a").unwrap();
        let trust = EdgeTrust::from_hex(&signer.public_hex()).unwrap();
        let value = signer.sign(&agent(), "POST", "/v1/workspaces/ws-1/exec", 1000);
        let (token, edge) = trust
            .verify(&value, "POST", "/v1/workspaces/ws-1/exec", 2000)
            .unwrap();
        assert_eq!(
            (token.id.as_str(), token.role, edge.as_str()),
            ("tok-a", Role::Agent, "edge-a")
        );
        assert_eq!(token.scope, Scope::Only(vec!["ws-1".into()]));
        // Another request, another time, another key, a changed claim.
        assert!(matches!(
            trust.verify(&value, "POST", "/v1/workspaces/ws-2/exec", 2000),
            Err(CredentialError::OtherRequest { .. })
        ));
        assert!(matches!(
            trust.verify(&value, "DELETE", "/v1/workspaces/ws-1/exec", 2000),
            Err(CredentialError::OtherRequest { .. })
        ));
        assert_eq!(
            trust
                .verify(
                    &value,
                    "POST",
                    "/v1/workspaces/ws-1/exec",
                    1000 + LIFETIME_MS
                )
                .err(),
            Some(CredentialError::Expired(0))
        );
        let other = EdgeSigner::from_hex(&EdgeSigner::generate_hex(), "edge-x").unwrap();
        let forged = other.sign(&agent(), "POST", "/v1/workspaces/ws-1/exec", 1000);
        assert_eq!(
            trust
                .verify(&forged, "POST", "/v1/workspaces/ws-1/exec", 2000)
                .err(),
            Some(CredentialError::BadSignature)
        );
        let (body, signature) = value.split_once('.').unwrap();
        let mut claims: serde_json::Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(body).unwrap()).unwrap();
        claims["role"] = "admin".into();
        let raised = format!(
            "{}.{signature}",
            URL_SAFE_NO_PAD.encode(serde_json::to_vec(&claims).unwrap())
        );
        assert_eq!(
            trust
                .verify(&raised, "POST", "/v1/workspaces/ws-1/exec", 2000)
                .err(),
            Some(CredentialError::BadSignature)
        );
        for junk in ["", "abc", "a.b", "!!.!!"] {
            assert!(trust.verify(junk, "GET", "/", 0).is_err(), "{junk:?}");
        }
        assert!(EdgeTrust::from_hex("00").is_err());
    }
}
