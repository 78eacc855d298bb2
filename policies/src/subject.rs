//! What a rule is asked about: the subject (one operation, as its
//! parameters) and the context it lands in (the browser's active tab and
//! focused element, for screen actions).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The kinds of subject a rule can name (`subject = "exec"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Serialize)]
pub enum Kind {
    /// A computer-use action (click, type, key, scroll, ...).
    #[serde(rename = "action")]
    Action,
    #[serde(rename = "exec")]
    Exec,
    #[serde(rename = "file.write")]
    FileWrite,
    #[serde(rename = "file.delete")]
    FileDelete,
    /// A CDP call from the agent's client.
    #[serde(rename = "cdp")]
    Cdp,
    /// A navigation (CDP `Page.navigate`, `Target.createTarget`, ...).
    #[serde(rename = "navigate")]
    Navigate,
    /// Files handed to a page (`DOM.setFileInputFiles`).
    #[serde(rename = "upload")]
    Upload,
    #[serde(rename = "clipboard")]
    Clipboard,
    /// Letting a quarantined download into the workspace.
    #[serde(rename = "download.release")]
    DownloadRelease,
    /// A new destination of the egress proxy (host and port). Joined with
    /// the workspace's allowlist: a `deny` here wins over it, a `confirm`
    /// or `allow` decides what it does not name; the policy's `default`
    /// never decides egress.
    #[serde(rename = "egress")]
    Egress,
    /// A stored secret filled into a page's field by the gateway
    /// (`fill_secret`): the secret's name and the page.
    #[serde(rename = "secret.fill")]
    SecretFill,
}

impl Kind {
    pub const ALL: [Kind; 11] = [
        Kind::Action,
        Kind::Exec,
        Kind::FileWrite,
        Kind::FileDelete,
        Kind::Cdp,
        Kind::Navigate,
        Kind::Upload,
        Kind::Clipboard,
        Kind::DownloadRelease,
        Kind::Egress,
        Kind::SecretFill,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Action => "action",
            Kind::Exec => "exec",
            Kind::FileWrite => "file.write",
            Kind::FileDelete => "file.delete",
            Kind::Cdp => "cdp",
            Kind::Navigate => "navigate",
            Kind::Upload => "upload",
            Kind::Clipboard => "clipboard",
            Kind::DownloadRelease => "download.release",
            Kind::Egress => "egress",
            Kind::SecretFill => "secret.fill",
        }
    }
}

/// One operation as the evaluator sees it.
#[derive(Debug, Clone, PartialEq)]
pub enum Subject {
    /// A computer action by its API name (`left_click`, `type`, `key`, ...),
    /// where it lands, the key combination it presses and the text it types.
    Action {
        name: String,
        point: Option<(i64, i64)>,
        keys: Option<String>,
        text: Option<String>,
    },
    /// A command: its argv, or the shell line it runs, as typed (`line`),
    /// and the simple commands it starts, as far as they can be read
    /// ([`crate::command_line`]).
    Exec {
        line: String,
        commands: Vec<crate::command_line::Command>,
    },
    FileWrite {
        path: String,
    },
    FileDelete {
        path: String,
    },
    Cdp {
        method: String,
        params: Value,
    },
    Navigate {
        url: String,
    },
    Upload {
        files: Vec<String>,
    },
    Clipboard {
        text: String,
    },
    DownloadRelease {
        name: String,
        media_type: String,
    },
    Egress {
        host: String,
        port: u16,
    },
    /// Secret `name` filled into a field of the page at `url`.
    SecretFill {
        name: String,
        url: String,
    },
}

impl Subject {
    pub fn kind(&self) -> Kind {
        match self {
            Subject::Action { .. } => Kind::Action,
            Subject::Exec { .. } => Kind::Exec,
            Subject::FileWrite { .. } => Kind::FileWrite,
            Subject::FileDelete { .. } => Kind::FileDelete,
            Subject::Cdp { .. } => Kind::Cdp,
            Subject::Navigate { .. } => Kind::Navigate,
            Subject::Upload { .. } => Kind::Upload,
            Subject::Clipboard { .. } => Kind::Clipboard,
            Subject::DownloadRelease { .. } => Kind::DownloadRelease,
            Subject::Egress { .. } => Kind::Egress,
            Subject::SecretFill { .. } => Kind::SecretFill,
        }
    }

    /// An exec subject from an argv (joined by spaces, as a person would
    /// type it) or a shell line.
    pub fn exec(argv: &[String], command: Option<&str>) -> Self {
        Self::exec_with_env(argv, command, &[])
    }

