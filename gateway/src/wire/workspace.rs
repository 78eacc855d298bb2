//! `POST /v1/workspaces` and what a workspace looks like on the wire.

use cubicle_runtime::geometry::Geometry;
use cubicle_runtime::limits::{Limits, LimitsRequest};
use cubicle_runtime::manager::CreateRequest;
use cubicle_runtime::state::WorkspaceRecord;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use utoipa::ToSchema;

use super::guard_rails::GuardRails;
use crate::error::OpError;

/// Longest workspace name accepted.
pub const MAX_NAME: usize = 128;

/// Body of `POST /v1/workspaces` (may be empty: all defaults).
///
/// `egress`, `policy`, `time_limits`, `record` and `limits` are the
/// workspace's guard rails. An agent gets the server's defaults (or those of
/// the `template` it names) and may ask only for narrower ones: an egress
/// each of whose rules a default rule covers, less memory, a shorter TTL,
/// the default policy, recording on. Anything wider is a 403 naming the
/// field; operators and admins may choose them.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateWorkspace {
    /// 1..=128 bytes without control characters; the id by default.
    #[schema(min_length = 1, max_length = 128)]
    pub name: Option<String>,
    /// Screen size; 1280x800 by default. Read as a [`GeometryBody`] by
    /// hand so that an error names `geometry.width` or `geometry.height`.
    #[schema(inline, value_type = Option<GeometryBody>)]
    pub geometry: Option<Value>,
    /// A template the server's admin configured (`cubicle serve --template
    /// NAME=FILE`): its guard rails instead of the server's defaults.
    #[schema(min_length = 1, max_length = 64)]
    pub template: Option<String>,
    /// What it may use; each missing field takes the server's default (or
    /// the template's). Agents: no more than that.
    #[schema(inline)]
    pub limits: Option<LimitsBody>,
    /// What it may reach through the egress proxy; the server's
    /// `--egress-default` (deny) or the template's when left out. Agents:
    /// every rule must be covered by one of those.
    pub egress: Option<super::egress::EgressBody>,
    /// The policy it runs under (a name the server loaded, such as
    /// `default`, `strict`, `open`); the server's default (or the
    /// template's) when left out. Agents: only that one.
    #[schema(min_length = 1, max_length = 64)]
    pub policy: Option<String>,
    /// When it ends by itself: a TTL and an idle timeout, and whether
    /// expiry stops or deletes it; the server's defaults (none) or the
    /// template's when left out. Agents: no longer than those.
    pub time_limits: Option<super::time_limits::TimeLimitsBody>,
    /// Whether its screen is recorded: true by default (unless the server
    /// runs with `--no-record`). With `false` no video is kept; its events
    /// are sealed in its audit chain all the same. Agents may not turn it
    /// off.
    pub record: Option<bool>,
    /// A browser profile of the caller's to run Chromium on (made empty
    /// the first time this name is used): its cookies, local storage and
    /// IndexedDB are loaded as the workspace starts and saved when it
    /// stops. One running workspace at a time (409 `profile_in_use`).
    /// 1..=64 of `A-Z a-z 0-9 . _ -`.
    #[schema(min_length = 1, max_length = 64)]
    pub profile: Option<String>,
    /// A snapshot of the caller's to start from (`POST
    /// /v1/workspaces/{id}/snapshot` takes one): its files in `/home/user`
    /// and `/tmp` and its browser profile are in place before the
    /// workspace is handed out. Not with `profile`.
    pub from_snapshot: Option<String>,
    /// With `from_snapshot`: start this many workspaces from it at once
    /// (1..=10); the reply is then `{"workspaces": [...], "failed":
    /// [...]}`.
    #[schema(minimum = 1, maximum = 10)]
    pub count: Option<u32>,
}

/// A template file (`cubicle serve --template NAME=FILE`): the guard rails
/// of the create body, as JSON; what it leaves out is the server's default.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TemplateBody {
    pub limits: Option<LimitsBody>,
    pub egress: Option<super::egress::EgressBody>,
    pub policy: Option<String>,
    pub time_limits: Option<super::time_limits::TimeLimitsBody>,
    pub record: Option<bool>,
}

impl TemplateBody {
    /// Parses a template file; errors name the field.
    pub fn parse(text: &[u8]) -> Result<GuardRails, OpError> {
        let body: Self = super::parse(text)?;
        guard_rails(
            body.egress,
            body.policy,
            body.time_limits,
            body.record,
            body.limits,
        )
    }
}

