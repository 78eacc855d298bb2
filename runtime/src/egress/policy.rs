//! A workspace's egress allowlist: which hosts, ports and networks it may
//! reach (default: none), which hosts pass through without TLS
//! interception, and which clean download types are released on their own.
//! It is one half of the egress decision; the other is the egress rules of
//! the workspace's policy (`policies/*.toml`), joined with it in
//! [`super::decide`] (a policy `deny` wins over an allowlist entry).
//!
//! Rules are short strings, the same on the wire and in the database:
//!
//! | rule | allows |
//! | --- | --- |
//! | `example.org` | that name, ports 80 and 443 |
//! | `*.example.org:443` | names below it (not `example.org` itself), port 443 |
//! | `*:*` | any name, any port (what `--egress-default allow` uses) |
//! | `api.example.org:8000-8100,9000` | that name, those ports |
//! | `203.0.113.0/24:*` | addresses in that network, any port |
//! | `127.0.0.1/32:8443` | loopback 127.0.0.1, port 8443 (a special range named explicitly) |
//! | `[fd00::/8]:443` | IPv6 networks in brackets when a port follows |
//!
//! A name rule allows the name; every address it resolves to must still be
//! public, or be inside a network rule that names its special range (see
//! [`super::address`]). A network rule like `0.0.0.0/0` does not name
//! loopback: only a rule whose whole network lies inside a special range
//! opens (that part of) it. A network rule allows addresses — IP literals,
//! and the addresses of names a name rule allowed — but never a name on
//! its own: a name no name rule could allow is refused without being
//! looked up, so the host's resolver is not a channel out (a lookup of
//! `<secret>.attacker.example` would carry the secret to the attacker's
//! DNS server whatever the answer). Nothing here opens the gateway's own
//! ports or the host's services: see [`super::address::Walls`].

use std::net::IpAddr;
use std::ops::RangeInclusive;

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

use super::address;

/// The most rules of each list a policy may have.
pub const MAX_RULES: usize = 256;
/// Longest rule text.
const MAX_RULE_LEN: usize = 300;

/// A rule or policy field that cannot be used; the message names it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct PolicyError {
    pub field: String,
    pub message: String,
}

/// The policy as given and stored (the wire form).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EgressPolicyDoc {
    /// Allow rules (see the module docs); none means no egress at all.
    #[serde(default)]
    pub allow: Vec<String>,
    /// Hosts (`name` or `*.suffix`) whose TLS is not intercepted: only host
    /// and port are checked, URLs are not seen and downloads not captured.
    #[serde(default)]
    pub passthrough: Vec<String>,
    /// Intercept TLS (default true), so URLs and downloads are seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intercept: Option<bool>,
    /// Media types (as sniffed) released into the workspace without an
    /// operator when the scan found nothing.
    #[serde(default)]
    pub auto_release: Vec<String>,
}

/// A parsed, checked policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EgressPolicy {
    pub allow: Vec<AllowRule>,
    pub passthrough: Vec<HostPattern>,
    pub intercept: bool,
    pub auto_release: Vec<String>,
}

impl Default for EgressPolicy {
    /// Deny everything.
    fn default() -> Self {
        Self {
            allow: Vec::new(),
            passthrough: Vec::new(),
            intercept: true,
            auto_release: Vec::new(),
        }
    }
}

/// What a rule's host part is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Host(HostPattern),
    Net(IpNet),
}

/// An exact name, a `*.suffix` wildcard, or `*` (any name), lower case,
/// no final dot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostPattern {
    Exact(String),
    /// Below this suffix (`*.example.org` holds `example.org`).
    Below(String),
    /// Any name (`*`).
    Any,
}

impl HostPattern {
    pub fn parse(text: &str) -> Result<Self, String> {
        let lower = text.trim_end_matches('.').to_ascii_lowercase();
        if lower == "*" {
            return Ok(Self::Any);
        }
        if let Some(suffix) = lower.strip_prefix("*.") {
            valid_name(suffix)?;
            return Ok(Self::Below(suffix.to_owned()));
        }
        valid_name(&lower)?;
        Ok(Self::Exact(lower))
    }

    /// `name` must be normalised (lower case, no final dot).
    pub fn matches(&self, name: &str) -> bool {
        match self {
            Self::Any => true,
            Self::Exact(exact) => exact == name,
            Self::Below(suffix) => name
                .strip_suffix(suffix.as_str())
                .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
        }
    }
}

