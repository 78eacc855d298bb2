//! The control lock of each workspace: who may send input to its desktop.
//!
//! The holder is the agent (the default) or one named operator. While an
//! operator holds it, the agent's input actions get 409 and only that
//! operator's live-view input reaches the desktop ([`crate::vnc`] enforces
//! it on the RFB stream). Every take and hand-back is written to the event
//! table before anyone is told of it. Changes are published on a `watch`
//! channel per workspace, which live views and the control event stream read.

use std::sync::Arc;

use cubicle_runtime::events::{self, Actor, EventKind};
use cubicle_runtime::state::{StateError, Store};
use cubicle_runtime::tokens::Token;

use crate::ops::OpContext;
use crate::slots::{Call, Control, Holder, Slot, Slots};
use serde_json::{Value, json};
use tokio::sync::watch;

/// The API's view of `control`.
pub fn view(control: &Control, workspace: &str) -> Value {
    json!({
        "workspace": workspace,
        "holder": control.holder,
        "since_ms": control.since_ms,
        "since": rfc3339(control.since_ms),
        "paused": control.paused,
        "call": control.call,
    })
}

/// Why a control request was refused.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    #[error(
        "operator {name} holds control since {since}; the agent's input and changes are refused until they hand back (POST /v1/workspaces/{workspace}/control/release)"
    )]
    Held {
        workspace: String,
        name: String,
        since: String,
    },
    #[error("operator {name} holds control since {since}; only they or an admin can hand it back")]
    NotHolder { name: String, since: String },
    #[error(
        "workspace {workspace} is paused: it takes no input and no changes until it is resumed (POST /v1/workspaces/{workspace}/resume)"
    )]
    Paused { workspace: String },
    #[error("cannot record the control change, nothing changed: {0}")]
    Record(#[from] StateError),
}

impl ControlError {
    fn held(workspace: &str, control: &Control) -> Self {
        let name = match &control.holder {
            Holder::Operator { name, .. } => name.clone(),
            Holder::Agent => "agent".into(),
        };
        Self::Held {
            workspace: workspace.to_owned(),
            name,
            since: rfc3339(control.since_ms),
        }
    }
}

/// Every workspace's control lock (made on first use, held by the agent),
/// kept in its [`Slots`] entry.
#[derive(Default)]
pub struct Controls {
    slots: Arc<Slots>,
    /// Serialises changes, so the event table has them in the order made.
    changing: tokio::sync::Mutex<()>,
}

impl Controls {
    /// Over the gateway's workspace entries.
    pub fn over(slots: Arc<Slots>) -> Self {
        Self {
            slots,
            changing: tokio::sync::Mutex::default(),
        }
    }

    fn slot(&self, workspace: &str) -> Arc<Slot> {
        self.slots.get(workspace)
    }

    pub fn current(&self, workspace: &str) -> Control {
        self.slot(workspace).control.borrow().clone()
    }

