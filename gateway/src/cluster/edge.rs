//! `cubicle edge`: the stateless front of many nodes. It authenticates
//! every request against the shared store's tokens, places new workspaces
//! ([`super::placement`]), routes every door of `/v1/workspaces/{id}/…` to
//! the node that holds the workspace ([`super::proxy`]) with a signed
//! credential ([`super::credential`]), lists across nodes, and says so when
//! a workspace is lost (`410 workspace_lost`) or its node cannot be reached
//! (`503 node_unreachable`). Any number of edges run side by side; each
//! also sweeps: nodes past their heartbeat deadline are declared down and
//! their workspaces lost (the store makes a second sweep a no-op).
//!
//! Everything about a workspace beyond where it is — who may do what to
//! it, its control lock, its approvals — is decided by its node, whichever
//! edge a request came through.

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, to_bytes};
use axum::extract::{Path, State};
use axum::http::{Method, Request, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use axum::{Json, Router};
use cubicle_runtime::cluster::postgres::PgCluster;
use cubicle_runtime::cluster::{Actual, ClusterError, ClusterStore, NodeStatus, TokenRow};
use cubicle_runtime::events::{Actor, EventKind, NewEvent};
use cubicle_runtime::state::now_ms;
use cubicle_runtime::tokens::{self, Role, Token};
use serde_json::{Value, json};

use super::credential::EdgeSigner;
use super::{placement, proxy};
use crate::error::{ErrorKind, OpError};

/// Largest create body the edge reads (to see the backend asked for).
const CREATE_BODY_LIMIT: usize = 1 << 20;

/// One edge.
pub struct Edge {
    pub store: PgCluster,
    /// Kept-open connections to the nodes.
    pub client: proxy::NodeClient,
    pub signer: EdgeSigner,
    /// How long a node may go without a heartbeat before it is down.
    pub deadline: Duration,
    /// Creates this edge has sent to each node and not yet had answered:
    /// a node's heartbeat counts them only once they exist, so a burst of
    /// creates would otherwise all see the same free room and pile onto
    /// one node.
    pub in_flight: std::sync::Mutex<std::collections::HashMap<String, u32>>,
}

/// One create in flight to a node, counted until dropped.
struct InFlight<'a> {
    edge: &'a Edge,
    node: String,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        let mut counts = self
            .edge
            .in_flight
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(count) = counts.get_mut(&self.node) {
            *count = count.saturating_sub(1);
        }
    }
}

/// The edge's routes.
pub fn router(edge: Arc<Edge>) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(ready))
        .route("/v1/nodes", get(nodes))
        .route("/v1/tokens", axum::routing::post(create_token))
        .route("/v1/tokens/{id}", axum::routing::delete(revoke_token))
        .route("/v1/workspaces", get(list).post(create))
        .route("/v1/workspaces/{id}", any(route))
        .route("/v1/workspaces/{id}/{*rest}", any(route))
        .route("/v1/approvals", get(list_approvals))
        .route("/v1/approvals/{id}", any(to_holder))
        .route("/v1/approvals/{id}/{*rest}", any(to_holder))
        .with_state(edge)
}

fn internal(err: impl std::fmt::Display) -> OpError {
    OpError::internal(format!("the cluster store: {err}"))
}

/// How long a read waits out a database restart before the edge answers
/// `503 store_unavailable`.
const STORE_PATIENCE: Duration = Duration::from_secs(10);

