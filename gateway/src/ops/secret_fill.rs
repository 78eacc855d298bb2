//! `fill_secret`: a secret the workspace was given, filled into a field of
//! the page on screen by the gateway's own CDP session
//! ([`crate::browser_fill`] says how, and what it cannot prevent), so the
//! agent logs in without ever holding the value.
//!
//! The order: the caller may use the browser and is not held off by a
//! take-over; the workspace was given the secret; the page on screen is on
//! `https:` at one of the secret's hosts and the field is a password field
//! or marked with an `autocomplete` token; the policy's `secret.fill` rules
//! judge the secret's name and the page (the shipped policies confirm);
//! then the fill, which checks the page again at that moment. The event
//! (`secret.fill`) names the secret, the page and the field, never the
//! value.

use cubicle_policy::Subject;
use cubicle_runtime::secret_rows;
use serde::Serialize;
use serde_json::json;

use super::audit::EventKind;
use super::{OpContext, Permission, access, gates};
use crate::browser_fill::{self, FillError, Found};
use crate::error::{ErrorKind, OpError};
use crate::ops::Core;
use crate::wire::secret::FillSecret;

/// The longest page URL an event keeps.
const MAX_URL: usize = 2000;

/// What was filled (never the value).
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Filled {
    /// The secret's id.
    pub secret: String,
    /// The page's URL at the moment of filling.
    pub url: String,
    pub host: String,
    /// `password`, or `autocomplete:<token>` for another marked field
    /// (shown masked, as a password field is).
    #[schema(example = "password")]
    pub field: String,
}

/// Whether the caller's role may use the browser (a 403 before any 400
/// about the body).
pub fn may_fill(ctx: &OpContext) -> Result<(), OpError> {
    ctx.require(Permission::Browser)
}

/// Fills `request.secret`'s value into the field `request.selector` (or the
/// focused one) of workspace `id`'s page on screen.
pub async fn fill(
    core: &Core,
    ctx: &OpContext,
    id: &str,
    request: FillSecret,
) -> Result<Filled, OpError> {
    access::guest(core, ctx, id, Permission::Browser).await?;
    access::agent_held_off(core, ctx, id)?;
    let given = secret_rows::of_workspace(&core.store, id)
        .await
        .map_err(|err| OpError::internal(err.to_string()))?;
    let Some((_, row)) = given
        .into_iter()
        .find(|(binding, row)| row.id == request.secret || binding.placeholder == request.secret)
    else {
        return Err(OpError::new(
            ErrorKind::NotFound,
            "secret_not_given",
            format!(
                "secret: workspace {id} was not given {:?}; GET /v1/workspaces/{id}/secrets lists what it has",
                request.secret
            ),
        ));
    };
    let hosts: Vec<String> = serde_json::from_str(&row.hosts).unwrap_or_default();
    let selector = request.selector.as_deref();
    let host = core.hosts.get(id);
    let found = browser_fill::find(
        &core.manager,
        host.browser(),
        id,
        browser_fill::Want::Secret,
        selector,
    )
    .await
    .map_err(refused)?;
    if !found.url.starts_with("https:") {
        return Err(mismatch(format!(
            "the page on screen ({}) is not on https: a secret is filled only into a page whose server the browser checked",
            cut(&found.url)
        )));
    }
    if !hosts.contains(&found.host) {
        return Err(mismatch(format!(
            "the page on screen is on {}, and secret {} goes only to {}",
            found.host,
            row.id,
            hosts.join(", ")
        )));
    }
    let url = cut(&found.url);
    let judged = json!({
        "secret": row.id, "name": row.name, "selector": selector,
        "url": url, "field": found.field,
    });
    let gated = gates::Gated {
        operation: "secret.fill",
        subject: Subject::SecretFill {
            name: row.name.clone(),
            url: found.url.clone(),
        },
        params: judged.clone(),
        shown: judged.clone(),
        lock: gates::Lock::Change,
    };
    gates::check(core, ctx, id, gated).await?;
    let run = async {
        browser_fill::fill(
            &core.manager,
            host.browser(),
            id,
            &found,
            selector,
            &row.value,
            &hosts,
        )
        .await
        .map_err(refused)
    };
    let filled: Found = core
        .audit
        .run(
            ctx,
            EventKind::SecretFill,
            Some(id),
            judged,
            run,
            |filled| json!({ "url": cut(&filled.url), "field": filled.field }),
        )
        .await?;
    Ok(Filled {
        secret: row.id,
        url: cut(&filled.url),
        host: filled.host,
        field: filled.field,
    })
}

fn cut(url: &str) -> String {
    url.chars().take(MAX_URL).collect()
}

fn mismatch(message: String) -> OpError {
    OpError::new(ErrorKind::Conflict, "fill_refused", message)
}

fn refused(err: FillError) -> OpError {
    err.into_op(
        "fill_refused",
        "not filled",
        "no browser tab is on screen to fill: open the page first",
    )
}