    /// Like [`Subject::exec`], with the names of the environment variables
    /// the request sets (some change what runs: `BASH_ENV`, `LD_PRELOAD`).
    pub fn exec_with_env(argv: &[String], command: Option<&str>, env: &[String]) -> Self {
        let line = match command {
            Some(line) => line.to_owned(),
            None => argv.join(" "),
        };
        let commands = crate::command_line::commands(argv, command, env);
        Subject::Exec { line, commands }
    }
}

/// What the focused element of the active tab is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Focus {
    /// Nothing focused (the page body).
    None,
    /// A text input, textarea or editable element.
    Text,
    /// `<input type=password>`.
    Password,
    /// An input whose `autocomplete` names a card field (`cc-number`, ...).
    CreditCard,
    /// `<input type=file>`.
    FileInput,
    /// An iframe: what is focused inside a cross-origin frame is not seen.
    Frame,
    /// Anything else (a button, a link, ...).
    Other,
}

/// Where a screen action lands, as the gateway's own CDP session saw it
/// just before the action.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrowserContext {
    pub url: String,
    pub origin: String,
    /// The URL's host, lower case.
    pub host: String,
    pub focus: Focus,
}

impl BrowserContext {
    /// The context for a tab at `url` with `focus`; origin and host from the URL.
    pub fn at(url: &str, focus: Focus) -> Self {
        let (origin, host) = origin_and_host(url);
        Self {
            url: url.to_owned(),
            origin,
            host,
            focus,
        }
    }
}

/// The context an evaluation runs in.
#[derive(Debug, Clone, Copy, Default)]
pub struct Context<'a> {
    /// The browser's active tab, if it could be read (see the gateway's
    /// `browser_context` for what it can and cannot see).
    pub browser: crate::BrowserState<'a>,
}

/// The URL a browser loads for `raw`, parsed as the URL standard says
/// (what Chromium does): leading and trailing C0 controls and spaces
/// stripped, tabs and newlines removed, scheme and host in lower case,
/// `\\` as `/` in special schemes, dot segments resolved. `None` when it
/// is not a URL (the browser does not load it as one). `view-source:X`
/// loads X: see [`urls_loaded`].
pub fn normalize_url(raw: &str) -> Option<String> {
    url::Url::parse(raw).ok().map(String::from)
}

/// Every URL a navigation to `raw` loads, outermost first: the URL itself
/// and, for `view-source:`, the one inside (itself parsed the same way).
/// `None` when one of them is not a URL.
pub fn urls_loaded(raw: &str) -> Option<Vec<String>> {
    let mut out = Vec::new();
    let mut current = normalize_url(raw)?;
    loop {
        let inner = current.strip_prefix("view-source:").map(str::to_owned);
        out.push(current);
        match inner {
            Some(inner) if out.len() < 4 => current = normalize_url(&inner)?,
            Some(_) => return None,
            None => return Some(out),
        }
    }
}

/// A workspace path in one spelling, lexically: `//` and `/./` folded,
/// `..` taking the previous component off (never above `/`), no trailing
/// slash. Symbolic links are the guest's to refuse (the files service
/// does not follow them on writes and deletes).
pub fn normalize_path(path: &str) -> String {
    let absolute = path.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                if parts.pop().is_none() && !absolute {
                    parts.push("..");
                }
            }
            name => parts.push(name),
        }
    }
    let joined = parts.join("/");
    if absolute {
        format!("/{joined}")
    } else {
        joined
    }
}

/// `scheme://host[:port]` and the lower-case host of an absolute URL
/// (empty strings for URLs without one, like `about:blank` or `data:`).
pub fn origin_and_host(url: &str) -> (String, String) {
    let Some((scheme, rest)) = url.split_once("://") else {
        return (String::new(), String::new());
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let authority = authority.rsplit('@').next().unwrap_or_default();
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => authority.split(':').next().unwrap_or_default(),
    };
    let origin = format!(
        "{}://{}",
        scheme.to_ascii_lowercase(),
        authority.to_ascii_lowercase()
    );
    (origin, host.to_ascii_lowercase())
}

/// A key combination in one spelling: lower case, modifiers' aliases
/// folded (`control` → `ctrl`, `cmd`/`meta`/`win` → `super`, `option` →
/// `alt`) and put in the order ctrl, alt, shift, super, then the key.
/// Combinations pressed one after another (`"ctrl+a ctrl+c"`) stay apart.
pub fn normalize_keys(combo: &str) -> String {
    combo
        .split_whitespace()
        .map(normalize_combo)
        .collect::<Vec<_>>()
        .join(" ")
}