/// Checks the guard-rail fields of a create body or template.
fn guard_rails(
    egress: Option<super::egress::EgressBody>,
    policy: Option<String>,
    time_limits: Option<super::time_limits::TimeLimitsBody>,
    record: Option<bool>,
    limits: Option<LimitsBody>,
) -> Result<GuardRails, OpError> {
    if let Some(name) = &policy
        && (name.is_empty() || name.len() > 64)
    {
        return Err(OpError::bad_request(
            "policy: must be the name of a policy the server loaded (1..=64 bytes)",
        ));
    }
    Ok(GuardRails {
        egress: egress.map(|e| e.validated()).transpose()?,
        policy,
        time_limits: time_limits.map(|t| t.setting()).transpose()?,
        record,
        limits: limits.map(LimitsRequest::from),
    })
}

/// A workspace's limits on the wire (create and view).
#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LimitsBody {
    /// Memory in MiB (default 2048), up to the server's maximum.
    pub memory_mb: Option<u64>,
    /// CPU quota in CPUs (default 2.0).
    pub cpus: Option<f64>,
    /// CPU weight against other workspaces (default 100).
    pub cpu_weight: Option<u32>,
    /// Processes and threads (default 4096).
    pub pids: Option<u32>,
    /// Disk for home and /tmp in MiB (default 4096).
    pub disk_mb: Option<u64>,
}

impl From<LimitsBody> for LimitsRequest {
    fn from(body: LimitsBody) -> Self {
        Self {
            memory_mb: body.memory_mb,
            cpus: body.cpus,
            cpu_weight: body.cpu_weight,
            pids: body.pids,
            disk_mb: body.disk_mb,
        }
    }
}

impl From<&Limits> for LimitsBody {
    fn from(limits: &Limits) -> Self {
        Self {
            memory_mb: Some(limits.memory_bytes() >> 20),
            cpus: Some(limits.cpus()),
            cpu_weight: Some(limits.cpu_weight()),
            pids: Some(limits.pids()),
            disk_mb: Some(limits.disk_bytes() >> 20),
        }
    }
}

/// `{"width", "height"}` in pixels, or the string `"WIDTHxHEIGHT"`;
/// 320x240 ..= 7680x4320.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[serde(untagged)]
pub enum GeometryBody {
    Size { width: u64, height: u64 },
    Text(String),
}

impl GeometryBody {
    /// Reads and checks a `geometry` value; errors name the side.
    fn validated(value: &Value) -> Result<Geometry, OpError> {
        let geometry = match value {
            Value::String(text) => Geometry::parse(text),
            Value::Object(fields) => {
                if let Some(other) = fields.keys().find(|k| *k != "width" && *k != "height") {
                    return Err(OpError::bad_request(format!(
                        "geometry.{other}: unknown field, expected width and height"
                    )));
                }
                let side = |name: &str| {
                    fields.get(name).and_then(Value::as_u64).ok_or_else(|| {
                        OpError::bad_request(format!(
                            "geometry.{name}: must be a positive integer number of pixels"
                        ))
                    })
                };
                Geometry::validated(side("width")?, side("height")?)
            }
            _ => {
                return Err(OpError::bad_request(
                    "geometry: must be {\"width\": W, \"height\": H} or \"WxH\"",
                ));
            }
        };
        geometry.map_err(|e| OpError::bad_request(e.to_string()))
    }
}

impl CreateWorkspace {
    /// Parses a create body (empty means all defaults) and checks its
    /// values; who may have its guard rails is the operations core's call.
    pub fn parse(body: &[u8]) -> Result<CreateAsk, OpError> {
        if body.iter().all(u8::is_ascii_whitespace) {
            return Ok(CreateAsk::default());
        }
        super::parse::<Self>(body)?.into_ask()
    }