/// A read of the shared store, asked again while the database restarts
/// (a failover, an upgrade): a request in flight then waits instead of
/// failing. Other errors answer at once.
async fn read<T, F, Fut>(mut ask: F) -> Result<T, OpError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, ClusterError>>,
{
    let deadline = tokio::time::Instant::now() + STORE_PATIENCE;
    loop {
        match ask().await {
            Ok(value) => return Ok(value),
            Err(err) if err.is_transient() && tokio::time::Instant::now() < deadline => {
                tracing::warn!(%err, "the cluster store is out of reach; asking again");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(err) if err.is_transient() => {
                return Err(OpError::new(
                    ErrorKind::Unavailable,
                    "store_unavailable",
                    format!(
                        "the cluster store has been out of reach for {} s: {err}; try again",
                        STORE_PATIENCE.as_secs()
                    ),
                ));
            }
            Err(err) => return Err(internal(err)),
        }
    }
}

/// The caller, from the secret the request presents.
fn caller<'a>(
    edge: &'a Edge,
    request: &Request<Body>,
) -> impl std::future::Future<Output = Result<Token, OpError>> + Send + 'a {
    // Only its URI and headers: a body is not `Sync`, so no reference to
    // the request may be held across the store's await.
    let (mut parts, ()) = Request::builder()
        .uri(request.uri().clone())
        .body(())
        .expect("a request of a parsed URI builds")
        .into_parts();
    parts.headers = request.headers().clone();
    authenticate(edge, parts)
}

async fn authenticate(edge: &Edge, parts: axum::http::request::Parts) -> Result<Token, OpError> {
    let (secret, presented) = crate::auth::presented_secret(&parts).ok_or_else(|| {
        OpError::unauthorized("missing token: send `Authorization: Bearer <token>`")
    })?;
    if presented == crate::auth::Presented::Cookie {
        crate::auth::check_same_origin(&parts)?;
    }
    let refused = || OpError::unauthorized("token is not valid or was revoked");
    if !secret.starts_with(tokens::PREFIX) {
        return Err(refused());
    }
    let hash = tokens::hash(&secret);
    let row = read(|| edge.store.token_by_hash(&hash)).await?;
    row.and_then(|row| row.live(now_ms())).ok_or_else(refused)
}

async fn ready(State(edge): State<Arc<Edge>>) -> Response {
    match edge.store.nodes().await {
        Ok(nodes) => {
            let up = nodes.iter().filter(|n| n.status == NodeStatus::Up).count();
            Json(json!({ "ready": true, "nodes_up": up })).into_response()
        }
        Err(err) => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({ "ready": false, "reason": err.to_string() })),
        )
            .into_response(),
    }
}

async fn nodes(State(edge): State<Arc<Edge>>, request: Request<Body>) -> Result<Response, OpError> {
    let token = caller(&edge, &request).await?;
    if token.role == Role::Agent {
        return Err(OpError::forbidden("an agent token may not list the nodes"));
    }
    let nodes = read(|| edge.store.nodes()).await?;
    Ok(Json(json!({ "nodes": nodes })).into_response())
}

/// The caller, if an admin; `what` names the refused deed.
fn admin<'a>(
    edge: &'a Edge,
    request: &Request<Body>,
    what: &'a str,
) -> impl std::future::Future<Output = Result<Token, OpError>> + Send + 'a {
    let pending = caller(edge, request);
    async move {
        let token = pending.await?;
        if token.role != Role::Admin {
            return Err(OpError::forbidden(format!(
                "only an admin token may {what}"
            )));
        }
        Ok(token)
    }
}

/// Seals what `token` did in the cluster's host chain, before it is done.
async fn seal(edge: &Edge, token: &Token, kind: EventKind, detail: Value) -> Result<(), OpError> {
    let actor = Actor::from(token);
    let event = NewEvent {
        kind,
        actor: Some(&actor),
        detail,
        ..Default::default()
    };
    edge.store.append(&event).await.map_err(internal)?;
    Ok(())
}

