//! Persistent browser profiles: a workspace created with `"profile": NAME`
//! runs Chromium on the caller's profile of that name (made empty the first
//! time), whose cookies, local storage and IndexedDB (the user data
//! directory without caches) the runtime saves host-side when the
//! workspace stops and loads into the next one ([`cubicle_runtime::profiles`]
//! says how). A profile is its maker's: that token uses, lists and removes
//! it, admins list and remove any. It runs in one workspace at a time: a
//! create or start naming one that another running workspace has is 409
//! `profile_in_use`. Loads, saves and failed saves are events the daemon
//! writes ([`super::host`]); removing one is the caller's.

use cubicle_runtime::profiles::{self, Refusal, Row};
use serde::Serialize;
use serde_json::json;

use super::audit::EventKind;
use super::{OpContext, Permission};
use crate::error::{ErrorKind, OpError};
use crate::ops::Core;

/// Most profiles one token may keep.
pub const MAX_PER_TOKEN: usize = 100;

/// A profile as the API shows it.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct ProfileView {
    pub id: String,
    pub name: String,
    /// The token that made it.
    pub owner_token: String,
    /// The kept archive's bytes (gzip'd tar); 0 until first saved.
    pub size: u64,
    /// The kept archive's SHA-256; null until first saved.
    pub sha256: Option<String>,
    /// The running workspace using it now, if any.
    pub running_in: Option<String>,
    pub created_at_ms: i64,
    pub saved_at_ms: Option<i64>,
}

impl From<&Row> for ProfileView {
    fn from(row: &Row) -> Self {
        Self {
            id: row.id.clone(),
            name: row.name.clone(),
            owner_token: row.owner_token.clone(),
            size: u64::try_from(row.size).unwrap_or_default(),
            sha256: row.sha256.clone(),
            running_in: row.running_in.clone(),
            created_at_ms: row.created_at,
            saved_at_ms: row.saved_at,
        }
    }
}

fn store_error(err: impl std::fmt::Display) -> OpError {
    OpError::internal(err.to_string())
}

/// Whether `ctx` sees and removes every token's profiles (admins).
fn manages_all(ctx: &OpContext) -> bool {
    super::permission::granted(ctx.token.role, Permission::TokensManage)
}

fn in_use(name: &str, holder: &str) -> OpError {
    OpError::new(
        ErrorKind::Conflict,
        "profile_in_use",
        format!(
            "browser profile {name:?} is in use by running workspace {holder}: stop it first (POST /v1/workspaces/{holder}/stop saves the profile), or name another profile"
        ),
    )
}

/// The caller's profile `name` for a new workspace: made (empty) if it has
/// none of that name; refused while another running workspace uses it.
pub async fn for_create(core: &Core, ctx: &OpContext, name: &str) -> Result<Row, OpError> {
    ctx.require(Permission::WorkspacesCreate)?;
    let found = profiles::find(&core.store, &ctx.token.id, name)
        .await
        .map_err(store_error)?;
    if let Some(row) = found {
        if let Some(holder) = &row.running_in {
            return Err(in_use(name, holder));
        }
        return Ok(row);
    }
    let rows = profiles::list(&core.store).await.map_err(store_error)?;
    let theirs = rows
        .iter()
        .filter(|row| row.owner_token == ctx.token.id)
        .count();
    if theirs >= MAX_PER_TOKEN {
        return Err(OpError::new(
            ErrorKind::TooMany,
            "too_many_profiles",
            format!(
                "this token keeps {theirs} browser profiles, the most one may: remove one (DELETE /v1/profiles/{{id}})"
            ),
        ));
    }
    let mut id = [0u8; 6];
    rand::RngCore::fill_bytes(&mut rand::rng(), &mut id);
    let row = Row {
        id: format!("prof-{}", hex::encode(id)),
        owner_token: ctx.token.id.clone(),
        name: name.to_owned(),
        size: 0,
        sha256: None,
        running_in: None,
        created_at: cubicle_runtime::state::now_ms(),
        saved_at: None,
    };
    profiles::insert(&core.store, &row)
        .await
        .map_err(store_error)?;
    Ok(row)
}

/// The caller's profiles (an admin's: everyone's).
pub async fn list(core: &Core, ctx: &OpContext) -> Result<Vec<ProfileView>, OpError> {
    ctx.require(Permission::WorkspacesCreate)?;
    let everyone = manages_all(ctx);
    let rows = profiles::list(&core.store).await.map_err(store_error)?;
    Ok(rows
        .iter()
        .filter(|row| everyone || row.owner_token == ctx.token.id)
        .map(ProfileView::from)
        .collect())
}

/// Removes a profile and its kept archive; refused while a workspace runs
/// with it. Stopped workspaces that had it start with a fresh profile.
pub async fn delete(core: &Core, ctx: &OpContext, id: &str) -> Result<(), OpError> {
    ctx.require(Permission::WorkspacesCreate)?;
    let everyone = manages_all(ctx);
    let not_found = || {
        OpError::new(
            ErrorKind::NotFound,
            "not_found",
            format!("no browser profile with id {id:?} (GET /v1/profiles lists yours)"),
        )
    };
    let row = match profiles::get(&core.store, id).await.map_err(store_error)? {
        Some(row) if everyone || row.owner_token == ctx.token.id => row,
        _ => return Err(not_found()),
    };
    let detail = json!({ "profile": row.id, "name": row.name });
    let store = &core.store;
    let archives = core.manager.profile_archives();
    let run = async {
        match profiles::delete(store, id).await.map_err(store_error)? {
            Ok(_) => {}
            Err(Refusal::NotFound) => return Err(not_found()),
            Err(Refusal::InUse(holder)) => return Err(in_use(&row.name, &holder)),
        }
        archives
            .remove(id)
            .map_err(|err| OpError::internal(format!("cannot remove the archive: {err}")))
    };
    core.audit
        .run(ctx, EventKind::ProfileDelete, None, detail, run, |_| {
            json!({})
        })
        .await
}
