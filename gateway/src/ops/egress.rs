//! Each workspace's egress: its policy (given at create, shown by `GET
//! .../egress`, changed by operators and admins with `PUT .../egress`, the
//! server's `--egress-default` otherwise) and its proxy, started when the
//! workspace runs and torn down with it (downloads in flight included).
//! The proxy itself is `cubicle_runtime::egress`; its events come here and
//! go into the event log like every other operation's, and it asks the
//! workspace's policy through [`super::egress_gate`].

use std::sync::Arc;

use cubicle_runtime::egress::listener::{self, EgressPeer};
use cubicle_runtime::egress::{
    Egress, EgressEvent, EgressEvents, EgressPolicy, EgressPolicyDoc, PolicyCell, Walls,
    WorkspaceProxy,
};
use cubicle_runtime::microvm::layer::Layer;
use cubicle_runtime::state::{Store, WorkspaceRecord};
use serde_json::json;

use super::audit::{Audit, EventKind};
use super::{OpContext, Permission, access};
use crate::egress::{EgressDefault, EgressHub, PolicyView};
use crate::error::OpError;
use crate::host::EgressLive;
use crate::ops::Core;

/// Starts the proxy of a workspace that just reached running.
pub async fn start(state: &Core, workspace: &str) {
    let hub = &state.egress;
    let Some(egress) = hub.proxies() else {
        return;
    };
    let held = hub.take_held();
    if let Some(mut held) = held {
        let state = state.clone();
        let task = tokio::spawn(async move {
            while let Some((workspace, id)) = held.recv().await {
                super::downloads::auto_release(&state, &workspace, &id).await;
            }
        });
        hub.set_auto_release(task);
    }
    let record = match state.manager.get(workspace).await {
        Ok(record) => record,
        Err(err) => {
            tracing::warn!(workspace, %err, "egress: the running workspace is gone");
            return;
        }
    };
    if let Err(err) = start_for(egress, state, &record).await {
        tracing::error!(workspace, %err, "egress: cannot start the workspace's proxy; it has no way out");
    }
}

async fn start_for(
    egress: Arc<Egress>,
    state: &Core,
    record: &WorkspaceRecord,
) -> Result<(), String> {
    let spec = state.manager.spec(record);
    let top_pid = spec.top_pid.ok_or("it has no top process")?;
    let policy = state
        .egress
        .policy_of(&record.id)
        .await
        .map_err(|e| e.message)?;
    // A jail's relay connects to a socket shown to it; a microVM's
    // guest connects to vsock host port 3128, which its VMM (the top
    // process, the workspace's uid) hands to this socket.
    let listener = match record.backend.as_str() {
        "jail" => listener::bind(&spec.dir),
        "microvm" => listener::bind_at(
            &Layer::of(&spec).vsock_port_socket(cubicle_runtime::microvm::EGRESS_VSOCK_PORT),
        ),
        other => return Err(format!("the {other} backend has no egress channel")),
    }
    .map_err(|e| e.to_string())?;
    let proxy = WorkspaceProxy::new(egress, &record.id, PolicyCell::new(policy.policy));
    // The user's uid and the services' (leased in pairs); the tree
    // check is what ties a connection to this workspace.
    let peer = EgressPeer {
        uids: vec![spec.host_uid, spec.host_uid + 1],
        top_pid,
    };
    let accept = tokio::spawn(listener::accept_loop(listener, peer, proxy.clone()));
    let downloads = tokio::spawn(crate::browser_downloads::guard(
        state.manager.clone(),
        state.audit.clone(),
        record.id.clone(),
    ));
    let live = EgressLive {
        proxy,
        accept,
        downloads,
    };
    state.hosts.get(&record.id).set_egress(live).await;
    super::secrets::refresh(state, &record.id).await;
    Ok(())
}

/// Starts the proxies of workspaces that already run when the daemon
/// starts (re-attached by reconcile: no lifecycle event says so).
pub async fn resume(state: &Core) {
    let Ok(all) = state.manager.list().await else {
        return;
    };
    for record in all {
        if record.state == cubicle_runtime::state::WorkspaceState::Running {
            start(state, &record.id).await;
        }
    }
}

/// Checks a policy document from a request; the error names the field.
pub fn parse_policy(doc: &EgressPolicyDoc) -> Result<EgressPolicy, OpError> {
    EgressPolicy::from_doc(doc).map_err(|e| OpError::bad_request(e.to_string()))
}