fn normalize_combo(combo: &str) -> String {
    const ORDER: [&str; 4] = ["ctrl", "alt", "shift", "super"];
    let mut modifiers = [false; 4];
    let mut keys = Vec::new();
    for part in combo.split('+').filter(|p| !p.is_empty()) {
        let lower = part.to_ascii_lowercase();
        let name = match lower.as_str() {
            "control" | "ctrl" | "control_l" | "control_r" => "ctrl",
            "alt" | "option" | "alt_l" | "alt_r" => "alt",
            "shift" | "shift_l" | "shift_r" => "shift",
            "super" | "cmd" | "command" | "meta" | "win" | "super_l" | "super_r" => "super",
            _ => {
                keys.push(lower);
                continue;
            }
        };
        if let Some(i) = ORDER.iter().position(|m| *m == name) {
            modifiers[i] = true;
        }
    }
    let mut parts: Vec<String> = ORDER
        .iter()
        .zip(modifiers)
        .filter(|(_, on)| *on)
        .map(|(m, _)| (*m).to_owned())
        .collect();
    parts.extend(keys);
    parts.join("+")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The policy's `default` never decides egress: `rule_for` answers
    /// only when an egress rule matches, so the shipped policies leave
    /// egress to the allowlist, except the metadata names they deny.
    #[test]
    fn shipped_policies_leave_egress_to_the_allowlist_but_deny_metadata_names() {
        let set = crate::PolicySet::shipped().unwrap();
        for name in ["default", "strict", "open"] {
            let policy = set.get(name).unwrap();
            let ask = |host: &str| {
                let subject = Subject::Egress {
                    host: host.into(),
                    port: 443,
                };
                policy.rule_for(&subject, &Context::default())
            };
            assert!(ask("example.org").is_none(), "{name}");
            if name != "open" {
                let metadata = ask("metadata.google.internal").expect("a rule");
                assert_eq!(metadata.decision, crate::Decision::Deny, "{name}");
                assert_eq!(metadata.rule, format!("{name}#egress-metadata-names"));
            }
        }
    }

    #[test]
    fn keys_have_one_spelling() {
        assert_eq!(normalize_keys("ctrl+w"), "ctrl+w");
        assert_eq!(normalize_keys("Shift+Control+T"), "ctrl+shift+t");
        assert_eq!(normalize_keys("cmd+alt+Delete"), "alt+super+delete");
        assert_eq!(normalize_keys("ctrl+a  ctrl+c"), "ctrl+a ctrl+c");
        assert_eq!(normalize_keys("Return"), "return");
    }

    #[test]
    fn urls_are_judged_as_the_browser_loads_them() {
        let cases: &[(&str, Option<&[&str]>)] = &[
            ("FILE:///etc/passwd", Some(&["file:///etc/passwd"])),
            (" file:///etc/passwd", Some(&["file:///etc/passwd"])),
            (
                "\u{1}file:///etc/passwd\u{0} ",
                Some(&["file:///etc/passwd"]),
            ),
            ("fi\tle:///etc/pa\nsswd", Some(&["file:///etc/passwd"])),
            (
                "view-source:file:///etc/passwd",
                Some(&["view-source:file:///etc/passwd", "file:///etc/passwd"]),
            ),
            (
                "VIEW-SOURCE: FILE:///etc/passwd",
                Some(&["view-source: FILE:///etc/passwd", "file:///etc/passwd"]),
            ),
            (
                "HTTPS://Bank.Example/a/../b",
                Some(&["https://bank.example/b"]),
            ),
            (
                "https:\\\\bank.example\\x",
                Some(&["https://bank.example/x"]),
            ),
            ("not a url", None),
        ];
        for (raw, expected) in cases {
            let got = urls_loaded(raw);
            let expected = expected.map(|e| e.iter().map(|s| s.to_string()).collect::<Vec<_>>());
            assert_eq!(got, expected, "{raw:?}");
        }
    }

    #[test]
    fn paths_have_one_spelling() {
        for (raw, expected) in [
            ("//home/user/.bashrc", "/home/user/.bashrc"),
            ("/home/user/./.ssh/x", "/home/user/.ssh/x"),
            ("/home/user/x/../.bashrc", "/home/user/.bashrc"),
            ("/home/user/.ssh/", "/home/user/.ssh"),
            ("/../../home/user/.profile", "/home/user/.profile"),
            ("/", "/"),
        ] {
            assert_eq!(normalize_path(raw), expected, "{raw:?}");
        }
    }

    #[test]
    fn origins_and_hosts() {
        let cases = [
            (
                "https://WWW.Bank.example:8443/login?x=1",
                "https://www.bank.example:8443",
                "www.bank.example",
            ),
            ("http://user:pw@h.example/", "http://h.example", "h.example"),
            ("http://[::1]:80/", "http://[::1]:80", "::1"),
            ("about:blank", "", ""),
            ("data:text/html,hi", "", ""),
        ];
        for (url, origin, host) in cases {
            assert_eq!(
                origin_and_host(url),
                (origin.to_owned(), host.to_owned()),
                "{url}"
            );
        }
    }
}
