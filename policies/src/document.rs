//! A policy document as written in TOML, and its checks: every error names
//! the file, the line and the field, and says what would be accepted.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use crate::glob::Glob;
use crate::rule::{Matchers, Rule};
use crate::subject::{Focus, Kind, normalize_keys};
use crate::{Decision, Policy, PolicyError};

/// How long a confirm waits for an operator unless the policy says otherwise.
pub const DEFAULT_CONFIRM_TIMEOUT: Duration = Duration::from_secs(300);
/// The longest a policy may hold an action.
pub const MAX_CONFIRM_TIMEOUT: Duration = Duration::from_secs(24 * 3600);

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Document {
    name: Option<String>,
    description: Option<String>,
    /// What happens when no rule matches.
    default: Decision,
    default_reason: Option<String>,
    confirm_timeout_secs: Option<u64>,
    #[serde(default)]
    rule: Vec<Spanned<RuleDoc>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleDoc {
    id: Option<String>,
    subject: Kind,
    decision: Decision,
    reason: Option<String>,
    timeout_secs: Option<u64>,
    action: Option<Vec<String>>,
    keys: Option<Vec<String>>,
    region: Option<[i64; 4]>,
    text: Option<Vec<String>>,
    focus: Option<Vec<Focus>>,
    url: Option<Vec<String>>,
    origin: Option<Vec<String>>,
    host: Option<Vec<String>>,
    command: Option<Vec<String>>,
    path: Option<Vec<String>>,
    method: Option<Vec<String>>,
    params: Option<BTreeMap<String, String>>,
    port: Option<Vec<u16>>,
    name: Option<Vec<String>>,
    media_type: Option<Vec<String>>,
}

/// The matchers each subject kind understands.
fn fields_of(kind: Kind) -> &'static [&'static str] {
    match kind {
        Kind::Action => &[
            "action", "keys", "region", "text", "focus", "url", "origin", "host",
        ],
        Kind::Exec => &["command"],
        Kind::FileWrite | Kind::FileDelete | Kind::Upload => &["path"],
        Kind::Cdp => &["method", "params"],
        Kind::Navigate => &["url", "origin", "host"],
        Kind::Clipboard => &["text"],
        Kind::DownloadRelease => &["name", "media_type"],
        Kind::Egress => &["host", "port"],
        Kind::SecretFill => &["name", "url", "origin", "host"],
    }
}

