//! One egress decision: the policy, the name resolved once by the proxy
//! itself, every address checked, and the addresses that passed — the only
//! ones the proxy will connect to. There is no second lookup, so a name
//! that answers differently the next time (DNS rebinding) gets nothing.

use std::net::{IpAddr, SocketAddr};

use serde::Serialize;

use super::policy::EgressPolicy;
use super::resolve::Resolve;

/// A destination as the client asked for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Destination {
    /// Lower case, no brackets, no final dot.
    pub host: String,
    pub port: u16,
}

impl Destination {
    /// From an authority's host and port (`[::1]`, `Example.org.`).
    pub fn new(host: &str, port: u16) -> Self {
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .trim_end_matches('.')
            .to_ascii_lowercase();
        Self { host, port }
    }

    fn ip(&self) -> Option<IpAddr> {
        self.host.parse().ok()
    }
}

/// What the proxy decided, and the facts the event carries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Decision {
    pub allowed: bool,
    /// The rule that allowed it (`None` when refused).
    pub rule: Option<String>,
    /// Why, in words (why not, when refused).
    pub reason: String,
    /// Every address the name resolved to.
    pub resolved: Vec<IpAddr>,
    /// The checked addresses, in the order they are tried.
    pub targets: Vec<SocketAddr>,
}

impl Decision {
    fn deny(reason: String, resolved: Vec<IpAddr>) -> Self {
        Self {
            allowed: false,
            rule: None,
            reason,
            resolved,
            targets: Vec::new(),
        }
    }
}

/// Decides whether the workspace may reach `dest`.
pub async fn decide(policy: &EgressPolicy, resolver: &dyn Resolve, dest: &Destination) -> Decision {
    let port = dest.port;
    if port == 0 {
        return Decision::deny("port 0 is not a destination".into(), Vec::new());
    }
    let (by_name, resolved) = match dest.ip() {
        Some(ip) => (None, vec![ip]),
        None => {
            let by_name = policy.name_rule(&dest.host, port);
            if by_name.is_none() && !policy.any_net_rule_for(port) {
                // Refused without a lookup: a denied name is not even
                // sent to DNS.
                return Decision::deny(format!("no rule allows {}:{port}", dest.host), Vec::new());
            }
            match resolver.lookup(&dest.host).await {
                Ok(found) if !found.is_empty() => (by_name, found),
                Ok(_) => {
                    return Decision::deny(format!("{} has no address", dest.host), Vec::new());
                }
                Err(err) => {
                    return Decision::deny(
                        format!("cannot resolve {}: {err}", dest.host),
                        Vec::new(),
                    );
                }
            }
        }
    };
    let mut rule = None;
    let mut targets = Vec::new();
    let mut refusals = Vec::new();
    for &ip in &resolved {
        match policy.check_address(ip, port, by_name) {
            Ok(text) => {
                rule.get_or_insert(text);
                targets.push(SocketAddr::new(ip, port));
            }
            Err(why) => refusals.push(why),
        }
    }
    if targets.is_empty() {
        let reason = match dest.ip() {
            Some(_) => refusals.join("; "),
            None => format!("{} resolves to {}", dest.host, refusals.join("; ")),
        };
        return Decision::deny(reason, resolved);
    }
    let reason = if refusals.is_empty() {
        "allowed".to_owned()
    } else {
        format!("allowed; skipped {}", refusals.join("; "))
    };
    Decision {
        allowed: true,
        rule,
        reason,
        resolved,
        targets,
    }
}

#[cfg(test)]
mod tests {
    use super::super::policy::EgressPolicyDoc;
    use super::super::resolve::ScriptedResolver;
    use super::*;

    fn policy(allow: &[&str]) -> EgressPolicy {
        EgressPolicy::from_doc(&EgressPolicyDoc {
            allow: allow.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        })
        .unwrap()
    }

    fn ips(list: &[&str]) -> Vec<IpAddr> {
        list.iter().map(|s| s.parse().unwrap()).collect()
    }

    #[tokio::test]
    async fn default_deny_does_not_even_resolve() {
        let dns = ScriptedResolver::new();
        dns.script("example.org", vec![ips(&["93.184.215.14"])]);
        let d = decide(&policy(&[]), &dns, &Destination::new("Example.org.", 443)).await;
        assert!(!d.allowed);
        assert_eq!(d.reason, "no rule allows example.org:443");
        assert_eq!(dns.lookups("example.org"), 0);
    }

