//! Who sets a workspace's guard rails: its egress, the policy it runs
//! under, its recording, its time limits and its resource limits.
//!
//! The attack this closes: an agent created its own workspace with an
//! egress that opened the gateway's own port on loopback, with the `open`
//! policy (so an exec the default policy holds for a person ran at once),
//! with `record: false` and with no time limit — the overseen party set its
//! own rails. Now a create gets the server's defaults, or the rails of a
//! template the admin configured at serve time (`--template NAME=FILE`)
//! which the caller names; over those, a caller may ask only for what its
//! role may manage ([`Permission::EgressManage`], [`Permission::PolicySwitch`],
//! [`Permission::RecordingManage`], [`Permission::LimitsManage`]: operators
//! and admins), or for narrower rails: an egress each of whose rules a rule
//! of the base covers ([`cubicle_runtime::egress::narrow`]), less of every
//! resource, a shorter TTL and idle timeout, the same policy, recording
//! on. Anything wider is a 403 naming the field and what to do.
//!
//! [`choose`] is called by the one create operation
//! ([`super::workspaces::create`]), whichever door the create came through.

use std::time::Duration;

use cubicle_runtime::egress::EgressPolicy;
use cubicle_runtime::egress::narrow;
use cubicle_runtime::limits::{Limits, LimitsPolicy, LimitsRequest};
use cubicle_runtime::time_limits::{TimeLimits, TimeLimitsSetting};
use serde_json::{Value, json};

use super::{OpContext, Permission, permission};
use crate::error::OpError;
use crate::ops::Core;
use crate::wire::egress::EgressBody;
use crate::wire::time_limits::TimeLimitsView;
use crate::wire::workspace::LimitsBody;

use crate::wire::guard_rails::{GuardRails, Templates};

/// The guard rails a workspace is created with.
#[derive(Debug, Clone)]
pub struct Chosen {
    /// Its own egress policy; `None`: the server's default.
    pub egress: Option<EgressPolicy>,
    pub policy: String,
    /// Its own time limits over the server's (empty: the server's).
    pub time_limits: TimeLimitsSetting,
    pub record: bool,
    pub limits: Limits,
}

impl Chosen {
    /// For the create's event.
    pub fn describe(&self, defaults: TimeLimits) -> Value {
        json!({
            "egress": self.egress.as_ref().map(EgressBody::of),
            "policy": self.policy,
            "time_limits": TimeLimitsView::from(&self.time_limits.over(defaults)),
            "record": self.record,
            "limits": LimitsBody::from(&self.limits),
        })
    }
}

/// What a create is measured against: the server's defaults, with the
/// named template's rails over them.
struct Base<'a> {
    rails: &'a GuardRails,
    /// The egress it would get.
    egress: EgressPolicy,
    policy: String,
    time_limits: TimeLimits,
    limits: LimitsPolicy,
    template: Option<&'a str>,
    templates: &'a Templates,
}

/// The rails a create by `ctx` asking `asked` (naming `template`) gets,
/// or a refusal naming the field: 400 for a template or policy that does
/// not exist or a value out of range, 403 for one wider than the caller
/// may choose.
pub fn choose(
    state: &Core,
    ctx: &OpContext,
    asked: &GuardRails,
    template: Option<&str>,
) -> Result<Chosen, OpError> {
    let none = GuardRails::default();
    let rails = match template {
        Some(name) => state.templates.get(name)?,
        None => &none,
    };
    let base = Base {
        egress: rails
            .egress
            .clone()
            .unwrap_or_else(|| state.egress.default_policy()),
        policy: state.gates.resolve(rails.policy.as_deref())?,
        time_limits: rails
            .time_limits
            .unwrap_or_default()
            .over(state.manager.default_time_limits()),
        limits: state.manager.limits_policy(),
        rails,
        template,
        templates: &state.templates,
    };
    if let Some(policy) = &asked.policy {
        state.gates.resolve(Some(policy))?;
    }
    decide(
        &|p| permission::granted(ctx.token.role, p),
        ctx,
        asked,
        &base,
    )
}

