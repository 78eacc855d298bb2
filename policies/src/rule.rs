//! One compiled rule and how it matches a subject in its context.

use std::time::Duration;

use serde_json::Value;

use crate::Decision;
use crate::command_line::{Command, Piece};
use crate::glob::{Glob, any};
use crate::subject::{
    BrowserContext, Context, Focus, Kind, Subject, normalize_keys, normalize_path, urls_loaded,
};

/// A rule ready to match: every list is "any of"; an empty list matches
/// anything; all given matchers must match.
#[derive(Debug, Clone)]
pub struct Rule {
    pub id: String,
    pub kind: Kind,
    pub decision: Decision,
    pub reason: String,
    pub timeout: Duration,
    pub matchers: Matchers,
}

#[derive(Debug, Clone, Default)]
pub struct Matchers {
    pub action: Vec<String>,
    pub keys: Vec<String>,
    pub region: Option<[i64; 4]>,
    pub text: Vec<Glob>,
    pub focus: Vec<Focus>,
    pub url: Vec<Glob>,
    pub origin: Vec<Glob>,
    pub host: Vec<Glob>,
    pub command: Vec<Glob>,
    pub path: Vec<Glob>,
    pub method: Vec<Glob>,
    pub params: Vec<(String, Glob)>,
    pub port: Vec<u16>,
    pub name: Vec<Glob>,
    pub media_type: Vec<Glob>,
}

/// A list matcher: empty matches anything.
fn list<T>(items: &[T], test: impl Fn(&T) -> bool) -> bool {
    items.is_empty() || items.iter().any(test)
}

fn globs(items: &[Glob], text: &str) -> bool {
    items.is_empty() || any(items, text)
}

impl Rule {
    /// Whether a screen-action rule looks at the browser (its tab or focus).
    pub fn needs_browser(&self) -> bool {
        self.kind == Kind::Action
            && !(self.matchers.url.is_empty()
                && self.matchers.origin.is_empty()
                && self.matchers.host.is_empty()
                && self.matchers.focus.is_empty())
    }

    /// Whether this rule decides `subject` in `context`.
    pub fn matches(&self, subject: &Subject, context: &Context<'_>) -> bool {
        if subject.kind() != self.kind {
            return false;
        }
        let m = &self.matchers;
        match subject {
            Subject::Action {
                name,
                point,
                keys,
                text,
            } => {
                let keys_match = m.keys.is_empty()
                    || keys
                        .as_deref()
                        .is_some_and(|k| m.keys.contains(&normalize_keys(k)));
                let text_match =
                    m.text.is_empty() || text.as_deref().is_some_and(|t| any(&m.text, t));
                let region_match = match (m.region, point) {
                    (None, _) => true,
                    (Some([x0, y0, x1, y1]), Some((x, y))) => {
                        (x0..=x1).contains(x) && (y0..=y1).contains(y)
                    }
                    (Some(_), None) => false,
                };
                list(&m.action, |a| a == name)
                    && keys_match
                    && text_match
                    && region_match
                    && self.browser_matches(context)
            }
            Subject::Exec { line, commands } => self.matches_command(line, commands),
            Subject::FileWrite { path } | Subject::FileDelete { path } => {
                globs(&m.path, &normalize_path(path))
            }
            Subject::Upload { files } => {
                m.path.is_empty() || files.iter().any(|f| any(&m.path, &normalize_path(f)))
            }
            Subject::Cdp { method, params } => {
                globs(&m.method, method)
                    && m.params.iter().all(|(pointer, glob)| {
                        params
                            .pointer(pointer)
                            .is_some_and(|value| glob.matches(&as_text(value)))
                    })
            }
            Subject::Navigate { url } => {
                let one = |url: &str| {
                    let (origin, host) = crate::subject::origin_and_host(url);
                    globs(&m.url, url) && globs(&m.origin, &origin) && globs(&m.host, &host)
                };
                match urls_loaded(url) {
                    // What the browser will load, inner URLs included: a
                    // rule that holds matches if it matches any of them;
                    // one that allows, only if it matches them all.
                    Some(urls) if self.decision == Decision::Allow => urls.iter().all(|u| one(u)),
                    Some(urls) => urls.iter().any(|u| one(u)),
                    // Not a URL the browser would load as one: only a rule
                    // that holds may match it (any that could, does).
                    None => self.decision != Decision::Allow,
                }
            }
            Subject::Clipboard { text } => globs(&m.text, text),
            Subject::DownloadRelease { name, media_type } => {
                globs(&m.name, name) && globs(&m.media_type, media_type)
            }
            Subject::Egress { host, port } => globs(&m.host, host) && list(&m.port, |p| p == port),
            Subject::SecretFill { name, url } => {
                let (origin, host) = crate::subject::origin_and_host(url);
                globs(&m.name, name)
                    && globs(&m.url, url)
                    && globs(&m.origin, &origin)
                    && globs(&m.host, &host)
            }
        }
    }

    /// An exec rule's `command` patterns. A rule that holds (deny,
    /// confirm) matches if a pattern matches the line as typed, or could
    /// match one of the commands it starts (its unknown parts being
    /// anything). A rule that allows matches only if every command it
    /// starts is known and certainly matched, so `ls; sudo id` is not
    /// allowed by `ls*`.
    fn matches_command(&self, line: &str, commands: &[Command]) -> bool {
        let m = &self.matchers;
        if m.command.is_empty() {
            return true;
        }
        let spellings = |command: &Command| {
            let mut all = vec![command.pieces.clone()];
            // `/usr/bin/sudo` is `sudo` too.
            if let Some(slash) = program_slash(&command.pieces) {
                all.push(command.pieces[slash + 1..].to_vec());
            }
            all
        };
        if self.decision == Decision::Allow {
            return !commands.is_empty()
                && commands.iter().all(|command| {
                    spellings(command).iter().any(|pieces| {
                        Command {
                            pieces: pieces.clone(),
                        }
                        .known()
                        .is_some_and(|text| any(&m.command, &text))
                    })
                });
        }
        any(&m.command, line)
            || commands.iter().any(|command| {
                spellings(command)
                    .iter()
                    .any(|pieces| m.command.iter().any(|g| g.could_match(pieces)))
            })
    }

    /// The browser matchers of a screen action. Without a browser (none
    /// running, no tab) they do not match; when the browser could not be
    /// read they match for deny and confirm and not for allow, so an
    /// unreadable page never loosens the policy.
    fn browser_matches(&self, context: &Context<'_>) -> bool {
        if !self.needs_browser() {
            return true;
        }
        match context.browser {
            crate::BrowserState::Absent => false,
            crate::BrowserState::Unreadable => self.decision != Decision::Allow,
            crate::BrowserState::Known(browser) => self.matches_browser(browser),
        }
    }

    fn matches_browser(&self, b: &BrowserContext) -> bool {
        let m = &self.matchers;
        globs(&m.url, &b.url)
            && globs(&m.origin, &b.origin)
            && globs(&m.host, &b.host)
            && list(&m.focus, |f| *f == b.focus)
    }
}

/// The last `/` of a command's program word, if its program is a path.
fn program_slash(pieces: &[Piece]) -> Option<usize> {
    let end = pieces
        .iter()
        .position(|p| *p == Piece::Char(' '))
        .unwrap_or(pieces.len());
    pieces[..end].iter().rposition(|p| *p == Piece::Char('/'))
}

/// A parameter as text for matching: strings as themselves, anything else
/// as its JSON.
fn as_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}