/// `GET /v1/workspaces/{id}/egress`.
pub async fn get(state: &Core, ctx: &OpContext, id: &str) -> Result<PolicyView, OpError> {
    access::workspace(state, ctx, id, Permission::WorkspacesView).await?;
    state.egress.policy_of(id).await
}

/// The policy given at create: recorded (an event) and applied.
pub async fn set_at_create(
    state: &Core,
    ctx: &OpContext,
    id: &str,
    policy: EgressPolicy,
) -> Result<(), OpError> {
    let detail = json!({ "policy": policy.to_doc(), "at": "create" });
    let run = async {
        state
            .egress
            .store_policy(&state.hosts, id, &policy, Some(&ctx.token.id))
            .await
    };
    state
        .audit
        .run(ctx, EventKind::EgressPolicy, Some(id), detail, run, |_| {
            json!({})
        })
        .await
}

/// Whether the caller's role may change a workspace's egress at all: doors ask this before they
/// read the request, so a caller without the role gets 403, never a 400
/// about a body it may not send. The operation checks it again, with the
/// workspace's scope.
pub fn may_put(ctx: &OpContext) -> Result<(), OpError> {
    ctx.require(Permission::EgressManage)
}

/// `PUT /v1/workspaces/{id}/egress` (operators and admins).
pub async fn put(
    state: &Core,
    ctx: &OpContext,
    id: &str,
    policy: EgressPolicy,
) -> Result<PolicyView, OpError> {
    access::workspace(state, ctx, id, Permission::EgressManage).await?;
    let before = state.egress.policy_of(id).await?;
    let detail = json!({ "policy": policy.to_doc(), "before": before.policy.to_doc() });
    let run = async {
        state
            .egress
            .store_policy(&state.hosts, id, &policy, Some(&ctx.token.id))
            .await?;
        Ok(PolicyView {
            policy: policy.clone(),
            is_default: false,
        })
    };
    state
        .audit
        .run(ctx, EventKind::EgressPolicy, Some(id), detail, run, |_| {
            json!({})
        })
        .await
}

/// The proxy's events into the event log; held downloads are also handed
/// to the automatic release.
pub struct AuditEvents {
    audit: Audit,
    held: Option<tokio::sync::mpsc::Sender<(String, String)>>,
}

impl AuditEvents {
    pub fn new(audit: Audit) -> Self {
        Self { audit, held: None }
    }
}

fn kind_of(event: &EgressEvent) -> EventKind {
    match event {
        EgressEvent::Decision { .. } => EventKind::EgressDecision,
        EgressEvent::Request { .. } => EventKind::EgressRequest,
        EgressEvent::SecretBlocked { .. } => EventKind::EgressSecretBlocked,
        EgressEvent::UpstreamRefused { .. } => EventKind::EgressUpstreamRefused,
        EgressEvent::Close { .. } => EventKind::EgressClose,
        EgressEvent::DownloadHeld { .. } => EventKind::DownloadHeld,
        EgressEvent::DownloadRefused { .. } => EventKind::DownloadRefused,
        EgressEvent::Widened { .. } => EventKind::EgressPolicy,
    }
}