/// A new token in the shared store (admins only), sealed into the host
/// chain before its secret is shown.
async fn create_token(
    State(edge): State<Arc<Edge>>,
    request: Request<Body>,
) -> Result<Response, OpError> {
    let token = admin(&edge, &request, "make tokens").await?;
    let body = to_bytes(request.into_body(), 64 << 10)
        .await
        .map_err(|_| OpError::bad_request("a token's body is at most 64 KiB of JSON"))?;
    let new = crate::wire::token::NewToken::parse(&body)?;
    let secret = tokens::new_secret();
    let row = TokenRow {
        id: tokens::new_id(),
        name: new.name.clone(),
        role: new.role.as_str().into(),
        secret_hash: tokens::hash(&secret),
        scope: new.scope.to_column(),
        created_at: now_ms(),
        expires_at: None,
        revoked_at: None,
    };
    let detail = json!({ "id": row.id, "name": new.name, "role": row.role, "scope": new.scope });
    seal(&edge, &token, EventKind::TokenCreate, detail).await?;
    edge.store.put_token(&row).await.map_err(internal)?;
    let body = json!({
        "id": row.id, "name": new.name, "role": row.role, "scope": new.scope, "secret": secret,
    });
    Ok((StatusCode::CREATED, Json(body)).into_response())
}

/// Revokes a token of the shared store (admins only; not the caller's
/// own), sealed into the host chain first. Every edge refuses it from its
/// next request; a WebSocket a node already opened for it runs until it
/// closes.
async fn revoke_token(
    State(edge): State<Arc<Edge>>,
    Path(id): Path<String>,
    request: Request<Body>,
) -> Result<Response, OpError> {
    let token = admin(&edge, &request, "revoke tokens").await?;
    if token.id == id {
        return Err(OpError::new(
            ErrorKind::Conflict,
            "own_token",
            "a token cannot revoke itself: revoke it with another admin token",
        ));
    }
    seal(&edge, &token, EventKind::TokenRevoke, json!({ "id": id })).await?;
    if edge
        .store
        .revoke_token(&id, now_ms())
        .await
        .map_err(internal)?
    {
        Ok(StatusCode::NO_CONTENT.into_response())
    } else {
        Err(OpError::new(
            ErrorKind::NotFound,
            "not_found",
            format!("no live token {id}"),
        ))
    }
}

/// A new workspace: placed on a node, made there.
async fn create(
    State(edge): State<Arc<Edge>>,
    request: Request<Body>,
) -> Result<Response, OpError> {
    let token = caller(&edge, &request).await?;
    let (parts, body) = request.into_parts();
    let body = to_bytes(body, CREATE_BODY_LIMIT).await.map_err(|_| {
        OpError::new(
            ErrorKind::TooLarge,
            "too_large",
            format!("a create body is at most {CREATE_BODY_LIMIT} bytes"),
        )
    })?;
    // The node judges the body; the edge only reads the backend asked for.
    let asked: Option<String> = serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|v| v.get("backend").and_then(Value::as_str).map(str::to_owned))
        .filter(|b| b != "auto");
    let mut nodes = read(|| edge.store.nodes()).await?;
    let (node, _counted) = {
        let mut counts = edge
            .in_flight
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for node in &mut nodes {
            let sent = counts.get(&node.name).copied().unwrap_or(0);
            node.free = node.free.saturating_sub(sent);
        }
        let node = placement::choose(&nodes, asked.as_deref(), &mut rand::rng())
            .map_err(|err| {
                OpError::new(
                    ErrorKind::Unavailable,
                    "no_capacity",
                    format!("no node can take the workspace: {err}"),
                )
            })?
            .clone();
        *counts.entry(node.name.clone()).or_insert(0) += 1;
        let counted = InFlight {
            edge: &edge,
            node: node.name.clone(),
        };
        (node, counted)
    };
    let request = Request::from_parts(parts, Body::from(body));
    send(&edge, &token, request, &node.name, &node.address).await
}

