//! Whether one egress policy is no wider than another: what an agent may
//! ask at create is the server's default (or its template's) or a subset
//! of it, never more.
//!
//! The attack this closes: an agent created its own workspace with
//! `"egress": {"allow": ["127.0.0.1/32:7878"]}` (the gateway's port) and
//! reached the gateway's API from inside; others turned interception off or
//! auto-released archives. [`within`] refuses each of those unless the
//! policy the agent is measured against already allows it.
//!
//! "Covered" is judged rule by rule, the way the proxy judges addresses
//! ([`EgressPolicy::check_address`]): every asked allow rule must be
//! covered by one rule of the base, for all of its ports:
//!
//! - a name rule (`example.org`, `*.example.org`) by a name rule whose
//!   pattern holds it, or by base network rules covering every public
//!   address (`0.0.0.0/0` and `::/0`): a name rule alone reaches only public
//!   addresses;
//! - a network rule by a base network rule that contains it; a network
//!   that lies inside a special range (loopback, private, metadata, ...)
//!   opens that range, and only the same rule in the base opens the same
//!   addresses, so there it takes an identical network;
//! - a passthrough host (no interception) by a base passthrough pattern
//!   (or a base without interception); `intercept: false` only over a base
//!   without interception; each auto-released type only if the base
//!   auto-releases it.
//!
//! One base rule must cover an asked rule whole: a rule covered only by the
//! union of several is refused (the agent can split it).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;

use super::address;
use super::policy::{AllowRule, EgressPolicy, HostPattern, Ports, Target};

/// What in an asked policy goes past the base; the message names the
/// field (`egress.allow[1]`) and what the base allows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct Wider {
    pub field: String,
    pub message: String,
}

/// `Ok` when `asked` allows nothing `base` does not.
pub fn within(asked: &EgressPolicy, base: &EgressPolicy) -> Result<(), Wider> {
    for (i, rule) in asked.allow.iter().enumerate() {
        if !base.allow.iter().any(|b| covers(b, rule)) && !all_public_covers(base, rule) {
            return Err(Wider {
                field: format!("egress.allow[{i}]"),
                message: format!("{:?} is not covered by any rule it may use", rule.text),
            });
        }
    }
    if !asked.intercept && base.intercept {
        return Err(Wider {
            field: "egress.intercept".into(),
            message: "false would stop TLS interception, which it may not turn off".into(),
        });
    }
    if base.intercept {
        for (i, host) in asked.passthrough.iter().enumerate() {
            if !base.passthrough.iter().any(|b| pattern_covers(b, host)) {
                return Err(Wider {
                    field: format!("egress.passthrough[{i}]"),
                    message: format!("{host} would pass through uninspected, which it may not ask"),
                });
            }
        }
    }
    for (i, media) in asked.auto_release.iter().enumerate() {
        if !base.auto_release.contains(media) {
            return Err(Wider {
                field: format!("egress.auto_release[{i}]"),
                message: format!(
                    "{media} would be released without an operator, which it may not ask"
                ),
            });
        }
    }
    Ok(())
}

/// Whether base rule `base` allows everything `asked` allows.
fn covers(base: &AllowRule, asked: &AllowRule) -> bool {
    if !ports_cover(&base.ports, &asked.ports) {
        return false;
    }
    match (&base.target, &asked.target) {
        (Target::Host(b), Target::Host(a)) => pattern_covers(b, a),
        (Target::Net(b), Target::Net(a)) => match opens_special(*a) {
            true => a == b,
            false => b.contains(a),
        },
        _ => false,
    }
}

/// A name rule reaches only public addresses: base network rules over all
/// of them (IPv4 and IPv6) on its ports cover it.
fn all_public_covers(base: &EgressPolicy, asked: &AllowRule) -> bool {
    if !matches!(asked.target, Target::Host(_)) {
        return false;
    }
    let everything = |net: IpNet| {
        base.allow.iter().any(|b| {
            matches!(b.target, Target::Net(n) if n == net) && ports_cover(&b.ports, &asked.ports)
        })
    };
    let v4 = IpNet::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0).expect("a /0 prefix is valid");
    let v6 = IpNet::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), 0).expect("a /0 prefix is valid");
    everything(v4) && everything(v6)
}

