//! Host-bound secrets: stored by operators and admins (the value never
//! shown again), given to a workspace as a placeholder (in its commands'
//! environment, a file, or only in the answer), swapped for the value by
//! the workspace's egress proxy on the way to the secret's hosts only, in
//! headers, and in request bodies when the secret says `body`
//! (`cubicle_runtime::egress::secrets` says exactly when). Storing,
//! removing and giving one are events; none carries a value.
//!
//! A secret is its maker's: that token and admins list it, give it and
//! remove it. Giving one to a workspace needs that workspace in the
//! caller's scope and every host of the secret allowed by its egress
//! policy, none of them passthrough (a tunnel the proxy does not open
//! never gets a value).

use std::collections::BTreeMap;

use cubicle_runtime::egress::secrets::{self, Bound};
use cubicle_runtime::secret_rows::{self, Binding, Row};
use serde::Serialize;
use serde_json::json;

use super::audit::EventKind;
use super::{OpContext, Permission, access};
use crate::error::{ErrorKind, OpError};
use crate::ops::Core;
use crate::wire::secret::{BindSecret, SecretRequest};

/// Most secrets one token may keep.
pub const MAX_PER_TOKEN: usize = 100;

/// A secret as the API shows it: never its value.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct SecretView {
    pub id: String,
    pub name: String,
    /// The host names it may go to.
    pub hosts: Vec<String>,
    /// Whether the value goes into request bodies too (else headers only).
    pub body: bool,
    /// The token that stored it.
    pub owner_token: String,
    pub created_at_ms: i64,
}

impl From<&Row> for SecretView {
    fn from(row: &Row) -> Self {
        Self {
            id: row.id.clone(),
            name: row.name.clone(),
            hosts: serde_json::from_str(&row.hosts).unwrap_or_default(),
            body: row.body,
            owner_token: row.owner_token.clone(),
            created_at_ms: row.created_at,
        }
    }
}

/// A secret given to a workspace, as the API shows it.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct BindingView {
    pub secret: String,
    pub name: String,
    pub hosts: Vec<String>,
    /// Whether the value goes into request bodies too (else headers only).
    pub body: bool,
    /// What the workspace holds instead of the value.
    #[schema(example = "cubicle_secret_0123456789abcdef0123456789abcdef")]
    pub placeholder: String,
    /// The variable set to it in every command run through exec.
    pub env: Option<String>,
    /// The file it was written to.
    pub path: Option<String>,
    pub created_at_ms: i64,
}

impl BindingView {
    fn of(binding: &Binding, row: &Row) -> Self {
        Self {
            secret: row.id.clone(),
            name: row.name.clone(),
            hosts: serde_json::from_str(&row.hosts).unwrap_or_default(),
            body: row.body,
            placeholder: binding.placeholder.clone(),
            env: binding.env.clone(),
            path: binding.path.clone(),
            created_at_ms: binding.created_at,
        }
    }
}

fn store_error(err: impl std::fmt::Display) -> OpError {
    OpError::internal(err.to_string())
}

/// Whether the caller's role may manage secrets: asked before a body is
/// read.
pub fn may_manage(ctx: &OpContext) -> Result<(), OpError> {
    ctx.require(Permission::SecretsManage)
}

/// Whether `ctx` manages every token's secrets (admins).
fn manages_all(ctx: &OpContext) -> bool {
    super::permission::granted(ctx.token.role, Permission::TokensManage)
}

/// Stores a secret; its value is not shown again.
pub async fn create(
    core: &Core,
    ctx: &OpContext,
    new: SecretRequest,
) -> Result<SecretView, OpError> {
    may_manage(ctx)?;
    let rows = secret_rows::list(&core.store).await.map_err(store_error)?;
    let theirs = rows
        .iter()
        .filter(|row| row.owner_token == ctx.token.id)
        .count();
    if theirs >= MAX_PER_TOKEN {
        return Err(OpError::new(
            ErrorKind::TooMany,
            "too_many_secrets",
            format!(
                "this token keeps {theirs} secrets, the most one may: remove one (DELETE /v1/secrets/{{id}})"
            ),
        ));
    }
    let mut id = [0u8; 6];
    rand::RngCore::fill_bytes(&mut rand::rng(), &mut id);
    let row = Row {
        id: format!("sec-{}", hex::encode(id)),
        owner_token: ctx.token.id.clone(),
        name: new.name,
        value: new.value,
        hosts: serde_json::Value::from(new.hosts.clone()).to_string(),
        body: new.body,
        created_at: cubicle_runtime::state::now_ms(),
    };
    let detail = json!({
        "secret": row.id, "name": row.name, "hosts": new.hosts, "body": new.body,
    });
    let store = &core.store;
    let run = async {
        secret_rows::insert(store, &row)
            .await
            .map_err(store_error)?;
        Ok(SecretView::from(&row))
    };
    core.audit
        .run(ctx, EventKind::SecretCreate, None, detail, run, |_| {
            json!({})
        })
        .await
}

/// The caller's secrets (an admin's: everyone's), never a value.
pub async fn list(core: &Core, ctx: &OpContext) -> Result<Vec<SecretView>, OpError> {
    may_manage(ctx)?;
    let everyone = manages_all(ctx);
    let rows = secret_rows::list(&core.store).await.map_err(store_error)?;
    Ok(rows
        .iter()
        .filter(|row| everyone || row.owner_token == ctx.token.id)
        .map(SecretView::from)
        .collect())
}

async fn own(core: &Core, ctx: &OpContext, id: &str) -> Result<Row, OpError> {
    may_manage(ctx)?;
    let everyone = manages_all(ctx);
    match secret_rows::get(&core.store, id)
        .await
        .map_err(store_error)?
    {
        Some(row) if everyone || row.owner_token == ctx.token.id => Ok(row),
        _ => Err(OpError::new(
            ErrorKind::NotFound,
            "not_found",
            format!("no secret with id {id:?} (GET /v1/secrets lists yours)"),
        )),
    }
}