/// Sends a GET of `path` to every node that is up, as `token`; the items
/// of the list `key` of each node's JSON answer, and the names of the
/// nodes that gave none.
async fn ask_every_node(
    edge: &Edge,
    token: &Token,
    path: &str,
    key: &'static str,
) -> Result<(Vec<Value>, Vec<String>), OpError> {
    let nodes = read(|| edge.store.nodes()).await?;
    let mut asks = Vec::new();
    for node in nodes.into_iter().filter(|n| n.status == NodeStatus::Up) {
        let credential = edge.signer.sign(token, "GET", path, now_ms());
        let path = path.to_owned();
        let client = edge.client.clone();
        asks.push(tokio::spawn(async move {
            let request = Request::get(&path)
                .body(Body::empty())
                .expect("a GET builds");
            let answer = proxy::forward(
                &client,
                request,
                &node.name,
                &node.address,
                &path,
                &credential,
            )
            .await;
            let listed = match answer {
                Ok(answer) if answer.status().is_success() => {
                    let bytes = to_bytes(answer.into_body(), 64 << 20).await.ok();
                    bytes.and_then(|b| serde_json::from_slice::<Value>(&b).ok())
                }
                _ => None,
            };
            (node.name, listed)
        }));
    }
    let mut items = Vec::new();
    let mut silent = Vec::new();
    for ask in asks {
        match ask.await.map_err(internal)? {
            (_, Some(Value::Object(mut answer))) => {
                if let Some(Value::Array(list)) = answer.remove(key) {
                    items.extend(list);
                }
            }
            (node, _) => silent.push(node),
        }
    }
    Ok((items, silent))
}

/// Every workspace the caller may see: each up node's list, and the lost
/// ones of theirs from the store.
async fn list(State(edge): State<Arc<Edge>>, request: Request<Body>) -> Result<Response, OpError> {
    let token = caller(&edge, &request).await?;
    let path = proxy::without_secret(request.uri());
    let (mut items, unreachable) = ask_every_node(&edge, &token, &path, "workspaces").await?;
    for lost in read(|| edge.store.placements(None)).await? {
        let theirs = token.role != Role::Agent || lost.owner_token.as_deref() == Some(&token.id);
        if lost.actual == Actual::Lost && theirs {
            items.push(json!({
                "id": lost.id, "name": lost.name, "backend": lost.backend, "state": "lost",
                "node": lost.node, "lost_reason": lost.lost_reason,
            }));
        }
    }
    Ok(Json(json!({ "workspaces": items, "nodes_unreachable": unreachable })).into_response())
}

/// Every approval the caller may see, from every node.
async fn list_approvals(
    State(edge): State<Arc<Edge>>,
    request: Request<Body>,
) -> Result<Response, OpError> {
    let token = caller(&edge, &request).await?;
    let path = proxy::without_secret(request.uri());
    let (items, unreachable) = ask_every_node(&edge, &token, &path, "approvals").await?;
    Ok(Json(json!({ "approvals": items, "nodes_unreachable": unreachable })).into_response())
}

/// One approval's door (look, wait, approve, deny): to the node that holds
/// it. An approval lives on its workspace's node; the edge asks every node
/// that is up at once and answers with the one that knows it (the others
/// answer 404 at once; the holder may be holding a `?wait`).
async fn to_holder(
    State(edge): State<Arc<Edge>>,
    request: Request<Body>,
) -> Result<Response, OpError> {
    let token = caller(&edge, &request).await?;
    let path = proxy::without_secret(request.uri());
    let (parts, body) = request.into_parts();
    let body = to_bytes(body, 64 << 10)
        .await
        .map_err(|_| OpError::bad_request("an approval's body is at most 64 KiB of JSON"))?;
    let nodes = read(|| edge.store.nodes()).await?;
    let mut asks = tokio::task::JoinSet::new();
    for node in nodes.into_iter().filter(|n| n.status == NodeStatus::Up) {
        let mut request = Request::builder()
            .method(parts.method.clone())
            .uri(parts.uri.clone())
            .body(Body::from(body.clone()))
            .expect("a copy of a parsed request builds");
        *request.headers_mut() = parts.headers.clone();
        let credential = edge
            .signer
            .sign(&token, parts.method.as_str(), &path, now_ms());
        let path = path.clone();
        let client = edge.client.clone();
        asks.spawn(async move {
            proxy::forward(
                &client,
                request,
                &node.name,
                &node.address,
                &path,
                &credential,
            )
            .await
        });
    }
    while let Some(answer) = asks.join_next().await {
        if let Ok(Ok(answer)) = answer
            && answer.status() != StatusCode::NOT_FOUND
        {
            return Ok(answer);
        }
    }
    Err(OpError::new(
        ErrorKind::NotFound,
        "not_found",
        "no such approval on any node that is up",
    ))
}