fn decide(
    may: &dyn Fn(Permission) -> bool,
    ctx: &OpContext,
    asked: &GuardRails,
    base: &Base<'_>,
) -> Result<Chosen, OpError> {
    let refuse = |field: &str, what: String, permission: Permission| {
        refused(ctx, base, field, &what, permission)
    };
    // Egress: its own, or the template's, or none (the server's default).
    if let Some(egress) = &asked.egress
        && !may(Permission::EgressManage)
    {
        narrow::within(egress, &base.egress).map_err(|wider| {
            refuse(
                &wider.field,
                format!("{} (wider than the egress it would get)", wider.message),
                Permission::EgressManage,
            )
        })?;
    }
    let egress = asked.egress.clone().or_else(|| base.rails.egress.clone());
    // Policy: only the base's, unless it may switch policies.
    let policy = asked.policy.clone().unwrap_or_else(|| base.policy.clone());
    if policy != base.policy && !may(Permission::PolicySwitch) {
        return Err(refuse(
            "policy",
            format!(
                "{policy:?} is not the policy it would get ({:?})",
                base.policy
            ),
            Permission::PolicySwitch,
        ));
    }
    // Recording: on unless the template turned it off; only turned off by
    // those who may.
    let base_record = base.rails.record.unwrap_or(true);
    let record = asked.record.unwrap_or(base_record);
    if !record && base_record && !may(Permission::RecordingManage) {
        return Err(refuse(
            "record",
            "false would turn off the recording of its screen".into(),
            Permission::RecordingManage,
        ));
    }
    // Time limits: the asked over the template's.
    let time_limits = over(asked.time_limits, base.rails.time_limits);
    if asked.time_limits.is_some() && !may(Permission::LimitsManage) {
        let server = TimeLimitsSetting::default().over(base.time_limits);
        let effective = time_limits.over(server);
        let field = if !no_longer(effective.ttl, base.time_limits.ttl) {
            Some("time_limits.ttl_seconds")
        } else if !no_longer(effective.idle, base.time_limits.idle) {
            Some("time_limits.idle_seconds")
        } else if effective.on_expiry != base.time_limits.on_expiry {
            Some("time_limits.on_expiry")
        } else {
            None
        };
        if let Some(field) = field {
            return Err(refuse(
                field,
                format!(
                    "longer or other than the time limits it would get (ttl {}, idle {}, then {})",
                    seconds(base.time_limits.ttl),
                    seconds(base.time_limits.idle),
                    base.time_limits.on_expiry.as_str()
                ),
                Permission::LimitsManage,
            ));
        }
    }
    // Resource limits: the asked over the template's, within the maxima.
    let base_request = base.rails.limits.unwrap_or_default();
    let request = match asked.limits {
        Some(a) => LimitsRequest {
            memory_mb: a.memory_mb.or(base_request.memory_mb),
            cpus: a.cpus.or(base_request.cpus),
            cpu_weight: a.cpu_weight.or(base_request.cpu_weight),
            pids: a.pids.or(base_request.pids),
            disk_mb: a.disk_mb.or(base_request.disk_mb),
        },
        None => base_request,
    };
    let limits = base
        .limits
        .resolve(&request)
        .map_err(|e| OpError::bad_request(e.to_string()))?;
    if asked.limits.is_some() && !may(Permission::LimitsManage) {
        let most = base
            .limits
            .resolve(&base_request)
            .map_err(|e| OpError::internal(format!("the template's limits: {e}")))?;
        let over = [
            ("memory_mb", limits.memory_bytes() > most.memory_bytes()),
            ("cpus", limits.cpus() > most.cpus()),
            ("cpu_weight", limits.cpu_weight() > most.cpu_weight()),
            ("pids", limits.pids() > most.pids()),
            ("disk_mb", limits.disk_bytes() > most.disk_bytes()),
        ]
        .into_iter()
        .find(|(_, over)| *over);
        if let Some((field, _)) = over {
            return Err(refuse(
                &format!("limits.{field}"),
                format!(
                    "more than the limits it would get ({})",
                    serde_json::to_string(&LimitsBody::from(&most)).unwrap_or_default()
                ),
                Permission::LimitsManage,
            ));
        }
    }
    Ok(Chosen {
        egress,
        policy,
        time_limits,
        record,
        limits,
    })
}

