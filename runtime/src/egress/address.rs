//! Address ranges a workspace never reaches unless a rule names them:
//! loopback, private (RFC 1918), link-local (the cloud metadata address
//! 169.254.169.254 among them), CGNAT, unique-local, multicast,
//! unspecified, reserved, and the IPv6 forms that embed an IPv4 address
//! (mapped, compatible, NAT64, 6to4), which would otherwise be a way round
//! the IPv4 list.
//!
//! And the [`Walls`] no rule opens at all: the gateway's own listeners and
//! the host's services. A rule `127.0.0.1/32:8080` names loopback, so the
//! special ranges alone would let it through to whatever the host runs on
//! that port — the gateway's own API among them (an agent opened it that
//! way and then called the API from inside its workspace). The walls are
//! checked on every address the proxy would connect to, whatever a rule
//! says: any address of this host (loopback, unspecified, every address
//! of its interfaces, and their IPv4-mapped spellings) is refused, unless
//! the daemon was started with `--egress-allow-host-services` (tests reach
//! origins on the host's loopback that way; unsafe anywhere else); the
//! daemon's own listening ports stay refused even then.

use std::net::{IpAddr, SocketAddr};
use std::sync::RwLock;

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

/// What no egress rule opens: the daemon's own listeners, and (unless the
/// daemon runs with the test flag) every service of the host.
#[derive(Debug, Default)]
pub struct Walls {
    allow_host_services: bool,
    /// The daemon's listening sockets (set once they are bound).
    listeners: RwLock<Vec<SocketAddr>>,
}

impl Walls {
    /// `allow_host_services`: `cubicle serve --egress-allow-host-services`
    /// (tests only): the host's addresses become reachable where a rule
    /// names them; the daemon's own ports never do.
    pub fn new(allow_host_services: bool) -> Self {
        Self {
            allow_host_services,
            listeners: RwLock::new(Vec::new()),
        }
    }

    pub fn allows_host_services(&self) -> bool {
        self.allow_host_services
    }

    /// Adds a socket the daemon listens on.
    pub fn add_listener(&self, addr: SocketAddr) {
        self.listeners
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(addr);
    }

    fn is_listener_port(&self, port: u16) -> bool {
        self.listeners
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .any(|l| l.port() == port)
    }

    /// Why `ip:port` is walled off (the text of the wall and the reason),
    /// or `Ok` when no wall stands there.
    pub fn check(&self, ip: IpAddr, port: u16) -> Result<(), (&'static str, String)> {
        let Some(what) = host_address(ip) else {
            return Ok(());
        };
        if self.is_listener_port(port) {
            return Err((
                "wall:gateway-listener",
                format!(
                    "{ip}:{port} is this gateway's own listening port ({ip} is {what}): never reachable from a workspace"
                ),
            ));
        }
        if !self.allow_host_services {
            return Err((
                "wall:host-services",
                format!(
                    "{ip} is {what}: the host's services are never reachable from a workspace, whatever a rule says"
                ),
            ));
        }
        Ok(())
    }
}

/// What `ip` is of this host (`"loopback"`, `"an address of this host"`),
/// if it is one. IPv4-mapped and -compatible IPv6 spellings count as the
/// IPv4 address they hold.
pub fn host_address(ip: IpAddr) -> Option<&'static str> {
    let ip = match ip {
        IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map(IpAddr::V4)
            .or_else(|| {
                // ::a.b.c.d (deprecated, still routed as IPv4 by some stacks).
                let o = v6.octets();
                (o[..12].iter().all(|b| *b == 0)
                    && v6 != std::net::Ipv6Addr::UNSPECIFIED
                    && v6 != std::net::Ipv6Addr::LOCALHOST)
                    .then(|| IpAddr::V4(std::net::Ipv4Addr::new(o[12], o[13], o[14], o[15])))
            })
            .unwrap_or(IpAddr::V6(v6)),
        v4 => v4,
    };
    if ip.is_loopback() {
        return Some("loopback (this host)");
    }
    let unspecified = match ip {
        // 0.0.0.0/8: a connect to it reaches this host on Linux.
        IpAddr::V4(v4) => v4.octets()[0] == 0,
        IpAddr::V6(v6) => v6.is_unspecified(),
    };
    if unspecified {
        return Some("unspecified (this host)");
    }
    if interface_addresses().contains(&ip) {
        return Some("an address of this host");
    }
    None
}

/// Every address of this host's interfaces, read now (they change).
pub fn interface_addresses() -> Vec<IpAddr> {
    let mut found = Vec::new();
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs writes a list it allocates into `list`, which is
    // freed below with freeifaddrs; on failure it returns -1 and we stop.
    if unsafe { libc::getifaddrs(&mut list) } != 0 {
        tracing::warn!(
            err = %std::io::Error::last_os_error(),
            "cannot list the host's addresses; only loopback is walled off"
        );
        return found;
    }
    let mut at = list;
    while !at.is_null() {
        // SAFETY: `at` is a node of the list getifaddrs made, not yet freed.
        let entry = unsafe { &*at };
        if !entry.ifa_addr.is_null() {
            // SAFETY: ifa_addr points at a sockaddr whose family says its
            // real type and size; each is read as that type only.
            let family = i32::from(unsafe { (*entry.ifa_addr).sa_family });
            if family == libc::AF_INET {
                // SAFETY: AF_INET: the sockaddr is a sockaddr_in.
                let sin = unsafe { &*(entry.ifa_addr as *const libc::sockaddr_in) };
                found.push(IpAddr::from(
                    u32::from_be(sin.sin_addr.s_addr).to_be_bytes(),
                ));
            } else if family == libc::AF_INET6 {
                // SAFETY: AF_INET6: the sockaddr is a sockaddr_in6.
                let sin6 = unsafe { &*(entry.ifa_addr as *const libc::sockaddr_in6) };
                found.push(IpAddr::from(sin6.sin6_addr.s6_addr));
            }
        }
        at = entry.ifa_next;
    }
    // SAFETY: `list` came from getifaddrs and is freed once, after its last use.
    unsafe { libc::freeifaddrs(list) };
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_is_walled_off_and_its_listener_even_with_the_flag() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let walls = Walls::new(false);
        walls.add_listener("127.0.0.1:7070".parse().unwrap());
        for host in [
            "127.0.0.1",
            "127.9.9.9",
            "::1",
            "0.0.0.0",
            "::",
            "::ffff:127.0.0.1",
            "::127.0.0.1",
        ] {
            let (wall, why) = walls.check(ip(host), 8080).unwrap_err();
            assert_eq!(wall, "wall:host-services", "{host}: {why}");
        }
        let (wall, _) = walls.check(ip("127.0.0.1"), 7070).unwrap_err();
        assert_eq!(wall, "wall:gateway-listener");
        assert!(walls.check(ip("93.184.215.14"), 443).is_ok());
        // Each of the host's own addresses, whatever the interface.
        let own = interface_addresses();
        assert!(own.iter().any(|a| a.is_loopback()), "{own:?}");
        for addr in &own {
            assert!(walls.check(*addr, 8080).is_err(), "{addr}");
        }
        let tests = Walls::new(true);
        tests.add_listener("127.0.0.1:7070".parse().unwrap());
        assert!(tests.check(ip("127.0.0.1"), 8080).is_ok());
        for addr in own
            .iter()
            .copied()
            .chain([ip("127.0.0.1"), ip("::ffff:127.0.0.1")])
        {
            let (wall, _) = tests.check(addr, 7070).unwrap_err();
            assert_eq!(wall, "wall:gateway-listener", "{addr}");
        }
    }

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
