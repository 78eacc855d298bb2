//! One egress decision: the workspace's allowlist ([`EgressPolicy`]) and
//! the egress rules of its policy ([`Ruling`], asked through
//! [`super::gate::EgressGate`]) joined into one answer, the name resolved
//! once by the proxy itself, every address checked, and the addresses that
//! passed — the only ones the proxy will connect to. There is no second
//! lookup, so a name that answers differently the next time (DNS
//! rebinding) gets nothing.
//!
//! Precedence, first match wins:
//!
//! 1. **Walls** ([`Walls`]): the gateway's own listening ports and the
//!    host's services (its loopback, its own addresses) are refused
//!    whatever a rule says; port 0 is not a destination.
//! 2. **A policy `deny`** refuses, even what the allowlist names.
//! 3. **An allowlist entry** allows (it is an allow rule; an operator's
//!    "allow for this workspace" adds one).
//! 4. **A policy `confirm`** holds the connection for a person (before the
//!    name is even looked up); approved, it allows this connection.
//! 5. **A policy `allow`** allows.
//! 6. Nothing matched: refused. The policy's `default` does not decide
//!    egress.
//!
//! Allowed names must still resolve to public addresses, or into a network
//! rule that names their special range. A name is looked up only once one
//! of 3–5 allowed it: a name that no rule could allow is never sent to DNS
//! (network rules allow addresses, never names by themselves).

use std::net::{IpAddr, SocketAddr};

use serde::Serialize;

use super::address::Walls;
use super::gate::{Ruling, Verdict};
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
    pub verdict: Verdict,
    /// The rule that decided: `allowlist:<entry>`, a policy rule
    /// (`policy#id`), `approval:<id> (policy#id)`, a wall
    /// (`wall:host-services`, `wall:gateway-listener`), `address:<range>`
    /// for a special range no rule names, or `none`.
    pub rule: String,
    /// Why, in words (why not, when refused).
    pub reason: String,
    /// Every address the name resolved to.
    pub resolved: Vec<IpAddr>,
    /// The checked addresses, in the order they are tried.
    pub targets: Vec<SocketAddr>,
}

impl Decision {
    pub fn allowed(&self) -> bool {
        self.verdict == Verdict::Allow
    }

    fn deny(rule: impl Into<String>, reason: String, resolved: Vec<IpAddr>) -> Self {
        Self {
            verdict: Verdict::Deny,
            rule: rule.into(),
            reason,
            resolved,
            targets: Vec::new(),
        }
    }
}

/// What one decision is made of.
pub struct Inputs<'a> {
    pub allowlist: &'a EgressPolicy,
    /// The workspace policy's egress rule that matched, if any.
    pub ruling: Option<&'a Ruling>,
    /// The approval a person gave this very connection (a `confirm` then
    /// allows).
    pub approved: Option<&'a str>,
    pub walls: &'a Walls,
}