/// `asked` over `base`, field by field.
fn over(asked: Option<TimeLimitsSetting>, base: Option<TimeLimitsSetting>) -> TimeLimitsSetting {
    let (a, b) = (asked.unwrap_or_default(), base.unwrap_or_default());
    TimeLimitsSetting {
        ttl: a.ttl.or(b.ttl),
        idle: a.idle.or(b.idle),
        on_expiry: a.on_expiry.or(b.on_expiry),
    }
}

/// Whether limit `a` ends no later than `b` (`None`: no limit).
fn no_longer(a: Option<Duration>, b: Option<Duration>) -> bool {
    match (a, b) {
        (_, None) => true,
        (None, Some(_)) => false,
        (Some(a), Some(b)) => a <= b,
    }
}

fn seconds(limit: Option<Duration>) -> String {
    limit.map_or("none".into(), |d| format!("{}s", d.as_secs()))
}

/// The 403 for a rail wider than the caller may choose.
fn refused(
    ctx: &OpContext,
    base: &Base<'_>,
    field: &str,
    what: &str,
    permission: Permission,
) -> OpError {
    let from = match base.template {
        Some(name) => format!("template {name:?}'s guard rails"),
        None => "the server's default guard rails".into(),
    };
    OpError::forbidden(format!(
        "{field}: {what}. A token with role {} gets {from} and may ask only narrower ones (only a role that may {} chooses wider). \
         Ask an operator or admin to create the workspace with it, or name a template an admin configured (\"template\": NAME; {})",
        ctx.token.role.as_str(),
        permission.action(),
        base.templates.listed(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use cubicle_runtime::egress::EgressPolicyDoc;
    use cubicle_runtime::time_limits::OnExpiry;
    use cubicle_runtime::tokens::{Role, Scope, Token};

    fn ctx(role: Role) -> OpContext {
        OpContext {
            token: Token {
                id: "tok-1".into(),
                name: "t".into(),
                role,
                scope: Scope::Default,
            },
            request_id: "r".into(),
            client: None,
            hold: Default::default(),
        }
    }

    fn egress(allow: &[&str]) -> EgressPolicy {
        EgressPolicy::from_doc(&EgressPolicyDoc {
            allow: allow.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        })
        .unwrap()
    }

    fn run(role: Role, asked: &GuardRails, rails: &GuardRails) -> Result<Chosen, OpError> {
        let templates = Templates::default();
        let base = Base {
            rails,
            egress: rails
                .egress
                .clone()
                .unwrap_or_else(|| egress(&["*.example.org:443"])),
            policy: rails.policy.clone().unwrap_or_else(|| "default".into()),
            time_limits: TimeLimits {
                ttl: Some(Duration::from_secs(3600)),
                idle: None,
                on_expiry: OnExpiry::Stop,
            },
            limits: LimitsPolicy {
                default: Limits::default(),
                max_memory_bytes: 16 << 30,
                max_cpus: 8.0,
                max_pids: 32768,
                max_disk_bytes: 64 << 30,
            },
            template: None,
            templates: &templates,
        };
        let context = ctx(role);
        decide(&|p| permission::granted(role, p), &context, asked, &base)
    }

    fn refused_field(role: Role, asked: GuardRails) -> Option<String> {
        match run(role, &asked, &GuardRails::default()) {
            Ok(_) => None,
            Err(err) => {
                assert_eq!(
                    err.kind,
                    crate::error::ErrorKind::Forbidden,
                    "{}",
                    err.message
                );
                assert!(
                    err.message.contains("operator"),
                    "says what to do: {}",
                    err.message
                );
                Some(err.message.split(':').next().unwrap_or_default().to_owned())
            }
        }
    }

    #[test]
    fn an_agent_gets_the_defaults_or_narrower() {
        let agent = Role::Agent;
        let chosen = run(agent, &GuardRails::default(), &GuardRails::default()).unwrap();
        assert!(chosen.egress.is_none() && chosen.record && chosen.policy == "default");
        let narrower = GuardRails {
            egress: Some(egress(&["a.example.org:443"])),
            policy: Some("default".into()),
            record: Some(true),
            time_limits: Some(TimeLimitsSetting {
                ttl: Some(Duration::from_secs(60)),
                ..Default::default()
            }),
            limits: Some(LimitsRequest {
                memory_mb: Some(512),
                ..Default::default()
            }),
        };
        let chosen = run(agent, &narrower, &GuardRails::default()).unwrap();
        assert_eq!(chosen.limits.memory_bytes(), 512 << 20);
        assert_eq!(chosen.egress.unwrap().allow[0].text, "a.example.org:443");
    }

    #[test]
    fn an_agent_asking_wider_is_refused_naming_the_field() {
        let agent = Role::Agent;
        let ask = |f: fn(&mut GuardRails)| {
            let mut rails = GuardRails::default();
            f(&mut rails);
            rails
        };
        let cases: [(GuardRails, &str); 8] = [
            (
                ask(|r| r.egress = Some(egress(&["127.0.0.1/32:7878"]))),
                "egress.allow[0]",
            ),
            (ask(|r| r.policy = Some("open".into())), "policy"),
            (ask(|r| r.record = Some(false)), "record"),
            (
                ask(|r| {
                    r.time_limits = Some(TimeLimitsSetting {
                        ttl: Some(Duration::ZERO),
                        ..Default::default()
                    })
                }),
                "time_limits.ttl_seconds",
            ),
            (
                ask(|r| {
                    r.time_limits = Some(TimeLimitsSetting {
                        ttl: Some(Duration::from_secs(7200)),
                        ..Default::default()
                    })
                }),
                "time_limits.ttl_seconds",
            ),
            (
                ask(|r| {
                    r.time_limits = Some(TimeLimitsSetting {
                        on_expiry: Some(OnExpiry::Delete),
                        ..Default::default()
                    })
                }),
                "time_limits.on_expiry",
            ),
            (
                ask(|r| {
                    r.limits = Some(LimitsRequest {
                        memory_mb: Some(4096),
                        ..Default::default()
                    })
                }),
                "limits.memory_mb",
            ),
            (
                ask(|r| {
                    r.limits = Some(LimitsRequest {
                        cpu_weight: Some(1000),
                        ..Default::default()
                    })
                }),
                "limits.cpu_weight",
            ),
        ];
        for (asked, field) in cases {
            assert_eq!(
                refused_field(agent, asked.clone()).as_deref(),
                Some(field),
                "{asked:?}"
            );
            // Operators and admins may choose every one of them.
            assert_eq!(
                refused_field(Role::Operator, asked.clone()),
                None,
                "{asked:?}"
            );
            assert_eq!(refused_field(Role::Admin, asked), None);
        }
    }

    #[test]
    fn a_template_is_the_base_an_agent_may_narrow() {
        let rails = GuardRails {
            egress: Some(egress(&["127.0.0.1/32:8443", "*.test"])),
            policy: Some("open".into()),
            record: Some(false),
            ..Default::default()
        };
        let chosen = run(Role::Agent, &GuardRails::default(), &rails).unwrap();
        assert_eq!((chosen.policy.as_str(), chosen.record), ("open", false));
        assert_eq!(chosen.egress.as_ref().unwrap().allow.len(), 2);
        let narrower = GuardRails {
            egress: Some(egress(&["127.0.0.1/32:8443"])),
            record: Some(true),
            ..Default::default()
        };
        let chosen = run(Role::Agent, &narrower, &rails).unwrap();
        assert_eq!(chosen.egress.unwrap().allow.len(), 1);
        assert!(chosen.record);
        let wider = GuardRails {
            egress: Some(egress(&["127.0.0.1/32:7878"])),
            ..Default::default()
        };
        let err = run(Role::Agent, &wider, &rails).unwrap_err();
        assert!(
            err.message.starts_with("egress.allow[0]"),
            "{}",
            err.message
        );
    }
}