    /// Takes back who held each workspace's control when the previous
    /// daemon went (the last `control.take` or `control.release` of each,
    /// in the event log): a restart must not hand the agent back a
    /// workspace an operator had taken over. Only workspaces `exists` says
    /// are still there count. Returns how many are held.
    pub async fn restore(
        &self,
        store: &Store,
        exists: impl Fn(&str) -> bool,
    ) -> Result<usize, StateError> {
        let last =
            events::latest_per_workspace(store, EventKind::ControlTake, EventKind::ControlRelease)
                .await?;
        let mut held = 0;
        for event in last {
            let (Some(workspace), Some(actor)) = (&event.workspace_id, &event.actor) else {
                continue;
            };
            if event.kind != EventKind::ControlTake.as_str() || !exists(workspace) {
                continue;
            }
            self.slot(workspace).control.send_replace(Control {
                holder: Holder::Operator {
                    token_id: actor.id.clone(),
                    name: actor.name.clone(),
                    role: actor.role.clone(),
                },
                since_ms: event.at,
                paused: false,
                call: None,
            });
            held += 1;
        }
        // A call for a person stands until an operator takes over.
        let last =
            events::latest_per_workspace(store, EventKind::ControlCall, EventKind::ControlTake)
                .await?;
        for event in last {
            let (Some(workspace), Some(actor)) = (&event.workspace_id, &event.actor) else {
                continue;
            };
            if event.kind != EventKind::ControlCall.as_str() || !exists(workspace) {
                continue;
            }
            let call = Call {
                reason: event.detail["reason"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                by: actor.name.clone(),
                since_ms: event.at,
            };
            self.slot(workspace)
                .control
                .send_modify(|control| control.call = Some(call));
        }
        Ok(held)
    }

    /// Follows the control of `workspace`.
    pub fn subscribe(&self, workspace: &str) -> watch::Receiver<Control> {
        self.slot(workspace).control.subscribe()
    }

    /// Refuses input from `caller` unless no operator holds control or
    /// `caller` is the holder (and `may_hold`: its role may hold control at
    /// all, as the operations decide).
    pub fn check_input(
        &self,
        workspace: &str,
        caller: &Token,
        may_hold: bool,
    ) -> Result<(), ControlError> {
        self.check_running(workspace)?;
        self.check_holder(workspace, caller, may_hold)
    }

    /// Refuses `caller` unless no operator holds control or `caller` is
    /// the holder and `may_hold`, paused or not.
    pub fn check_holder(
        &self,
        workspace: &str,
        caller: &Token,
        may_hold: bool,
    ) -> Result<(), ControlError> {
        let control = self.current(workspace);
        match control.holder {
            Holder::Agent => Ok(()),
            _ if may_hold && control.is_held_by(caller) => Ok(()),
            _ => Err(ControlError::held(workspace, &control)),
        }
    }

    /// Refuses anything that would reach a paused workspace.
    pub fn check_running(&self, workspace: &str) -> Result<(), ControlError> {
        if self.slot(workspace).control.borrow().paused {
            return Err(ControlError::Paused {
                workspace: workspace.to_owned(),
            });
        }
        Ok(())
    }

    /// Marks `workspace` paused or not (no event: the pause and resume
    /// operations write theirs); live views stop forwarding input at once.
    pub fn set_paused(&self, workspace: &str, paused: bool) {
        self.slot(workspace).control.send_if_modified(|control| {
            let changed = control.paused != paused;
            control.paused = paused;
            changed
        });
    }

    /// `caller` takes control of `workspace` (again: no change, no event).
    pub async fn take(
        &self,
        store: &Store,
        workspace: &str,
        ctx: &OpContext,
    ) -> Result<Control, ControlError> {
        let caller = &ctx.token;
        let _one = self.changing.lock().await;
        let slot = self.slot(workspace);
        let sender = &slot.control;
        let current = sender.borrow().clone();
        match &current.holder {
            _ if current.is_held_by(caller) => return Ok(current),
            Holder::Operator { .. } => return Err(ControlError::held(workspace, &current)),
            Holder::Agent => {}
        }
        let detail = json!({ "from": "agent" });
        let (_, at) = record(
            store,
            EventKind::ControlTake,
            workspace,
            Some(ctx),
            None,
            detail,
        )
        .await?;
        let taken = Control {
            holder: Holder::Operator {
                token_id: caller.id.clone(),
                name: caller.name.clone(),
                role: caller.role.as_str().to_owned(),
            },
            since_ms: at,
            paused: current.paused,
            // A person came: the agent's call is answered.
            call: None,
        };
        sender.send_replace(taken.clone());
        Ok(taken)
    }

    /// The agent calls for a person (again: the newer reason stands). The
    /// call is an event, so webhooks subscribed to `control.call` fire,
    /// and it stands until an operator takes over.
    pub async fn call(
        &self,
        store: &Store,
        workspace: &str,
        ctx: &OpContext,
        reason: &str,
    ) -> Result<Control, ControlError> {
        let _one = self.changing.lock().await;
        let slot = self.slot(workspace);
        let detail = json!({ "reason": reason });
        let (_, at) = record(
            store,
            EventKind::ControlCall,
            workspace,
            Some(ctx),
            None,
            detail,
        )
        .await?;
        let call = Call {
            reason: reason.to_owned(),
            by: ctx.token.name.clone(),
            since_ms: at,
        };
        slot.control
            .send_modify(|control| control.call = Some(call));
        Ok(slot.control.borrow().clone())
    }

    /// Hands control of `workspace` back to the agent. The holder may, and
    /// anyone `may_override` (an admin, as the operations decide); handing
    /// back when the agent holds it is a no-op.
    pub async fn release(
        &self,
        store: &Store,
        workspace: &str,
        ctx: &OpContext,
        may_override: bool,
    ) -> Result<Control, ControlError> {
        let caller = &ctx.token;
        let _one = self.changing.lock().await;
        let slot = self.slot(workspace);
        let sender = &slot.control;
        let current = sender.borrow().clone();
        let Holder::Operator { name, .. } = &current.holder else {
            return Ok(current);
        };
        if !current.is_held_by(caller) && !may_override {
            return Err(ControlError::NotHolder {
                name: name.clone(),
                since: rfc3339(current.since_ms),
            });
        }
        let detail = json!({ "from": name, "forced": !current.is_held_by(caller) });
        self.hand_back(store, workspace, sender, Some(ctx), None, detail)
            .await
    }

    /// Hands back every workspace held by token `token_id` (it was revoked).
    pub async fn release_token(
        &self,
        store: &Store,
        token_id: &str,
        by: &Actor,
    ) -> Result<Vec<String>, ControlError> {
        let _one = self.changing.lock().await;
        let held: Vec<(String, Arc<Slot>)> = self
            .slots
            .all()
            .into_iter()
            .filter(|(_, slot)| {
                matches!(&slot.control.borrow().holder, Holder::Operator { token_id: t, .. } if t == token_id)
            })
            .collect();
        for (workspace, slot) in &held {
            let detail = json!({ "reason": "token revoked", "token": token_id });
            self.hand_back(store, workspace, &slot.control, None, Some(by), detail)
                .await?;
        }
        Ok(held.into_iter().map(|(id, _)| id).collect())
    }

    async fn hand_back(
        &self,
        store: &Store,
        workspace: &str,
        sender: &watch::Sender<Control>,
        ctx: Option<&OpContext>,
        actor: Option<&Actor>,
        detail: Value,
    ) -> Result<Control, ControlError> {
        let (_, at) = record(
            store,
            EventKind::ControlRelease,
            workspace,
            ctx,
            actor,
            detail,
        )
        .await?;
        let back = Control {
            holder: Holder::Agent,
            since_ms: at,
            paused: sender.borrow().paused,
            call: sender.borrow().call.clone(),
        };
        sender.send_replace(back.clone());
        Ok(back)
    }
}

/// Appends a control event: by `ctx` (with its request id and client) or,
/// without a request, by `actor`.
async fn record(
    store: &Store,
    kind: EventKind,
    workspace: &str,
    ctx: Option<&OpContext>,
    actor: Option<&Actor>,
    detail: Value,
) -> Result<(i64, i64), StateError> {
    let from_ctx = ctx.map(OpContext::actor);
    let client = ctx.and_then(|c| c.client).map(|a| a.to_string());
    let event = events::NewEvent {
        kind,
        workspace_id: Some(workspace),
        actor: from_ctx.as_ref().or(actor),
        detail,
        request_id: ctx.map(|c| c.request_id.as_str()),
        client: client.as_deref(),
        outcome: Some("ok"),
    };
    events::append(store, &event).await
}

/// Unix milliseconds as RFC 3339 UTC (one function for every door).
pub use cubicle_recorder::har::rfc3339;

#[cfg(test)]
mod tests {
    use super::*;
    use cubicle_runtime::tokens::{self, Role};