/// Whether host pattern `base` holds every name `asked` does.
fn pattern_covers(base: &HostPattern, asked: &HostPattern) -> bool {
    match (base, asked) {
        // `*` (any name: `--egress-default allow`) holds every name; an
        // address a name resolves to is still checked when it connects.
        (HostPattern::Any, _) => true,
        (_, HostPattern::Any) => false,
        (HostPattern::Exact(b), HostPattern::Exact(a)) => a == b,
        (HostPattern::Below(_), HostPattern::Exact(a)) => base.matches(a),
        (HostPattern::Below(b), HostPattern::Below(a)) => a == b || base.matches(a),
        (HostPattern::Exact(_), HostPattern::Below(_)) => false,
    }
}

/// Whether every port of `asked` is one of `base`'s.
fn ports_cover(base: &Ports, asked: &Ports) -> bool {
    let (base, asked) = match (base, asked) {
        (Ports::Any, _) => return true,
        (Ports::Some(_), Ports::Any) => return false,
        (Ports::Some(base), Ports::Some(asked)) => (base, asked),
    };
    let mut merged: Vec<(u32, u32)> = base
        .iter()
        .map(|r| (u32::from(*r.start()), u32::from(*r.end())))
        .collect();
    merged.sort_unstable();
    let mut joined: Vec<(u32, u32)> = Vec::new();
    for (low, high) in merged {
        match joined.last_mut() {
            Some(last) if low <= last.1 + 1 => last.1 = last.1.max(high),
            _ => joined.push((low, high)),
        }
    }
    asked.iter().all(|r| {
        let (low, high) = (u32::from(*r.start()), u32::from(*r.end()));
        joined.iter().any(|&(l, h)| l <= low && high <= h)
    })
}

