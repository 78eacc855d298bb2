//! `cubicle-policy` owns the policy model and its evaluator: TOML documents
//! of rules that decide `allow`, `deny` or `confirm` (with a reason shown
//! to the agent and the operator) for each operation a workspace sees —
//! computer actions (by name, region, key combination, typed text, and the
//! browser tab and focused element they land in), commands, file writes and
//! deletes, CDP methods, navigation, uploads, the clipboard, download
//! release and egress. The first rule that matches decides; when none does,
//! the policy's `default` does.
//!
//! It does no I/O while evaluating and knows nothing of HTTP, workspaces
//! or who asks: the gateway builds a [`Subject`] and a [`Context`], calls
//! [`Policy::evaluate`] and acts on the [`Outcome`]. The shipped policies
//! (`default.toml`, `strict.toml`, `open.toml` beside this crate) are
//! loaded from a directory at start ([`PolicySet::load_dir`]); every error
//! names the file, the line and the field.
//!
//! Read [`Policy::evaluate`] first, then `default.toml`.

pub mod command_line;
mod document;
pub mod glob;
mod rule;
pub mod scan_rules;
mod set;
pub mod subject;

use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use document::{DEFAULT_CONFIRM_TIMEOUT, MAX_CONFIRM_TIMEOUT};
pub use rule::Rule;
pub use set::{PolicySet, SHIPPED};
pub use subject::{BrowserContext, Context, Focus, Kind, Subject};

/// What a rule decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    Allow,
    Deny,
    /// Held until an operator approves or denies it.
    Confirm,
}

impl Decision {
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Allow => "allow",
            Decision::Deny => "deny",
            Decision::Confirm => "confirm",
        }
    }

    /// How strict it is: deny > confirm > allow.
    fn rank(self) -> u8 {
        match self {
            Decision::Allow => 0,
            Decision::Confirm => 1,
            Decision::Deny => 2,
        }
    }
}

/// What the browser looked like for a screen action.
#[derive(Debug, Clone, Copy, Default)]
pub enum BrowserState<'a> {
    /// No browser page to land in (not running, no tab).
    #[default]
    Absent,
    /// It was there but could not be read in time.
    Unreadable,
    Known(&'a BrowserContext),
}

/// The decision on one subject and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Outcome {
    pub decision: Decision,
    /// Shown to the agent and the operator.
    pub reason: String,
    /// `policy#rule-id`, or `policy#default` when no rule matched.
    pub rule: String,
    /// How long a confirm waits for an operator.
    #[serde(skip)]
    pub timeout: Duration,
}

impl Outcome {
    /// The stricter of two outcomes (deny > confirm > allow; the first on a tie).
    pub fn stricter(self, other: Outcome) -> Outcome {
        if other.decision.rank() > self.decision.rank() {
            other
        } else {
            self
        }
    }
}

/// One policy: rules in order and a default.
#[derive(Debug, Clone)]
pub struct Policy {
    pub name: String,
    pub description: String,
    pub default: Decision,
    pub default_reason: String,
    pub confirm_timeout: Duration,
    pub rules: Vec<Rule>,
}

impl Policy {
    /// Parses a policy document; `file` names it in errors, `name` is the
    /// policy's name (its file stem).
    pub fn parse(file: &str, name: &str, source: &str) -> Result<Policy, PolicyError> {
        document::parse(file, name, source)
    }

    /// The first rule that matches decides; else the default. Pure: no I/O,
    /// no clock, no allocation beyond the outcome's strings.
    pub fn evaluate(&self, subject: &Subject, context: &Context<'_>) -> Outcome {
        match self.rules.iter().find(|r| r.matches(subject, context)) {
            Some(rule) => Outcome {
                decision: rule.decision,
                reason: rule.reason.clone(),
                rule: format!("{}#{}", self.name, rule.id),
                timeout: rule.timeout,
            },
            None => Outcome {
                decision: self.default,
                reason: self.default_reason.clone(),
                rule: format!("{}#default", self.name),
                timeout: self.confirm_timeout,
            },
        }
    }

    /// The first rule that matches, if one does (the default not taken):
    /// how egress asks, since a policy's `default` does not decide egress
    /// (the allowlist does; see the egress section of `default.toml`).
    pub fn rule_for(&self, subject: &Subject, context: &Context<'_>) -> Option<Outcome> {
        self.rules
            .iter()
            .find(|r| r.matches(subject, context))
            .map(|rule| Outcome {
                decision: rule.decision,
                reason: rule.reason.clone(),
                rule: format!("{}#{}", self.name, rule.id),
                timeout: rule.timeout,
            })
    }

    /// Whether any screen-action rule looks at the browser, so the gateway
    /// reads the browser's context only when a rule would use it.
    pub fn needs_browser(&self) -> bool {
        self.rules.iter().any(Rule::needs_browser)
    }

    /// Whether a rule that looks at the browser could decide `subject` (a
    /// screen action of a name some such rule lists, or any name when it
    /// lists none): the browser is read only then.
    pub fn needs_browser_for(&self, subject: &Subject) -> bool {
        let Subject::Action { name, .. } = subject else {
            return false;
        };
        self.rules.iter().any(|rule| {
            rule.needs_browser()
                && (rule.matchers.action.is_empty() || rule.matchers.action.contains(name))
        })
    }
}

/// Why a policy could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("{file}:{line}:{column}: {message}")]
    Syntax {
        file: String,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{file}:{line}: {field}: {message}")]
    Invalid {
        file: String,
        line: usize,
        field: String,
        message: String,
    },
    #[error("cannot read the policy directory or file {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "the policy directory {0} holds no *.toml policy: point --policy-dir at Cubicle's policies/ folder"
    )]
    Empty(String),
    #[error("no policy named {name:?}: the loaded ones are {known:?}")]
    Unknown { name: String, known: Vec<String> },
}

#[cfg(test)]
mod tests;