    /// A fresh database file (removed when the guard drops).
    struct TempDb(std::path::PathBuf);

    impl Drop for TempDb {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    async fn store() -> (TempDb, Store) {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("cubicle-control-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let store = Store::open(&dir.join("db")).await.unwrap();
        (TempDb(dir), store)
    }

    fn ctx(token: &Token) -> OpContext {
        OpContext {
            token: token.clone(),
            request_id: "req-test".into(),
            client: None,
            hold: Default::default(),
        }
    }

    fn token(id: &str, role: Role) -> Token {
        Token {
            id: id.into(),
            name: format!("{id}-name"),
            role,
            scope: Default::default(),
        }
    }

    #[test]
    fn times_are_utc_rfc3339() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(951_782_400_123), "2000-02-29T00:00:00.123Z");
        assert_eq!(rfc3339(1_796_083_199_000), "2026-11-30T23:59:59.000Z");
    }

    #[tokio::test]
    async fn a_restarted_daemon_keeps_who_held_control() {
        let (_dir, store) = store().await;
        let agent = token("tok-agent", Role::Agent);
        let alice = token("tok-alice", Role::Operator);
        let before = Controls::default();
        before.take(&store, "ws-1", &ctx(&alice)).await.unwrap();
        before.take(&store, "ws-2", &ctx(&alice)).await.unwrap();
        before
            .release(&store, "ws-2", &ctx(&alice), false)
            .await
            .unwrap();
        before.take(&store, "ws-gone", &ctx(&alice)).await.unwrap();
        // The next daemon, from the event log alone.
        let after = Controls::default();
        let held = after.restore(&store, |id| id != "ws-gone").await.unwrap();
        assert_eq!(held, 1);
        assert!(after.current("ws-1").is_held_by(&alice));
        assert_eq!(
            after.current("ws-1").since_ms,
            before.current("ws-1").since_ms
        );
        assert!(matches!(
            after.check_input("ws-1", &agent, false),
            Err(ControlError::Held { .. })
        ));
        assert!(
            after.check_input("ws-2", &agent, false).is_ok(),
            "handed back"
        );
        assert!(
            after.check_input("ws-gone", &agent, false).is_ok(),
            "deleted"
        );
    }