/// Decides whether the workspace may reach `dest` (see the module docs for
/// the order).
pub async fn decide(inputs: &Inputs<'_>, resolver: &dyn Resolve, dest: &Destination) -> Decision {
    let Inputs {
        allowlist,
        ruling,
        approved,
        walls,
    } = *inputs;
    let port = dest.port;
    if port == 0 {
        return Decision::deny("none", "port 0 is not a destination".into(), Vec::new());
    }
    let literal = dest.ip();
    if let Some(ip) = literal
        && let Err((wall, why)) = walls.check(ip, port)
    {
        return Decision::deny(wall, why, vec![ip]);
    }
    if let Some(ruling) = ruling.filter(|r| r.verdict == Verdict::Deny) {
        return Decision::deny(&*ruling.rule, ruling.reason.clone(), Vec::new());
    }
    // The rule that allows the name (or literal) itself, if one does.
    let by_list = match literal {
        Some(_) => None,
        None => allowlist
            .name_rule(&dest.host, port)
            .map(|r| format!("allowlist:{}", r.text)),
    };
    let named = match (by_list, ruling) {
        (Some(rule), _) => Some(rule),
        (None, Some(r)) if r.verdict == Verdict::Confirm => match approved {
            Some(id) => Some(format!("approval:{id} ({})", r.rule)),
            None => {
                // Held before any lookup; a literal is checked first, so a
                // person is never asked about what would be refused anyway.
                if let Some(ip) = literal
                    && let Err(why) = allowlist.check_address(ip, port, Some(r.rule.as_str()))
                {
                    return Decision::deny(address_rule(ip), why, vec![ip]);
                }
                return Decision {
                    verdict: Verdict::Confirm,
                    rule: r.rule.clone(),
                    reason: r.reason.clone(),
                    resolved: literal.into_iter().collect(),
                    targets: Vec::new(),
                };
            }
        },
        (None, Some(r)) if r.verdict == Verdict::Allow => Some(r.rule.clone()),
        _ => None,
    };
    let resolved = match literal {
        Some(ip) => vec![ip],
        None if named.is_none() => {
            // Not even sent to DNS: no rule could allow this name.
            return Decision::deny(
                "none",
                format!("no rule allows {}:{port}", dest.host),
                Vec::new(),
            );
        }
        None => match resolver.lookup(&dest.host).await {
            Ok(found) if !found.is_empty() => found,
            Ok(_) => {
                return Decision::deny("none", format!("{} has no address", dest.host), Vec::new());
            }
            Err(err) => {
                return Decision::deny(
                    "none",
                    format!("cannot resolve {}: {err}", dest.host),
                    Vec::new(),
                );
            }
        },
    };
    let mut rule = None;
    let mut first_refusal = None;
    let mut targets = Vec::new();
    let mut refusals = Vec::new();
    let mut opened = Vec::new();
    for &ip in &resolved {
        let checked = walls
            .check(ip, port)
            .map_err(|(wall, why)| (wall.to_owned(), why))
            .and_then(|()| {
                allowlist
                    .check_address(ip, port, named.as_deref())
                    .map_err(|why| (address_rule(ip), why))
            });
        match checked {
            // The rule that allowed the name decides; a network rule that
            // opened a special range for it is said in the reason.
            Ok(text) => {
                let text = match (&named, named.as_deref() == Some(text.as_str())) {
                    (Some(name_rule), false) => {
                        opened.push(format!("{ip} through allowlist:{text}"));
                        name_rule.clone()
                    }
                    (Some(name_rule), true) => name_rule.clone(),
                    (None, _) => format!("allowlist:{text}"),
                };
                rule.get_or_insert(text);
                targets.push(SocketAddr::new(ip, port));
            }
            Err((wall, why)) => {
                first_refusal.get_or_insert(wall);
                refusals.push(why);
            }
        }
    }
    let Some(rule) = rule else {
        let reason = match literal {
            Some(_) => refusals.join("; "),
            None => format!("{} resolves to {}", dest.host, refusals.join("; ")),
        };
        return Decision::deny(
            first_refusal.unwrap_or_else(|| "none".into()),
            reason,
            resolved,
        );
    };
    let mut reason = "allowed".to_owned();
    if !opened.is_empty() {
        reason = format!("{reason} ({})", opened.join(", "));
    }
    if !refusals.is_empty() {
        reason = format!("{reason}; skipped {}", refusals.join("; "));
    }
    Decision {
        verdict: Verdict::Allow,
        rule,
        reason,
        resolved,
        targets,
    }
}