    pub fn into_ask(self) -> Result<CreateAsk, OpError> {
        let mut request = CreateRequest::default();
        if let Some(name) = self.name {
            if name.is_empty() || name.len() > MAX_NAME || name.chars().any(char::is_control) {
                return Err(OpError::bad_request(format!(
                    "name: must be 1..={MAX_NAME} bytes without control characters"
                )));
            }
            request.name = Some(name);
        }
        if let Some(geometry) = &self.geometry {
            request.geometry = GeometryBody::validated(geometry)?;
        }
        if let Some(template) = &self.template
            && (template.is_empty() || template.len() > 64)
        {
            return Err(OpError::bad_request(
                "template: must be the name of a template the server was started with (1..=64 bytes)",
            ));
        }
        if let Some(profile) = &self.profile {
            let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
            if profile.is_empty() || profile.len() > 64 || !profile.chars().all(plain) {
                return Err(OpError::bad_request(
                    "profile: must be 1..=64 of A-Z a-z 0-9 . _ - (a name of your choosing; GET /v1/profiles lists yours)",
                ));
            }
        }
        if let Some(snapshot) = &self.from_snapshot {
            super::snapshot::checked_id("from_snapshot", snapshot)?;
            if self.profile.is_some() {
                return Err(OpError::bad_request(
                    "from_snapshot: not with profile (a snapshot carries its own browser profile); leave one out",
                ));
            }
        }
        let max = crate::ops::snapshots::MAX_FORKS;
        match self.count {
            Some(_) if self.from_snapshot.is_none() => {
                return Err(OpError::bad_request(
                    "count: only with from_snapshot (several workspaces start from one snapshot)",
                ));
            }
            Some(count) if !(1..=max).contains(&count) => {
                return Err(OpError::bad_request(format!("count: must be 1..={max}")));
            }
            _ => {}
        }
        let rails = guard_rails(
            self.egress,
            self.policy,
            self.time_limits,
            self.record,
            self.limits,
        )?;
        Ok(CreateAsk {
            request,
            rails,
            template: self.template,
            profile: self.profile,
            snapshot: self.from_snapshot,
            count: self.count,
        })
    }
}

/// A create body, parsed and checked.
#[derive(Debug, Default, Clone)]
pub struct CreateAsk {
    /// Its name and geometry.
    pub request: CreateRequest,
    /// The guard rails it asks for (each `None`: not asked).
    pub rails: GuardRails,
    /// The template it names.
    pub template: Option<String>,
    /// The caller's browser profile it names.
    pub profile: Option<String>,
    /// The snapshot it starts from.
    pub snapshot: Option<String>,
    /// How many to start from the snapshot (`None`: one, shown alone).
    pub count: Option<u32>,
}

/// What `POST /v1/workspaces` answers: the workspace made, or with
/// `count` the workspaces made and why the others were not (described for
/// the OpenAPI document; the handler writes the same shapes).
#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
pub enum Created {
    One(Box<WorkspaceView>),
    Many(CreatedMany),
}

/// The answer to a create with `count`.
#[derive(Debug, Serialize, ToSchema)]
pub struct CreatedMany {
    /// The workspaces made, running.
    pub workspaces: Vec<WorkspaceView>,
    /// One entry per workspace not made, with the refusal's code and message.
    pub failed: Vec<CreateFailure>,
}

/// Why one of a create's `count` workspaces was not made.
#[derive(Debug, Serialize, ToSchema)]
pub struct CreateFailure {
    pub code: String,
    pub message: String,
}

/// A workspace as the API shows it.
#[derive(Debug, Serialize, ToSchema)]
pub struct WorkspaceView {
    pub id: String,
    pub name: String,
    /// `jail` or `microvm`.
    pub backend: String,
    /// `creating`, `starting`, `running`, `paused`, `stopping`, `stopped`,
    /// `failed`.
    pub state: String,
    #[schema(inline)]
    pub geometry: GeometryBody,
    /// The unprivileged host uid its processes run as.
    pub host_uid: u32,
    /// Why it failed or stopped unexpectedly.
    pub error: Option<String>,
    /// The token that created it (agents see only their own by default).
    pub owner_token: Option<String>,
    #[schema(inline)]
    pub limits: LimitsBody,
    /// Current use next to the limits (`GET /v1/workspaces/{id}` only):
    /// memory_bytes, memory_limit_bytes, cpu_usage_usec, cpus, pids,
    /// pids_limit, disk_used_bytes, disk_limit_bytes, oom_kills; null where
    /// not measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub usage: Option<Value>,
    /// The agent's call for a person (`reason`, `by`, `since_ms`), until
    /// an operator takes over (`POST .../handoff`; lists and reads).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub call: Option<Value>,
    /// The policy it runs under (`GET /v1/workspaces/{id}` and create).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
    /// What it may reach (`GET /v1/workspaces/{id}` only; also
    /// `GET /v1/workspaces/{id}/egress`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub egress: Option<super::egress::EgressBody>,
    /// The time limits it runs under (`GET /v1/workspaces/{id}` and create).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_limits: Option<super::time_limits::TimeLimitsView>,
    /// Whether its screen is recorded (create only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub record: Option<bool>,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
    /// `self`, `vnc`.
    #[schema(value_type = Object)]
    pub links: Value,
}