impl std::fmt::Display for HostPattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Any => f.write_str("*"),
            Self::Exact(name) => f.write_str(name),
            Self::Below(suffix) => write!(f, "*.{suffix}"),
        }
    }
}

/// Which ports a rule allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ports {
    Any,
    Some(Vec<RangeInclusive<u16>>),
}

impl Ports {
    fn web() -> Self {
        Self::Some(vec![80..=80, 443..=443])
    }

    pub fn contains(&self, port: u16) -> bool {
        match self {
            Self::Any => true,
            Self::Some(ranges) => ranges.iter().any(|range| range.contains(&port)),
        }
    }

    fn parse(text: &str) -> Result<Self, String> {
        if text == "*" {
            return Ok(Self::Any);
        }
        let port = |p: &str| -> Result<u16, String> {
            match p.parse::<u16>() {
                Ok(n) if n > 0 => Ok(n),
                _ => Err(format!("port {p:?} is not 1..=65535")),
            }
        };
        let ranges = text
            .split(',')
            .map(|item| match item.split_once('-') {
                Some((low, high)) => {
                    let (low, high) = (port(low)?, port(high)?);
                    if low > high {
                        return Err(format!("port range {item:?} runs backwards"));
                    }
                    Ok(low..=high)
                }
                None => port(item).map(|p| p..=p),
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self::Some(ranges))
    }
}

/// One allow rule, with the text it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowRule {
    pub text: String,
    pub target: Target,
    pub ports: Ports,
}

fn valid_name(name: &str) -> Result<(), String> {
    let ok_label = |label: &str| {
        !label.is_empty()
            && label.len() <= 63
            && !label.starts_with('-')
            && !label.ends_with('-')
            && label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    };
    if name.is_empty() || name.len() > 253 || !name.split('.').all(ok_label) {
        return Err(format!(
            "{name:?} is not a host name (letters, digits, '-', dots; use punycode for other scripts)"
        ));
    }
    Ok(())
}

impl AllowRule {
    pub fn parse(text: &str) -> Result<Self, String> {
        if text.is_empty() || text.len() > MAX_RULE_LEN {
            return Err(format!("must be 1..={MAX_RULE_LEN} characters"));
        }
        let (host, ports) = if let Some(rest) = text.strip_prefix('[') {
            let (inside, after) = rest.split_once(']').ok_or("an opening '[' needs its ']'")?;
            match after {
                "" => (inside, None),
                _ => (
                    inside,
                    Some(
                        after
                            .strip_prefix(':')
                            .ok_or("only ':PORTS' may follow ']'")?,
                    ),
                ),
            }
        } else if text.matches(':').count() > 1 {
            // A bare IPv6 address or network: no port part.
            (text, None)
        } else {
            match text.split_once(':') {
                Some((host, ports)) => (host, Some(ports)),
                None => (text, None),
            }
        };
        let target = if let Ok(ip) = host.parse::<IpAddr>() {
            Target::Net(IpNet::from(ip))
        } else if let Ok(net) = host.parse::<IpNet>() {
            if net.trunc() != net {
                return Err(format!(
                    "{host} has host bits set; did you mean {}?",
                    net.trunc()
                ));
            }
            Target::Net(net)
        } else {
            Target::Host(HostPattern::parse(host)?)
        };
        let ports = match ports {
            Some(ports) => Ports::parse(ports)?,
            None => Ports::web(),
        };
        Ok(Self {
            text: text.to_owned(),
            target,
            ports,
        })
    }
}