/// Removes a secret: from then on its placeholders are refused like any
/// unknown one, in every workspace it was given to.
pub async fn delete(core: &Core, ctx: &OpContext, id: &str) -> Result<(), OpError> {
    let row = own(core, ctx, id).await?;
    let detail = json!({ "secret": row.id, "name": row.name });
    let store = &core.store;
    let run = async {
        secret_rows::delete(store, id)
            .await
            .map_err(store_error)?
            .ok_or_else(|| {
                OpError::new(
                    ErrorKind::NotFound,
                    "not_found",
                    format!("no secret with id {id:?}"),
                )
            })
    };
    let bound = core
        .audit
        .run(
            ctx,
            EventKind::SecretDelete,
            None,
            detail,
            run,
            |workspaces: &Vec<String>| json!({ "workspaces": workspaces }),
        )
        .await?;
    for workspace in bound {
        refresh(core, &workspace).await;
    }
    Ok(())
}

/// Gives secret `bind.secret` to workspace `id`: a fresh placeholder, put
/// where the caller asked. A secret it already has keeps its placeholder
/// (409).
pub async fn bind(
    core: &Core,
    ctx: &OpContext,
    id: &str,
    bind: BindSecret,
) -> Result<BindingView, OpError> {
    may_manage(ctx)?;
    access::workspace(core, ctx, id, Permission::SecretsManage).await?;
    let row = own(core, ctx, &bind.secret).await?;
    let hosts: Vec<String> = serde_json::from_str(&row.hosts).unwrap_or_default();
    let policy = core.egress.policy_of(id).await?.policy;
    for host in &hosts {
        if !policy.names(host) {
            return Err(OpError::new(
                ErrorKind::Conflict,
                "secret_host_not_allowed",
                format!(
                    "secret {}'s host {host} is not allowed by workspace {id}'s egress policy: allow it first (PUT /v1/workspaces/{id}/egress), or store the secret for hosts the workspace may reach",
                    row.id
                ),
            ));
        }
        if policy.passes_through(host) {
            return Err(OpError::new(
                ErrorKind::Conflict,
                "secret_host_passthrough",
                format!(
                    "secret {}'s host {host} passes through the proxy untouched, so no value could be put in; take it off the workspace's passthrough list first",
                    row.id
                ),
            ));
        }
    }
    let binding = Binding {
        workspace: id.to_owned(),
        secret: row.id.clone(),
        placeholder: secrets::placeholder(),
        env: bind.env,
        path: bind.path,
        created_at: cubicle_runtime::state::now_ms(),
    };
    let detail = json!({
        "secret": row.id, "name": row.name, "hosts": hosts,
        "placeholder": binding.placeholder, "env": binding.env, "path": binding.path,
    });
    let store = &core.store;
    let run = async {
        if secret_rows::bind(store, &binding)
            .await
            .map_err(store_error)?
        {
            Ok(())
        } else {
            Err(OpError::new(
                ErrorKind::Conflict,
                "secret_already_given",
                format!(
                    "workspace {id} already has secret {} (GET /v1/workspaces/{id}/secrets shows its placeholder)",
                    binding.secret
                ),
            ))
        }
    };
    core.audit
        .run(ctx, EventKind::SecretBind, Some(id), detail, run, |_| {
            json!({})
        })
        .await?;
    refresh(core, id).await;
    if let Some(path) = &binding.path {
        super::files::write(
            core,
            ctx,
            id,
            path,
            binding.placeholder.as_bytes(),
            Some(0o600),
        )
        .await?;
    }
    Ok(BindingView::of(&binding, &row))
}

/// The secrets workspace `id` was given, with their placeholders.
pub async fn of_workspace(
    core: &Core,
    ctx: &OpContext,
    id: &str,
) -> Result<Vec<BindingView>, OpError> {
    access::workspace(core, ctx, id, Permission::WorkspacesView).await?;
    let bound = secret_rows::of_workspace(&core.store, id)
        .await
        .map_err(store_error)?;
    Ok(bound
        .iter()
        .map(|(binding, row)| BindingView::of(binding, row))
        .collect())
}

/// The variables every command of workspace `id` gets: each secret given
/// with `env`, set to its placeholder.
pub async fn env_of(core: &Core, id: &str) -> Result<BTreeMap<String, String>, OpError> {
    let bound = secret_rows::of_workspace(&core.store, id)
        .await
        .map_err(store_error)?;
    Ok(bound
        .into_iter()
        .filter_map(|(binding, _)| Some((binding.env?, binding.placeholder)))
        .collect())
}

/// Hands workspace `id`'s proxy (when it runs) the secrets it holds now.
pub async fn refresh(core: &Core, id: &str) {
    let bound = match secret_rows::of_workspace(&core.store, id).await {
        Ok(bound) => bound,
        Err(err) => {
            // Unknown: none are swapped (each placeholder refused) until
            // the next refresh, never a removed one by mistake.
            tracing::error!(workspace = id, %err, "secrets: cannot read what the workspace was given; none are sent");
            Vec::new()
        }
    };
    let bound: Vec<Bound> = bound
        .into_iter()
        .map(|(binding, row)| Bound {
            id: row.id,
            placeholder: binding.placeholder,
            value: row.value,
            hosts: serde_json::from_str(&row.hosts).unwrap_or_default(),
            body: row.body,
        })
        .collect();
    if let Some(host) = core.hosts.find(id) {
        host.with_egress(|live| live.proxy.secrets().set(bound));
    }
}