    #[tokio::test]
    async fn a_call_for_a_person_stands_through_a_restart_until_someone_takes_over() {
        let (_dir, store) = store().await;
        let agent = token("tok-agent", Role::Agent);
        let alice = token("tok-alice", Role::Operator);
        let before = Controls::default();
        let seen = before.subscribe("ws-1");
        let called = before
            .call(&store, "ws-1", &ctx(&agent), "solve the captcha")
            .await
            .unwrap();
        assert!(seen.has_changed().unwrap(), "viewers are told at once");
        let call = called.call.expect("the call stands");
        assert_eq!(
            (call.reason.as_str(), call.by.as_str()),
            ("solve the captcha", "tok-agent-name")
        );
        before
            .call(&store, "ws-2", &ctx(&agent), "answered")
            .await
            .unwrap();
        before.take(&store, "ws-2", &ctx(&alice)).await.unwrap();
        assert_eq!(before.current("ws-2").call, None, "a take answers it");
        before
            .release(&store, "ws-2", &ctx(&alice), false)
            .await
            .unwrap();
        assert_eq!(
            before.current("ws-2").call,
            None,
            "and a hand-back does not bring it back"
        );
        // The next daemon, from the event log alone.
        let after = Controls::default();
        after.restore(&store, |_| true).await.unwrap();
        assert_eq!(after.current("ws-1").call, Some(call));
        assert_eq!(after.current("ws-2").call, None);
    }

    #[tokio::test]
    async fn take_blocks_agent_input_until_hand_back() {
        let (_dir, store) = store().await;
        let controls = Controls::default();
        let agent = token("tok-agent", Role::Agent);
        let alice = token("tok-alice", Role::Operator);
        let bob = token("tok-bob", Role::Operator);
        let mut seen = controls.subscribe("ws-1");
        assert!(controls.check_input("ws-1", &agent, false).is_ok());
        controls.take(&store, "ws-1", &ctx(&alice)).await.unwrap();
        assert!(seen.has_changed().unwrap());
        assert!(seen.borrow_and_update().is_held_by(&alice));
        let err = controls
            .check_input("ws-1", &agent, false)
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("operator tok-alice-name holds control since 20"),
            "{err}"
        );
        assert!(controls.check_input("ws-1", &alice, true).is_ok());
        assert!(
            controls.check_input("ws-2", &agent, false).is_ok(),
            "other workspaces are free"
        );
        // Bob can neither take it nor hand it back.
        assert!(matches!(
            controls.take(&store, "ws-1", &ctx(&bob)).await,
            Err(ControlError::Held { .. })
        ));
        assert!(matches!(
            controls.release(&store, "ws-1", &ctx(&bob), false).await,
            Err(ControlError::NotHolder { .. })
        ));
        controls.take(&store, "ws-1", &ctx(&alice)).await.unwrap();
        controls
            .release(&store, "ws-1", &ctx(&alice), false)
            .await
            .unwrap();
        controls
            .release(&store, "ws-1", &ctx(&alice), false)
            .await
            .unwrap();
        assert!(controls.check_input("ws-1", &agent, false).is_ok());
        let kinds: Vec<String> = events::list(&store, Some("ws-1"), 0, 10)
            .await
            .unwrap()
            .into_iter()
            .map(|e| format!("{} {}", e.kind, e.actor.unwrap().name))
            .collect();
        assert_eq!(
            kinds,
            [
                "control.take tok-alice-name",
                "control.release tok-alice-name"
            ]
        );
    }

