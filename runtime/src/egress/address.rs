//! Address ranges a workspace never reaches unless a rule names them:
//! loopback, private (RFC 1918), link-local (the cloud metadata address
//! 169.254.169.254 among them), CGNAT, unique-local, multicast,
//! unspecified, reserved, and the IPv6 forms that embed an IPv4 address
//! (mapped, compatible, NAT64, 6to4), which would otherwise be a way round
//! the IPv4 list.

use std::net::IpAddr;

use ipnet::IpNet;

/// One named range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpecialRange {
    /// What it is, for refusals ("loopback").
    pub name: &'static str,
    pub net: &'static str,
}

impl SpecialRange {
    pub fn net(&self) -> IpNet {
        self.net
            .parse()
            .expect("every SPECIAL entry is a valid CIDR (checked by a unit test)")
    }
}

/// Most specific first: the first entry that contains an address names it.
const SPECIAL: &[SpecialRange] = &[
    SpecialRange {
        name: "link-local (cloud metadata)",
        net: "169.254.169.254/32",
    },
    SpecialRange {
        name: "unspecified / this network",
        net: "0.0.0.0/8",
    },
    SpecialRange {
        name: "private (RFC 1918)",
        net: "10.0.0.0/8",
    },
    SpecialRange {
        name: "shared address space (CGNAT)",
        net: "100.64.0.0/10",
    },
    SpecialRange {
        name: "loopback",
        net: "127.0.0.0/8",
    },
    SpecialRange {
        name: "link-local",
        net: "169.254.0.0/16",
    },
    SpecialRange {
        name: "private (RFC 1918)",
        net: "172.16.0.0/12",
    },
    SpecialRange {
        name: "IETF protocol assignments",
        net: "192.0.0.0/24",
    },
    SpecialRange {
        name: "private (RFC 1918)",
        net: "192.168.0.0/16",
    },
    SpecialRange {
        name: "benchmarking",
        net: "198.18.0.0/15",
    },
    SpecialRange {
        name: "multicast",
        net: "224.0.0.0/4",
    },
    SpecialRange {
        name: "reserved / broadcast",
        net: "240.0.0.0/4",
    },
    SpecialRange {
        name: "unspecified",
        net: "::/128",
    },
    SpecialRange {
        name: "loopback",
        net: "::1/128",
    },
    SpecialRange {
        name: "IPv4-mapped",
        net: "::ffff:0:0/96",
    },
    SpecialRange {
        name: "IPv4-compatible",
        net: "::/96",
    },
    SpecialRange {
        name: "NAT64",
        net: "64:ff9b::/96",
    },
    SpecialRange {
        name: "6to4",
        net: "2002::/16",
    },
    SpecialRange {
        name: "unique local (ULA)",
        net: "fc00::/7",
    },
    SpecialRange {
        name: "link-local",
        net: "fe80::/10",
    },
    SpecialRange {
        name: "multicast",
        net: "ff00::/8",
    },
];

/// The special range `ip` is in, if any.
pub fn special(ip: IpAddr) -> Option<SpecialRange> {
    SPECIAL
        .iter()
        .copied()
        .find(|range| range.net().contains(&ip))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(ip: &str) -> Option<&'static str> {
        special(ip.parse().unwrap()).map(|r| r.name)
    }

    #[test]
    fn every_entry_parses() {
        for range in SPECIAL {
            range.net();
        }
    }

    #[test]
    fn the_ranges_the_issue_names_are_special() {
        assert_eq!(name("127.0.0.1"), Some("loopback"));
        assert_eq!(name("127.255.0.9"), Some("loopback"));
        assert_eq!(name("10.1.2.3"), Some("private (RFC 1918)"));
        assert_eq!(name("172.31.0.1"), Some("private (RFC 1918)"));
        assert_eq!(name("192.168.1.1"), Some("private (RFC 1918)"));
        assert_eq!(name("169.254.169.254"), Some("link-local (cloud metadata)"));
        assert_eq!(name("169.254.1.1"), Some("link-local"));
        assert_eq!(name("100.64.0.1"), Some("shared address space (CGNAT)"));
        assert_eq!(name("0.0.0.0"), Some("unspecified / this network"));
        assert_eq!(name("224.0.0.251"), Some("multicast"));
        assert_eq!(name("255.255.255.255"), Some("reserved / broadcast"));
        assert_eq!(name("::1"), Some("loopback"));
        assert_eq!(name("::"), Some("unspecified"));
        assert_eq!(name("::ffff:127.0.0.1"), Some("IPv4-mapped"));
        assert_eq!(name("::ffff:8.8.8.8"), Some("IPv4-mapped"));
        assert_eq!(name("fd12::1"), Some("unique local (ULA)"));
        assert_eq!(name("fe80::1"), Some("link-local"));
        assert_eq!(name("ff02::1"), Some("multicast"));
        assert_eq!(name("64:ff9b::7f00:1"), Some("NAT64"));
    }

    #[test]
    fn public_addresses_are_not() {
        for ip in ["8.8.8.8", "93.184.215.14", "172.32.0.1", "2606:4700::1111"] {
            assert_eq!(name(ip), None, "{ip}");
        }
    }
}