impl EgressEvents for AuditEvents {
    fn record<'a>(
        &'a self,
        workspace: &'a str,
        event: EgressEvent,
    ) -> cubicle_runtime::egress::events::Recorded<'a> {
        let audit = self.audit.clone();
        let workspace = workspace.to_owned();
        if let (EgressEvent::DownloadHeld { id, .. }, Some(held)) = (&event, &self.held) {
            // Full: it simply stays held for an operator.
            let _ = held.try_send((workspace.clone(), id.clone()));
        }
        Box::pin(async move {
            let kind = kind_of(&event);
            debug_assert_eq!(kind.as_str(), event.kind());
            let outcome = event.outcome();
            let detail = serde_json::to_value(&event).map_err(|e| e.to_string())?;
            // Its own task: the proxy's futures are dropped when a client
            // goes away or the workspace stops, and an append cut off inside
            // its transaction would hand a broken connection back to the
            // pool. A spawned append always runs to its end.
            let append = tokio::spawn(async move {
                audit
                    .note(None, kind, Some(&workspace), detail, Some(outcome))
                    .await
                    .map_err(|e| e.message)
            });
            append.await.map_err(|e| e.to_string())?
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults() {
        assert_eq!(EgressDefault::parse("deny"), Ok(EgressDefault::Deny));
        assert!(EgressDefault::parse("open").unwrap_err().contains("deny"));
        assert!(EgressDefault::Deny.policy().allow.is_empty());
        assert!(!EgressDefault::Allow.policy().allow.is_empty());
    }
}

/// How the daemon's egress is set up (`cubicle serve --egress-*`).
#[derive(Debug, Clone)]
pub struct EgressConfig {
    pub data_dir: std::path::PathBuf,
    pub default: EgressDefault,
    /// Extra CA files trusted for upstream servers.
    pub extra_ca: Vec<std::path::PathBuf>,
    /// Intercept TLS (the default).
    pub intercept: bool,
    pub quarantine_max_bytes: u64,
    /// Extra YARA rules.
    pub rules_dir: Option<std::path::PathBuf>,
    /// The image's system CA bundle, the base of the workspaces' one.
    pub image_bundle: Option<std::path::PathBuf>,
    /// Tests only: a fixed resolver (`name=ip,...;ip,...` lines).
    pub test_hosts: Option<std::path::PathBuf>,
    /// Tests only, unsafe: rules may open the host's own services (its
    /// loopback, its addresses); the daemon's own ports stay closed.
    pub allow_host_services: bool,
}

/// What [`open`] made.
pub struct Opened {
    pub hub: EgressHub,
    /// What no rule opens: tell it every socket the daemon listens on.
    pub walls: Arc<Walls>,
    /// The trust files every jail is shown.
    pub trust_dir: Option<std::path::PathBuf>,
    pub rules: usize,
}

/// Makes (or loads) the CA, the trust files, the quarantine and the
/// scanner; every error names what to fix.
pub fn open(
    config: &EgressConfig,
    store: Store,
    gates: Arc<crate::gates::Gates>,
) -> Result<Opened, String> {
    use cubicle_runtime::egress::resolve::{Resolve, ScriptedResolver, SystemResolver};
    use cubicle_runtime::egress::tls::{CertificateAuthority, Interception, client_config};
    use cubicle_runtime::egress::trust::TrustFiles;
    use cubicle_runtime::quarantine::{Quarantine, Scanner};

    let egress_dir = config.data_dir.join("egress");
    let (interception, trust_dir, ca_pem) = if config.intercept {
        let ca = CertificateAuthority::load_or_create(&egress_dir.join("ca"))
            .map_err(|e| e.to_string())?;
        let client = client_config(&config.extra_ca).map_err(|e| e.to_string())?;
        let pem = ca.cert_pem().to_owned();
        let trust = TrustFiles::prepare(&config.data_dir, &pem, config.image_bundle.as_deref())
            .map_err(|e| format!("cannot write the egress trust files: {e}"))?;
        (
            Some(Arc::new(Interception { ca, client })),
            Some(trust.dir),
            Some(pem),
        )
    } else {
        (None, None, None)
    };
    let scanner = Scanner::new(config.rules_dir.as_deref()).map_err(|e| e.to_string())?;
    let rules = scanner.len();
    let quarantine = Quarantine::open(
        &config.data_dir,
        store.clone(),
        scanner,
        config.quarantine_max_bytes,
    )
    .map_err(|e| {
        format!(
            "cannot open the quarantine under {}: {e}",
            config.data_dir.display()
        )
    })?;
    let resolver: Arc<dyn Resolve> = match &config.test_hosts {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("--egress-test-hosts {}: {e}", path.display()))?;
            Arc::new(ScriptedResolver::from_text(&text)?)
        }
        None => Arc::new(SystemResolver),
    };
    let (held_tx, held_rx) = tokio::sync::mpsc::channel(1024);
    let walls = Arc::new(Walls::new(config.allow_host_services));
    let egress = Egress {
        resolver,
        interception,
        quarantine: Some(quarantine),
        events: Arc::new(AuditEvents {
            audit: Audit::new(store.clone()),
            held: Some(held_tx),
        }),
        gate: Arc::new(super::egress_gate::PolicyGate::new(gates, store.clone())),
        walls: walls.clone(),
        limits: Default::default(),
    };
    Ok(Opened {
        walls,
        hub: EgressHub::new(store, Some(Arc::new(egress)), config.default, ca_pem)
            .with_held(held_rx),
        trust_dir,
        rules,
    })
}