    #[tokio::test]
    async fn a_paused_workspace_takes_nobodys_input_and_keeps_its_holder() {
        let (_dir, store) = store().await;
        let controls = Controls::default();
        let agent = token("tok-agent", Role::Agent);
        let alice = token("tok-alice", Role::Operator);
        let mut seen = controls.subscribe("ws-1");
        controls.set_paused("ws-1", true);
        assert!(
            seen.borrow_and_update().paused,
            "live views learn it at once"
        );
        assert!(matches!(
            controls.check_input("ws-1", &agent, false),
            Err(ControlError::Paused { .. })
        ));
        // Taking over while paused is allowed, but gives no input yet.
        let taken = controls.take(&store, "ws-1", &ctx(&alice)).await.unwrap();
        assert!(taken.paused && taken.is_held_by(&alice));
        assert!(matches!(
            controls.check_input("ws-1", &alice, true),
            Err(ControlError::Paused { .. })
        ));
        assert!(controls.check_input("ws-2", &agent, false).is_ok());
        controls.set_paused("ws-1", false);
        assert!(controls.check_input("ws-1", &alice, true).is_ok());
        let back = controls
            .release(&store, "ws-1", &ctx(&alice), false)
            .await
            .unwrap();
        assert!(!back.paused);
        assert!(controls.check_input("ws-1", &agent, false).is_ok());
        assert_eq!(view(&controls.current("ws-1"), "ws-1")["paused"], false);
    }

    #[tokio::test]
    async fn admins_force_and_revoked_tokens_hand_back() {
        let (_dir, store) = store().await;
        let controls = Controls::default();
        let (alice, _) = tokens::create(&store, "alice", Role::Operator, Default::default())
            .await
            .unwrap();
        let admin = token("tok-root", Role::Admin);
        controls.take(&store, "ws-1", &ctx(&alice)).await.unwrap();
        controls.take(&store, "ws-2", &ctx(&alice)).await.unwrap();
        controls
            .release(&store, "ws-1", &ctx(&admin), true)
            .await
            .unwrap();
        let mut released = controls
            .release_token(&store, &alice.id, &Actor::from(&admin))
            .await
            .unwrap();
        released.sort();
        assert_eq!(released, ["ws-2"]);
        assert_eq!(controls.current("ws-2").holder, Holder::Agent);
        let all = events::list(&store, None, 0, 10).await.unwrap();
        assert_eq!(all.len(), 4);
        assert_eq!(all[2].detail["forced"], true);
        assert_eq!(all[3].detail["reason"], "token revoked");
    }

    /// The control lock, the activity clock and the policy choice of a
    /// workspace are one entry, and its delete takes all of it: a new
    /// workspace of the same id starts with the agent holding control.
    #[tokio::test]
    async fn one_entry_per_workspace_and_a_delete_takes_all_of_it() {
        let (_dir, store) = store().await;
        let slots = Arc::new(Slots::default());
        let controls = Controls::over(slots.clone());
        let activity = crate::ops::activity::Activity::over(slots.clone());
        let gates = crate::gates::Gates::shipped(slots.clone());
        let alice = token("tok-alice", Role::Operator);
        controls.take(&store, "ws-1", &ctx(&alice)).await.unwrap();
        activity.touch("ws-1");
        gates.assign(&store, "ws-1", "default", None).await.unwrap();
        assert_eq!(slots.len(), 1);
        slots.remove("ws-1");
        assert!(slots.is_empty());
        assert_eq!(controls.current("ws-1").holder, Holder::Agent);
    }
}