    #[tokio::test]
    async fn an_allowed_name_to_a_public_address_passes() {
        let dns = ScriptedResolver::new();
        dns.script("example.org", vec![ips(&["93.184.215.14", "127.0.0.1"])]);
        let p = policy(&["example.org"]);
        let d = decide(&p, &dns, &Destination::new("example.org", 443)).await;
        assert!(d.allowed, "{d:?}");
        assert_eq!(d.rule.as_deref(), Some("example.org"));
        assert_eq!(d.targets, vec!["93.184.215.14:443".parse().unwrap()]);
        assert!(d.reason.contains("loopback"), "{}", d.reason);
        let other_port = decide(&p, &dns, &Destination::new("example.org", 8080)).await;
        assert!(!other_port.allowed);
    }

    #[tokio::test]
    async fn an_allowed_name_that_resolves_to_loopback_is_refused() {
        let dns = ScriptedResolver::new();
        dns.script("evil.example", vec![ips(&["127.0.0.1"])]);
        dns.script("meta.example", vec![ips(&["169.254.169.254"])]);
        let p = policy(&["evil.example", "meta.example:80"]);
        let d = decide(&p, &dns, &Destination::new("evil.example", 443)).await;
        assert!(!d.allowed);
        assert!(d.reason.contains("127.0.0.1 is loopback"), "{}", d.reason);
        assert_eq!(d.resolved, ips(&["127.0.0.1"]));
        let d = decide(&p, &dns, &Destination::new("meta.example", 80)).await;
        assert!(d.reason.contains("metadata"), "{}", d.reason);
    }

    #[tokio::test]
    async fn rebinding_gets_only_the_first_answer() {
        let dns = ScriptedResolver::new();
        // Allowed at first (loopback named explicitly), then somewhere else.
        dns.script(
            "rebind.test",
            vec![ips(&["127.0.0.1"]), ips(&["127.0.0.2"])],
        );
        let p = policy(&["rebind.test:8443", "127.0.0.1/32:8443"]);
        let d = decide(&p, &dns, &Destination::new("rebind.test", 8443)).await;
        assert!(d.allowed, "{d:?}");
        assert_eq!(d.targets, vec!["127.0.0.1:8443".parse().unwrap()]);
        assert_eq!(dns.lookups("rebind.test"), 1, "one lookup per decision");
        // The other order: refused at once, whatever a second lookup says.
        let dns = ScriptedResolver::new();
        dns.script(
            "rebind.test",
            vec![ips(&["127.0.0.2"]), ips(&["127.0.0.1"])],
        );
        let d = decide(&p, &dns, &Destination::new("rebind.test", 8443)).await;
        assert!(!d.allowed);
        assert_eq!(dns.lookups("rebind.test"), 1);
    }

    #[tokio::test]
    async fn ip_literals_need_a_network_rule() {
        let dns = ScriptedResolver::new();
        let p = policy(&["example.org", "127.0.0.1/32:8080", "[::1]:8080"]);
        let ok = decide(&p, &dns, &Destination::new("127.0.0.1", 8080)).await;
        assert!(ok.allowed);
        assert!(
            decide(&p, &dns, &Destination::new("[::1]", 8080))
                .await
                .allowed
        );
        let wrong_port = decide(&p, &dns, &Destination::new("127.0.0.1", 8081)).await;
        assert!(!wrong_port.allowed);
        assert!(
            wrong_port.reason.contains("loopback"),
            "{}",
            wrong_port.reason
        );
        let mapped = decide(&p, &dns, &Destination::new("::ffff:127.0.0.1", 8080)).await;
        assert!(!mapped.allowed);
        assert!(mapped.reason.contains("IPv4-mapped"), "{}", mapped.reason);
        assert!(
            !decide(&p, &dns, &Destination::new("8.8.8.8", 443))
                .await
                .allowed
        );
        assert!(
            !decide(&p, &dns, &Destination::new("example.org", 0))
                .await
                .allowed
        );
    }

    #[tokio::test]
    async fn a_network_rule_allows_names_that_resolve_into_it() {
        let dns = ScriptedResolver::new();
        dns.script("intranet.corp", vec![ips(&["10.1.2.3"])]);
        let p = policy(&["10.1.0.0/16:443"]);
        let d = decide(&p, &dns, &Destination::new("intranet.corp", 443)).await;
        assert!(d.allowed, "{d:?}");
        assert_eq!(d.rule.as_deref(), Some("10.1.0.0/16:443"));
        let unknown = decide(&p, &dns, &Destination::new("nowhere.corp", 443)).await;
        assert!(
            unknown.reason.contains("cannot resolve"),
            "{}",
            unknown.reason
        );
    }
}