/// The rule text of an address refused by the special ranges.
fn address_rule(ip: IpAddr) -> String {
    match super::address::special(ip) {
        Some(range) => format!("address:{}", range.net),
        None => "none".to_owned(),
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

    fn ruling(verdict: Verdict, rule: &str) -> Ruling {
        Ruling {
            verdict,
            rule: rule.into(),
            reason: format!("{rule} says so"),
        }
    }

    /// Walls with the host's services open (the tests' origins are on
    /// loopback), the gateway listening on 7070.
    fn open_walls() -> Walls {
        let walls = Walls::new(true);
        walls.add_listener("127.0.0.1:7070".parse().unwrap());
        walls
    }

    async fn ask(
        p: &EgressPolicy,
        r: Option<&Ruling>,
        walls: &Walls,
        dns: &ScriptedResolver,
        host: &str,
        port: u16,
    ) -> Decision {
        let inputs = Inputs {
            allowlist: p,
            ruling: r,
            approved: None,
            walls,
        };
        decide(&inputs, dns, &Destination::new(host, port)).await
    }

    async fn by_list(p: &EgressPolicy, dns: &ScriptedResolver, host: &str, port: u16) -> Decision {
        ask(p, None, &open_walls(), dns, host, port).await
    }

    #[tokio::test]
    async fn default_deny_does_not_even_resolve() {
        let dns = ScriptedResolver::new();
        dns.script("example.org", vec![ips(&["93.184.215.14"])]);
        let d = by_list(&policy(&[]), &dns, "Example.org.", 443).await;
        assert!(!d.allowed());
        assert_eq!(d.reason, "no rule allows example.org:443");
        assert_eq!(d.rule, "none");
        assert_eq!(dns.lookups("example.org"), 0);
    }

    #[tokio::test]
    async fn an_allowed_name_to_a_public_address_passes() {
        let dns = ScriptedResolver::new();
        dns.script("example.org", vec![ips(&["93.184.215.14", "127.0.0.1"])]);
        let p = policy(&["example.org"]);
        let d = by_list(&p, &dns, "example.org", 443).await;
        assert!(d.allowed(), "{d:?}");
        assert_eq!(d.rule, "allowlist:example.org");
        assert_eq!(d.targets, vec!["93.184.215.14:443".parse().unwrap()]);
        assert!(d.reason.contains("loopback"), "{}", d.reason);
        let other_port = by_list(&p, &dns, "example.org", 8080).await;
        assert!(!other_port.allowed());
    }

    #[tokio::test]
    async fn an_allowed_name_that_resolves_to_loopback_is_refused() {
        let dns = ScriptedResolver::new();
        dns.script("evil.example", vec![ips(&["127.0.0.1"])]);
        dns.script("meta.example", vec![ips(&["169.254.169.254"])]);
        let p = policy(&["evil.example", "meta.example:80"]);
        let d = by_list(&p, &dns, "evil.example", 443).await;
        assert!(!d.allowed());
        assert!(d.reason.contains("127.0.0.1 is loopback"), "{}", d.reason);
        assert_eq!(d.rule, "address:127.0.0.0/8");
        assert_eq!(d.resolved, ips(&["127.0.0.1"]));
        let d = by_list(&p, &dns, "meta.example", 80).await;
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
        let d = by_list(&p, &dns, "rebind.test", 8443).await;
        assert!(d.allowed(), "{d:?}");
        assert_eq!(d.rule, "allowlist:rebind.test:8443");
        assert!(
            d.reason.contains("through allowlist:127.0.0.1/32:8443"),
            "{}",
            d.reason
        );
        assert_eq!(d.targets, vec!["127.0.0.1:8443".parse().unwrap()]);
        assert_eq!(dns.lookups("rebind.test"), 1, "one lookup per decision");
        // The other order: refused at once, whatever a second lookup says.
        let dns = ScriptedResolver::new();
        dns.script(
            "rebind.test",
            vec![ips(&["127.0.0.2"]), ips(&["127.0.0.1"])],
        );
        let d = by_list(&p, &dns, "rebind.test", 8443).await;
        assert!(!d.allowed());
        assert_eq!(dns.lookups("rebind.test"), 1);
    }

    #[tokio::test]
    async fn ip_literals_need_a_network_rule() {
        let dns = ScriptedResolver::new();
        let p = policy(&["example.org", "127.0.0.1/32:8080", "[::1]:8080"]);
        let ok = by_list(&p, &dns, "127.0.0.1", 8080).await;
        assert!(ok.allowed());
        assert!(by_list(&p, &dns, "[::1]", 8080).await.allowed());
        let wrong_port = by_list(&p, &dns, "127.0.0.1", 8081).await;
        assert!(!wrong_port.allowed());
        assert!(
            wrong_port.reason.contains("loopback"),
            "{}",
            wrong_port.reason
        );
        let mapped = by_list(&p, &dns, "::ffff:127.0.0.1", 8080).await;
        assert!(!mapped.allowed());
        assert!(mapped.reason.contains("IPv4-mapped"), "{}", mapped.reason);
        assert!(!by_list(&p, &dns, "8.8.8.8", 443).await.allowed());
        assert!(!by_list(&p, &dns, "example.org", 0).await.allowed());
    }

    /// Class 8 of issue 17: a name was looked up whenever any network rule
    /// covered its port, so `<secret>.attacker.example` carried the secret
    /// out through the host's DNS. Network rules allow addresses, never a
    /// name by themselves: the name is refused and never resolved.
    #[tokio::test]
    async fn a_name_no_rule_allows_is_never_resolved_whatever_the_network_rules() {
        let dns = ScriptedResolver::new();
        dns.script("intranet.corp", vec![ips(&["10.1.2.3"])]);
        dns.script("c2vjcmv0.attacker.example", vec![ips(&["10.1.2.3"])]);
        let nets = policy(&["10.1.0.0/16:443", "0.0.0.0/0:*", "127.0.0.1/32:443"]);
        for host in ["intranet.corp", "c2vjcmv0.attacker.example"] {
            let d = by_list(&nets, &dns, host, 443).await;
            assert!(!d.allowed(), "{d:?}");
            assert_eq!(d.reason, format!("no rule allows {host}:443"));
            assert_eq!(dns.lookups(host), 0, "{host} was sent to DNS");
        }
        // The literal is allowed by the network rule, with no lookup at all.
        assert!(by_list(&nets, &dns, "10.1.2.3", 443).await.allowed());
        // A name rule allows the name; the network rule opens its range.
        let named = policy(&["*.corp:443", "10.1.0.0/16:443"]);
        let d = by_list(&named, &dns, "intranet.corp", 443).await;
        assert!(d.allowed(), "{d:?}");
        assert_eq!(d.rule, "allowlist:*.corp:443");
        assert!(
            d.reason.contains("through allowlist:10.1.0.0/16:443"),
            "{}",
            d.reason
        );
        assert_eq!(dns.lookups("intranet.corp"), 1);
        let d = by_list(&named, &dns, "c2vjcmv0.attacker.example", 443).await;
        assert!(!d.allowed());
        assert_eq!(dns.lookups("c2vjcmv0.attacker.example"), 0);
        // `*` is the explicit "any name" (what --egress-default allow uses).
        let public = EgressPolicy::allow_public();
        dns.script("example.org", vec![ips(&["93.184.215.14"])]);
        assert!(by_list(&public, &dns, "example.org", 443).await.allowed());
        // A policy deny is not resolved either, nor a confirm before a
        // person approved it.
        let deny = ruling(Verdict::Deny, "p#no");
        let d = ask(
            &public,
            Some(&deny),
            &open_walls(),
            &dns,
            "intranet.corp",
            443,
        )
        .await;
        assert_eq!(d.verdict, Verdict::Deny);
        let confirm = ruling(Verdict::Confirm, "p#ask");
        let d = ask(
            &policy(&[]),
            Some(&confirm),
            &open_walls(),
            &dns,
            "intranet.corp",
            443,
        )
        .await;
        assert_eq!(d.verdict, Verdict::Confirm);
        assert_eq!(
            dns.lookups("intranet.corp"),
            1,
            "no lookup for a deny or a hold"
        );
    }

    #[tokio::test]
    async fn a_policy_deny_wins_over_the_allowlist_and_a_confirm_waits_for_a_person() {
        let dns = ScriptedResolver::new();
        dns.script("example.org", vec![ips(&["93.184.215.14"])]);
        dns.script("new.example", vec![ips(&["93.184.215.15"])]);
        let walls = open_walls();
        let p = policy(&["example.org"]);
        let deny = ruling(Verdict::Deny, "default#metadata");
        let d = ask(&p, Some(&deny), &walls, &dns, "example.org", 443).await;
        assert_eq!(d.verdict, Verdict::Deny);
        assert_eq!(d.rule, "default#metadata");
        assert_eq!(d.reason, "default#metadata says so");
        // The allowlist beats a confirm: what it names is not asked.
        let confirm = ruling(Verdict::Confirm, "p#ask");
        let d = ask(&p, Some(&confirm), &walls, &dns, "example.org", 443).await;
        assert_eq!(d.verdict, Verdict::Allow);
        assert_eq!(d.rule, "allowlist:example.org");
        // What it does not name is held, and allowed once approved.
        let held = ask(&p, Some(&confirm), &walls, &dns, "new.example", 443).await;
        assert_eq!(held.verdict, Verdict::Confirm);
        assert_eq!(held.rule, "p#ask");
        assert!(held.targets.is_empty());
        let approved = Inputs {
            allowlist: &p,
            ruling: Some(&confirm),
            approved: Some("apr-1"),
            walls: &walls,
        };
        let d = decide(&approved, &dns, &Destination::new("new.example", 443)).await;
        assert_eq!(d.verdict, Verdict::Allow, "{d:?}");
        assert_eq!(d.rule, "approval:apr-1 (p#ask)");
        assert_eq!(d.targets, vec!["93.184.215.15:443".parse().unwrap()]);
        // An approved name still gets public addresses only.
        dns.script("sneaky.example", vec![ips(&["10.0.0.1"])]);
        let d = decide(&approved, &dns, &Destination::new("sneaky.example", 443)).await;
        assert_eq!(d.verdict, Verdict::Deny);
        // A literal that would be refused is refused before anyone is asked.
        let d = ask(&p, Some(&confirm), &walls, &dns, "10.0.0.1", 443).await;
        assert_eq!(d.verdict, Verdict::Deny, "{d:?}");
        // A policy allow allows what the allowlist does not name.
        let allow = ruling(Verdict::Allow, "p#ok");
        let d = ask(&p, Some(&allow), &walls, &dns, "new.example", 443).await;
        assert_eq!(d.verdict, Verdict::Allow);
        assert_eq!(d.rule, "p#ok");
    }

    /// Class 1 of issue 17: a rule `127.0.0.1/32:PORT` opened the gateway's
    /// own API to the workspace. The walls stand whatever a rule says.
    #[tokio::test]
    async fn no_rule_opens_the_gateway_or_the_hosts_services() {
        let dns = ScriptedResolver::new();
        dns.script("me.test", vec![ips(&["127.0.0.1"])]);
        let p = policy(&[
            "127.0.0.1/32:*",
            "me.test:*",
            "[::1]:*",
            "0.0.0.0/8:*",
            "*:*",
        ]);
        let closed = Walls::new(false);
        closed.add_listener("127.0.0.1:7070".parse().unwrap());
        for (host, port) in [
            ("127.0.0.1", 8080),
            ("me.test", 8080),
            ("::1", 22),
            ("0.0.0.0", 80),
        ] {
            let d = ask(&p, None, &closed, &dns, host, port).await;
            assert_eq!(d.rule, "wall:host-services", "{host}: {d:?}");
        }
        let d = ask(&p, None, &closed, &dns, "127.0.0.1", 7070).await;
        assert_eq!(d.rule, "wall:gateway-listener", "{d:?}");
        // With the test flag the host's loopback opens where a rule names
        // it; the gateway's own port never does.
        let open = open_walls();
        assert!(
            ask(&p, None, &open, &dns, "127.0.0.1", 8080)
                .await
                .allowed()
        );
        for host in ["127.0.0.1", "me.test", "::ffff:127.0.0.1"] {
            let d = ask(&p, None, &open, &dns, host, 7070).await;
            assert_eq!(d.rule, "wall:gateway-listener", "{host}: {d:?}");
        }
        // Not even a policy allow or an approval opens it.
        let allow = ruling(Verdict::Allow, "open#all");
        let d = ask(&policy(&[]), Some(&allow), &open, &dns, "me.test", 7070).await;
        assert_eq!(d.rule, "wall:gateway-listener");
    }
}