/// Whether network rule `net` opens addresses of a special range: the
/// proxy opens a special address to a rule whose network lies inside the
/// address's range ([`EgressPolicy::check_address`]). Its first and last
/// addresses tell, since special ranges nest only around single
/// addresses (the metadata address, `::` and `::1`).
fn opens_special(net: IpNet) -> bool {
    [net.network(), net.broadcast()]
        .into_iter()
        .filter_map(address::special)
        .any(|range| range.net().contains(&net))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::egress::EgressPolicyDoc;

    fn policy(allow: &[&str]) -> EgressPolicy {
        EgressPolicy::from_doc(&EgressPolicyDoc {
            allow: allow.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        })
        .unwrap()
    }

    fn field(asked: &[&str], base: &[&str]) -> Option<String> {
        within(&policy(asked), &policy(base)).err().map(|w| w.field)
    }

    #[test]
    fn nothing_is_within_deny_all_but_nothing() {
        assert_eq!(field(&[], &[]), None);
        assert_eq!(
            field(&["example.org"], &[]).as_deref(),
            Some("egress.allow[0]")
        );
    }

    #[test]
    fn the_gateway_port_on_loopback_is_never_within_the_public_default() {
        let public = EgressPolicy::allow_public();
        for rule in [
            "127.0.0.1/32:7878",
            "127.0.0.0/8:*",
            "[::1]:7878",
            "169.254.169.254/32:80",
            "10.0.0.0/8:*",
            "[::ffff:0:0/96]:*",
            "169.254.169.254/31:*",
        ] {
            let asked = policy(&[rule]);
            let err = within(&asked, &public).unwrap_err();
            assert_eq!(err.field, "egress.allow[0]", "{rule}");
            assert!(err.message.contains(rule), "{rule}: {err}");
        }
        // Public networks and names under it are fine.
        for rule in [
            "93.184.0.0/16:443",
            "example.org",
            "*.example.org:8443",
            "[2606:4700::/32]:*",
        ] {
            assert_eq!(within(&policy(&[rule]), &public), Ok(()), "{rule}");
        }
    }

    #[test]
    fn a_special_range_takes_the_same_rule() {
        let base = ["127.0.0.1/32:8000-9000", "169.254.0.0/16:*"];
        assert_eq!(field(&["127.0.0.1/32:8443"], &base), None);
        assert!(
            field(&["127.0.0.1/32:7878"], &base).is_some(),
            "port outside"
        );
        assert!(
            field(&["127.0.0.0/8:8443"], &base).is_some(),
            "wider network"
        );
        // The metadata address is not opened by its link-local parent.
        assert!(field(&["169.254.169.254/32:80"], &base).is_some());
        assert_eq!(field(&["169.254.0.0/16:80"], &base), None);
    }

    #[test]
    fn names_wildcards_and_ports() {
        let base = ["*.example.org:443", "api.test:8000-8100,9000", "exact.test"];
        assert_eq!(field(&["a.example.org:443"], &base), None);
        assert_eq!(field(&["*.b.example.org:443"], &base), None);
        assert_eq!(field(&["*.example.org:443"], &base), None);
        assert!(
            field(&["example.org:443"], &base).is_some(),
            "not below itself"
        );
        assert!(field(&["a.example.org"], &base).is_some(), "port 80 too");
        assert!(field(&["a.example.org:*"], &base).is_some());
        assert_eq!(field(&["api.test:8000-8010,9000"], &base), None);
        assert!(field(&["api.test:8000-9000"], &base).is_some());
        assert_eq!(field(&["exact.test:443"], &base), None);
        assert!(field(&["*.exact.test:443"], &base).is_some());
        assert!(field(&["badexample.org:443"], &base).is_some());
        // A name rule does not cover a network, nor the reverse.
        assert!(field(&["93.184.215.14/32:443"], &base).is_some());
        assert!(
            field(&["a.example.org:443"], &["0.0.0.0/0:443"]).is_some(),
            "IPv6 too"
        );
        assert_eq!(
            field(&["a.example.org:443"], &["0.0.0.0/0:443", "[::/0]:*"]),
            None
        );
        // Ports covered by adjacent ranges of one rule.
        assert_eq!(field(&["h.test:10-30"], &["h.test:10-20,21-30"]), None);
        assert!(field(&["h.test:10-30"], &["h.test:10-20", "h.test:21-30"]).is_some());
        assert_eq!(
            field(&["a.test", "b.test:443"], &["a.test", "b.test"]),
            None
        );
        assert_eq!(
            field(&["a.test", "c.test:443"], &["a.test", "b.test"]).as_deref(),
            Some("egress.allow[1]")
        );
    }

    #[test]
    fn interception_passthrough_and_auto_release() {
        let doc = |intercept: Option<bool>, passthrough: &[&str], auto: &[&str]| {
            EgressPolicy::from_doc(&EgressPolicyDoc {
                allow: vec!["example.org".into()],
                passthrough: passthrough.iter().map(|s| s.to_string()).collect(),
                intercept,
                auto_release: auto.iter().map(|s| s.to_string()).collect(),
            })
            .unwrap()
        };
        let base = doc(None, &["*.bank.example"], &["application/pdf"]);
        let wider = |asked: EgressPolicy| within(&asked, &base).err().map(|w| w.field);
        assert_eq!(wider(doc(None, &[], &[])), None);
        assert_eq!(
            wider(doc(Some(true), &["a.bank.example"], &["application/pdf"])),
            None
        );
        assert_eq!(
            wider(doc(Some(false), &[], &[])).as_deref(),
            Some("egress.intercept")
        );
        assert_eq!(
            wider(doc(None, &["example.org"], &[])).as_deref(),
            Some("egress.passthrough[0]")
        );
        assert_eq!(
            wider(doc(None, &[], &["application/pdf", "application/zip"])).as_deref(),
            Some("egress.auto_release[1]")
        );
        let open = doc(Some(false), &[], &[]);
        assert_eq!(
            within(&doc(Some(false), &["example.org"], &[]), &open),
            Ok(())
        );
        assert_eq!(within(&doc(Some(true), &[], &[]), &open), Ok(()));
    }
}