impl From<&WorkspaceRecord> for WorkspaceView {
    fn from(record: &WorkspaceRecord) -> Self {
        Self {
            id: record.id.clone(),
            name: record.name.clone(),
            backend: record.backend.clone(),
            state: record.state.as_str().to_owned(),
            geometry: GeometryBody::Size {
                width: u64::from(record.geometry.width),
                height: u64::from(record.geometry.height),
            },
            host_uid: record.host_uid,
            error: record.error.clone(),
            owner_token: record.owner_token.clone(),
            limits: LimitsBody::from(&record.limits),
            usage: None,
            call: None,
            policy: None,
            egress: None,
            time_limits: None,
            record: None,
            created_at_ms: record.created_at,
            updated_at_ms: record.updated_at,
            links: json!({
                "self": format!("/v1/workspaces/{}", record.id),
                "vnc": format!("/v1/workspaces/{}/vnc", record.id),
            }),
        }
    }
}

/// `{"workspaces": [...]}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct WorkspaceList {
    pub workspaces: Vec<WorkspaceView>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(body: &str) -> String {
        CreateWorkspace::parse(body.as_bytes()).unwrap_err().message
    }

    #[test]
    fn bad_input_names_the_field() {
        assert!(message(r#"{"geometry":{"width":0,"height":0}}"#).contains("geometry.width"));
        assert!(
            message(r#"{"geometry":{"width":1280,"height":100000}}"#).contains("geometry.height")
        );
        assert!(
            message(r#"{"geometry":{"width":"wide","height":800}}"#).contains("geometry.width")
        );
        assert!(message(r#"{"geometry":{"width":800}}"#).contains("geometry.height"));
        assert!(message(r#"{"geometry":"huge"}"#).contains("geometry"));
        assert!(message(r#"{"colour":1}"#).contains("colour"));
        assert!(message(r#"{"limits":{"memory_mb":"lots"}}"#).contains("limits.memory_mb"));
        assert!(message(r#"{"limits":{"ram":1}}"#).contains("ram"));
        assert!(message(r#"{"name":""}"#).starts_with("name:"));
        assert!(message(r#"{"name":5}"#).starts_with("name:"));
        let array = message("[1]");
        assert!(array.contains("request body"), "{array}");
        assert!(message("{").contains("not valid JSON"));
    }

    #[test]
    fn empty_body_gives_defaults() {
        let ask = CreateWorkspace::parse(b"").unwrap();
        assert_eq!(ask.request.geometry, Geometry::default());
        assert!(ask.rails.is_empty());
        let ask = CreateWorkspace::parse(
            br#"{"geometry":"1024x768","name":"a","limits":{"memory_mb":512}}"#,
        )
        .unwrap();
        assert_eq!(ask.rails.limits.unwrap().memory_mb, Some(512));
        assert_eq!(ask.request.geometry.width, 1024);
        assert_eq!(ask.request.name.as_deref(), Some("a"));
        let ask = CreateWorkspace::parse(br#"{"geometry":{"width":800,"height":600}}"#).unwrap();
        assert_eq!(ask.request.geometry.height, 600);
    }

    #[test]
    fn guard_rails_are_read_once_and_checked() {
        let ask = CreateWorkspace::parse(
            br#"{"template":"t","policy":"strict","record":false,
                "egress":{"allow":["example.org"]},"time_limits":{"ttl_seconds":60}}"#,
        )
        .unwrap();
        assert_eq!(ask.template.as_deref(), Some("t"));
        assert_eq!(ask.rails.policy.as_deref(), Some("strict"));
        assert_eq!(ask.rails.record, Some(false));
        assert_eq!(ask.rails.egress.unwrap().allow.len(), 1);
        assert!(ask.rails.time_limits.unwrap().ttl.is_some());
        assert!(message(r#"{"egress":{"allow":["bad host"]}}"#).starts_with("egress.allow[0]"));
        assert!(
            message(r#"{"time_limits":{"ttl_seconds":99999999999}}"#)
                .starts_with("time_limits.ttl_seconds")
        );
        assert!(message(r#"{"policy":""}"#).starts_with("policy:"));
        assert!(message(r#"{"template":""}"#).starts_with("template:"));
        let rails =
            TemplateBody::parse(br#"{"egress":{"allow":["a.test"]},"record":false}"#).unwrap();
        assert_eq!(rails.record, Some(false));
        let err = TemplateBody::parse(br#"{"name":"x"}"#).unwrap_err();
        assert!(err.message.contains("name"), "{}", err.message);
    }
}