/// The 1-based line and column of byte `offset` of `source`.
fn position(source: &str, offset: usize) -> (usize, usize) {
    let before = &source[..offset.min(source.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
    (line, column)
}

/// The line of `field = ...` in the table that starts at `span` (up to
/// the next table header), or the table's own line.
fn field_line(source: &str, span: &std::ops::Range<usize>, field: &str) -> usize {
    let start = span.start.min(source.len());
    let mut offset = start;
    for (index, line) in source[start..].split_inclusive('\n').enumerate() {
        let trimmed = line.trim_start();
        if index > 0 && trimmed.starts_with('[') {
            break;
        }
        if let Some(rest) = trimmed.strip_prefix(field)
            && rest.trim_start().starts_with('=')
        {
            return position(source, offset).0;
        }
        offset += line.len();
    }
    position(source, start).0
}

/// Parses and checks policy `name` from `file` (a name for messages).
pub fn parse(file: &str, name: &str, source: &str) -> Result<Policy, PolicyError> {
    let doc: Document = toml::from_str(source).map_err(|err| {
        let (line, column) = err
            .span()
            .map_or((1, 1), |span| position(source, span.start));
        let message = err.message().trim();
        // Name the field the error is on, when it is on a `key = value` line.
        let key = source
            .lines()
            .nth(line - 1)
            .and_then(|text| text.split_once('='))
            .map(|(key, _)| key.trim())
            .filter(|key| !key.is_empty() && !key.starts_with('['));
        PolicyError::Syntax {
            file: file.to_owned(),
            line,
            column,
            message: match key {
                Some(key) => format!("{key}: {message}"),
                None => message.to_owned(),
            },
        }
    })?;
    let invalid = |line: usize, field: &str, message: String| PolicyError::Invalid {
        file: file.to_owned(),
        line,
        field: field.to_owned(),
        message,
    };
    if let Some(declared) = &doc.name
        && declared != name
    {
        let line = field_line(source, &(0..source.len()), "name");
        return Err(invalid(
            line,
            "name",
            format!(
                "is {declared:?} but the file is {name}.toml: make them the same (or leave name out)"
            ),
        ));
    }
    let confirm_timeout = timeout(doc.confirm_timeout_secs)
        .map_err(|m| {
            invalid(
                field_line(source, &(0..source.len()), "confirm_timeout_secs"),
                "confirm_timeout_secs",
                m,
            )
        })?
        .unwrap_or(DEFAULT_CONFIRM_TIMEOUT);
    let mut rules = Vec::with_capacity(doc.rule.len());
    for (index, spanned) in doc.rule.iter().enumerate() {
        let span = spanned.span();
        let rule = spanned.get_ref();
        let at = |field: &str| field_line(source, &span, field);
        let label = format!("rule[{index}]");
        let err =
            |field: &str, message: String| invalid(at(field), &format!("{label}.{field}"), message);
        for (field, given) in rule.given() {
            if given && !fields_of(rule.subject).contains(&field) {
                return Err(err(
                    field,
                    format!(
                        "does not apply to subject {:?}; it takes {:?}",
                        rule.subject.as_str(),
                        fields_of(rule.subject)
                    ),
                ));
            }
        }
        for (field, list) in rule.lists() {
            if list.is_some_and(|l| l.is_empty()) {
                return Err(err(
                    field,
                    "is an empty list: leave it out to match anything".into(),
                ));
            }
        }
        if let Some([x0, y0, x1, y1]) = rule.region
            && (x0 > x1 || y0 > y1)
        {
            return Err(err(
                "region",
                format!(
                    "[{x0}, {y0}, {x1}, {y1}] is not [left, top, right, bottom] with left <= right and top <= bottom"
                ),
            ));
        }
        if let Some(params) = &rule.params
            && let Some(bad) = params.keys().find(|k| !k.starts_with('/'))
        {
            return Err(err(
                "params",
                format!("key {bad:?} is not a JSON pointer: write \"/url\" for params.url"),
            ));
        }
        let rule_timeout = timeout(rule.timeout_secs).map_err(|m| err("timeout_secs", m))?;
        if rule_timeout.is_some() && rule.decision != Decision::Confirm {
            return Err(err(
                "timeout_secs",
                "only a confirm rule waits: remove it or make the decision confirm".into(),
            ));
        }
        let id = rule
            .id
            .clone()
            .unwrap_or_else(|| format!("rule {}", index + 1));
        rules.push(Rule {
            id,
            kind: rule.subject,
            decision: rule.decision,
            reason: rule.reason.clone().unwrap_or_else(|| {
                format!(
                    "policy {name}: {} rule {}",
                    rule.subject.as_str(),
                    index + 1
                )
            }),
            timeout: rule_timeout.unwrap_or(confirm_timeout),
            matchers: rule.matchers(),
        });
    }
    Ok(Policy {
        name: name.to_owned(),
        description: doc.description.unwrap_or_default(),
        default: doc.default,
        default_reason: doc
            .default_reason
            .unwrap_or_else(|| format!("policy {name}: no rule matched")),
        confirm_timeout,
        rules,
    })
}

fn timeout(secs: Option<u64>) -> Result<Option<Duration>, String> {
    match secs {
        None => Ok(None),
        Some(secs) if (1..=MAX_CONFIRM_TIMEOUT.as_secs()).contains(&secs) => {
            Ok(Some(Duration::from_secs(secs)))
        }
        Some(secs) => Err(format!(
            "{secs} is not in 1..={} seconds",
            MAX_CONFIRM_TIMEOUT.as_secs()
        )),
    }
}

impl RuleDoc {
    /// Each matcher field and whether it was given.
    fn given(&self) -> [(&'static str, bool); 15] {
        [
            ("action", self.action.is_some()),
            ("keys", self.keys.is_some()),
            ("region", self.region.is_some()),
            ("text", self.text.is_some()),
            ("focus", self.focus.is_some()),
            ("url", self.url.is_some()),
            ("origin", self.origin.is_some()),
            ("host", self.host.is_some()),
            ("command", self.command.is_some()),
            ("path", self.path.is_some()),
            ("method", self.method.is_some()),
            ("params", self.params.is_some()),
            ("port", self.port.is_some()),
            ("name", self.name.is_some()),
            ("media_type", self.media_type.is_some()),
        ]
    }

    fn lists(&self) -> [(&'static str, Option<&[String]>); 11] {
        [
            ("action", self.action.as_deref()),
            ("keys", self.keys.as_deref()),
            ("text", self.text.as_deref()),
            ("url", self.url.as_deref()),
            ("origin", self.origin.as_deref()),
            ("host", self.host.as_deref()),
            ("command", self.command.as_deref()),
            ("path", self.path.as_deref()),
            ("method", self.method.as_deref()),
            ("name", self.name.as_deref()),
            ("media_type", self.media_type.as_deref()),
        ]
    }

    fn matchers(&self) -> Matchers {
        let globs = |list: &Option<Vec<String>>| -> Vec<Glob> {
            list.iter().flatten().map(|s| Glob::new(s)).collect()
        };
        Matchers {
            action: self.action.clone().unwrap_or_default(),
            keys: self
                .keys
                .iter()
                .flatten()
                .map(|k| normalize_keys(k))
                .collect(),
            region: self.region,
            text: globs(&self.text),
            focus: self.focus.clone().unwrap_or_default(),
            url: globs(&self.url),
            origin: self
                .origin
                .iter()
                .flatten()
                .map(|s| Glob::folded(s))
                .collect(),
            host: self
                .host
                .iter()
                .flatten()
                .map(|s| Glob::folded(s))
                .collect(),
            command: globs(&self.command),
            path: globs(&self.path),
            method: globs(&self.method),
            params: self
                .params
                .iter()
                .flatten()
                .map(|(pointer, pattern)| (pointer.clone(), Glob::new(pattern)))
                .collect(),
            port: self.port.clone().unwrap_or_default(),
            name: globs(&self.name),
            media_type: globs(&self.media_type),
        }
    }
}