impl EgressPolicy {
    /// Checks a policy document; errors name the field (`egress.allow[2]`).
    pub fn from_doc(doc: &EgressPolicyDoc) -> Result<Self, PolicyError> {
        let too_many = |field: &str, n: usize| PolicyError {
            field: format!("egress.{field}"),
            message: format!("{n} entries, at most {MAX_RULES}"),
        };
        for (field, n) in [
            ("allow", doc.allow.len()),
            ("passthrough", doc.passthrough.len()),
            ("auto_release", doc.auto_release.len()),
        ] {
            if n > MAX_RULES {
                return Err(too_many(field, n));
            }
        }
        let allow = doc
            .allow
            .iter()
            .enumerate()
            .map(|(i, text)| {
                AllowRule::parse(text).map_err(|message| PolicyError {
                    field: format!("egress.allow[{i}]"),
                    message,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let passthrough = doc
            .passthrough
            .iter()
            .enumerate()
            .map(|(i, text)| {
                HostPattern::parse(text).map_err(|message| PolicyError {
                    field: format!("egress.passthrough[{i}]"),
                    message,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        for (i, media) in doc.auto_release.iter().enumerate() {
            let ok = media.len() <= 100
                && media.split_once('/').is_some_and(|(a, b)| {
                    !a.is_empty()
                        && !b.is_empty()
                        && media
                            .bytes()
                            .all(|c| c.is_ascii_alphanumeric() || b"/.+-_".contains(&c))
                });
            if !ok {
                return Err(PolicyError {
                    field: format!("egress.auto_release[{i}]"),
                    message: format!("{media:?} is not a media type like application/pdf"),
                });
            }
        }
        Ok(Self {
            allow,
            passthrough,
            intercept: doc.intercept.unwrap_or(true),
            auto_release: doc.auto_release.clone(),
        })
    }

    pub fn to_doc(&self) -> EgressPolicyDoc {
        EgressPolicyDoc {
            allow: self.allow.iter().map(|r| r.text.clone()).collect(),
            passthrough: self.passthrough.iter().map(|p| p.to_string()).collect(),
            intercept: Some(self.intercept),
            auto_release: self.auto_release.clone(),
        }
    }

    /// Allow everything public on any port (the server default `allow`):
    /// any name, any public address.
    pub fn allow_public() -> Self {
        let mut policy = Self::default();
        for text in ["*:*", "0.0.0.0/0:*", "[::/0]:*"] {
            policy
                .allow
                .push(AllowRule::parse(text).expect("the built-in rules parse"));
        }
        policy
    }

    /// The name rule that allows `name` on `port`.
    pub fn name_rule(&self, name: &str, port: u16) -> Option<&AllowRule> {
        self.allow.iter().find(|rule| {
            matches!(&rule.target, Target::Host(p) if p.matches(name)) && rule.ports.contains(port)
        })
    }

    /// Whether a name rule allows `name` on some port.
    pub fn names(&self, name: &str) -> bool {
        self.allow
            .iter()
            .any(|rule| matches!(&rule.target, Target::Host(p) if p.matches(name)))
    }

    /// Whether `ip:port` may be reached, given that the rule `named` (if
    /// any: an allowlist name rule, a policy rule, an approval) already
    /// allowed the name or literal it came from: `Ok(rule)` with the rule
    /// that decided, or why not.
    pub fn check_address(
        &self,
        ip: IpAddr,
        port: u16,
        named: Option<&str>,
    ) -> Result<String, String> {
        let net_rules = || {
            self.allow.iter().filter_map(move |rule| match rule.target {
                Target::Net(net) if rule.ports.contains(port) && net.contains(&ip) => {
                    Some((rule, net))
                }
                _ => None,
            })
        };
        match address::special(ip) {
            Some(range) => {
                let special = range.net();
                net_rules()
                    .find(|(_, net)| special.contains(net))
                    .map(|(rule, _)| rule.text.clone())
                    .ok_or_else(|| {
                        format!(
                            "{ip} is {} ({}); no rule names that range",
                            range.name, range.net
                        )
                    })
            }
            None => match named {
                Some(rule) => Ok(rule.to_owned()),
                None => net_rules()
                    .next()
                    .map(|(rule, _)| rule.text.clone())
                    .ok_or_else(|| format!("no rule allows {ip} on port {port}")),
            },
        }
    }

    /// Whether TLS to `name` passes through untouched.
    pub fn passes_through(&self, name: &str) -> bool {
        self.passthrough.iter().any(|p| p.matches(name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(allow: &[&str]) -> EgressPolicy {
        EgressPolicy::from_doc(&EgressPolicyDoc {
            allow: allow.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        })
        .unwrap()
    }

    fn err(allow: &str) -> String {
        EgressPolicy::from_doc(&EgressPolicyDoc {
            allow: vec!["ok.example".into(), allow.into()],
            ..Default::default()
        })
        .unwrap_err()
        .to_string()
    }

    #[test]
    fn rules_parse_and_bad_ones_name_the_field() {
        let p = policy(&[
            "Example.ORG.",
            "*.example.com:443",
            "api.test:8000-8100,9000",
            "203.0.113.0/24:*",
            "127.0.0.1/32:8443",
            "[fd00::/8]:443",
            "2001:db8::/32",
            "10.0.0.7",
        ]);
        assert_eq!(p.allow.len(), 8);
        assert!(p.intercept);
        assert!(err("exa mple.org").starts_with("egress.allow[1]: "));
        assert!(err("a.org:0").contains("port"));
        assert!(err("a.org:90-80").contains("backwards"));
        assert!(err("10.0.0.1/8").contains("10.0.0.0/8"));
        assert!(err("[::1").contains("']'"));
        assert!(err("").contains("1..="));
        assert!(err(&"a".repeat(400)).contains("1..="));
        let bad_type = EgressPolicy::from_doc(&EgressPolicyDoc {
            auto_release: vec!["pdf".into()],
            ..Default::default()
        })
        .unwrap_err();
        assert_eq!(bad_type.field, "egress.auto_release[0]");
        let doc = p.to_doc();
        assert_eq!(EgressPolicy::from_doc(&doc).unwrap(), p);
    }

    #[test]
    fn names_wildcards_and_ports() {
        let p = policy(&[
            "example.org",
            "*.example.com:443",
            "api.test:8000-8100,9000",
        ]);
        assert_eq!(p.name_rule("example.org", 443).unwrap().text, "example.org");
        assert!(p.name_rule("example.org", 80).is_some());
        assert!(p.name_rule("example.org", 8080).is_none());
        assert!(p.name_rule("www.example.org", 443).is_none());
        assert!(p.name_rule("a.example.com", 443).is_some());
        assert!(p.name_rule("a.b.example.com", 443).is_some());
        assert!(p.name_rule("example.com", 443).is_none());
        assert!(p.name_rule("badexample.com", 443).is_none());
        assert!(p.name_rule("a.example.com", 80).is_none());
        assert!(p.name_rule("api.test", 8050).is_some());
        assert!(p.name_rule("api.test", 9000).is_some());
        assert!(p.name_rule("api.test", 8101).is_none());
        let any = policy(&["*:443"]);
        assert!(any.name_rule("anything.example", 443).is_some());
        assert!(any.name_rule("anything.example", 80).is_none());
        assert_eq!(any.to_doc().allow, ["*:443"]);
    }

    #[test]
    fn special_ranges_need_a_rule_that_names_them() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let p = policy(&["example.org", "127.0.0.1/32:8443", "0.0.0.0/0:*"]);
        let by_name = p.name_rule("example.org", 443).map(|r| r.text.as_str());
        assert!(p.check_address(ip("93.184.215.14"), 443, by_name).is_ok());
        let loopback = p.check_address(ip("127.0.0.1"), 443, by_name).unwrap_err();
        assert!(loopback.contains("loopback"), "{loopback}");
        assert_eq!(
            p.check_address(ip("127.0.0.1"), 8443, None).unwrap(),
            "127.0.0.1/32:8443"
        );
        assert!(p.check_address(ip("127.0.0.2"), 8443, None).is_err());
        let metadata = p
            .check_address(ip("169.254.169.254"), 80, None)
            .unwrap_err();
        assert!(metadata.contains("metadata"), "{metadata}");
        assert!(p.check_address(ip("10.0.0.1"), 443, None).is_err());
        assert!(p.check_address(ip("::ffff:127.0.0.1"), 8443, None).is_err());
        // 0.0.0.0/0 allows any public address, by itself.
        assert_eq!(
            p.check_address(ip("8.8.8.8"), 53, None).unwrap(),
            "0.0.0.0/0:*"
        );
        let none = policy(&[]);
        assert!(none.check_address(ip("8.8.8.8"), 443, None).is_err());
        let public = EgressPolicy::allow_public();
        assert!(public.check_address(ip("1.1.1.1"), 443, None).is_ok());
        assert!(public.check_address(ip("127.0.0.1"), 443, None).is_err());
        assert!(public.check_address(ip("::1"), 443, None).is_err());
    }

    #[test]
    fn passthrough_hosts() {
        let p = EgressPolicy::from_doc(&EgressPolicyDoc {
            passthrough: vec!["bank.example".into(), "*.pinned.example".into()],
            intercept: Some(true),
            ..Default::default()
        })
        .unwrap();
        assert!(p.passes_through("bank.example"));
        assert!(p.passes_through("a.pinned.example"));
        assert!(!p.passes_through("other.example"));
    }
}