/// Any door of one workspace: to its node.
async fn route(
    State(edge): State<Arc<Edge>>,
    Path(params): Path<Vec<(String, String)>>,
    request: Request<Body>,
) -> Result<Response, OpError> {
    let token = caller(&edge, &request).await?;
    let id = params
        .iter()
        .find(|(name, _)| name == "id")
        .map(|(_, value)| value.clone())
        .unwrap_or_default();
    let placement = read(|| edge.store.placement(&id)).await?;
    let Some(placement) = placement else {
        return Err(OpError::new(
            ErrorKind::NotFound,
            "not_found",
            format!("no workspace {id}"),
        ));
    };
    if placement.actual == Actual::Lost {
        return Err(OpError::new(
            ErrorKind::Gone,
            "workspace_lost",
            format!(
                "workspace {id} was lost with its node {}: {}; nothing of it is restarted elsewhere",
                placement.node,
                placement
                    .lost_reason
                    .as_deref()
                    .unwrap_or("its node was declared down")
            ),
        ));
    }
    let nodes = read(|| edge.store.nodes()).await?;
    let Some(node) = nodes.into_iter().find(|n| n.name == placement.node) else {
        return Err(unreachable_error(&placement.node, "it is not registered"));
    };
    if node.status == NodeStatus::Down {
        let why = node
            .down_reason
            .unwrap_or_else(|| "it was declared down".into());
        return Err(unreachable_error(&node.name, &why));
    }
    send(&edge, &token, request, &node.name, &node.address).await
}

fn unreachable_error(node: &str, why: &str) -> OpError {
    OpError::new(
        ErrorKind::Unavailable,
        "node_unreachable",
        format!("the workspace's node {node} cannot be reached: {why}"),
    )
}

async fn send(
    edge: &Edge,
    token: &Token,
    request: Request<Body>,
    node: &str,
    address: &str,
) -> Result<Response, OpError> {
    let path = proxy::without_secret(request.uri());
    let method: &Method = request.method();
    let credential = edge.signer.sign(token, method.as_str(), &path, now_ms());
    proxy::forward(&edge.client, request, node, address, &path, &credential)
        .await
        .map_err(|err| unreachable_error(node, &err.to_string()))
}

/// Declares down every node past the deadline, again and again, until
/// `stop`; a fifth of the deadline apart, so a death is seen within 1.2
/// deadlines.
pub async fn sweep(edge: Arc<Edge>, stop: tokio_util::sync::CancellationToken) {
    let deadline = i64::try_from(edge.deadline.as_millis()).unwrap_or(i64::MAX);
    let mut tick = tokio::time::interval(edge.deadline / 5);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        match edge.store.sweep(now_ms(), deadline).await {
            Ok(lost) => {
                for workspace in lost {
                    tracing::warn!(
                        workspace = %workspace.id, node = %workspace.node, reason = %workspace.reason,
                        "workspace lost with its node"
                    );
                }
            }
            Err(err) => tracing::error!(%err, "cannot sweep for nodes past their deadline"),
        }
    }
}

/// Makes the cluster's first admin token, once for all edges: returns its
/// secret if this call made it (print it: it is not kept).
pub async fn first_admin(store: &PgCluster) -> Result<Option<String>, ClusterError> {
    let secret = tokens::new_secret();
    let row = TokenRow {
        id: "tok-admin".into(),
        name: "admin".into(),
        role: Role::Admin.as_str().into(),
        secret_hash: tokens::hash(&secret),
        scope: None,
        created_at: now_ms(),
        expires_at: None,
        revoked_at: None,
    };
    match store.put_token(&row).await {
        Ok(()) => Ok(Some(secret)),
        Err(err) if err.is_duplicate() => Ok(None),
        Err(err) => Err(err),
    }
}
