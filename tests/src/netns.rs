//! Hosts of their own on this machine: a network namespace with one veth
//! pair to the test's namespace, each end with an address on a /30 of its
//! own, made and removed by the test (the multi-node rig's nodes each live
//! in one, so an edge reaches each at its own address).

use std::net::Ipv4Addr;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// One namespace and its link.
pub struct Host {
    /// The namespace's name (`ip netns exec NAME`).
    pub netns: String,
    /// Its end's address, which the test's namespace reaches.
    pub address: Ipv4Addr,
    /// The test's end of the veth pair.
    outside: String,
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip {}: {e}", args.join(" ")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl Host {
    /// Makes a new host; `Err` says why it cannot here (no `ip`, no
    /// privilege to make namespaces): a skip, not a failure.
    pub fn new() -> Result<Self, String> {
        static MADE: AtomicU32 = AtomicU32::new(0);
        let n = MADE.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id() % 10_000;
        // 10.214.0.0/16 split in /30s: the pid picks 64 of them, n one.
        let slot = (pid % 256) * 64 + n % 64;
        let base = u32::from(Ipv4Addr::new(10, 214, 0, 0)) + (slot % 16_384) * 4;
        let outside_address = Ipv4Addr::from(base + 1);
        let address = Ipv4Addr::from(base + 2);
        let host = Self {
            netns: format!("cubicle-rig-{pid}-{n}"),
            address,
            outside: format!("crig{pid}x{n}"),
        };
        let inside = format!("crig{pid}y{n}");
        ip(&["netns", "add", &host.netns])?;
        ip(&[
            "link",
            "add",
            &host.outside,
            "type",
            "veth",
            "peer",
            "name",
            &inside,
            "netns",
            &host.netns,
        ])?;
        ip(&[
            "addr",
            "add",
            &format!("{outside_address}/30"),
            "dev",
            &host.outside,
        ])?;
        ip(&["link", "set", &host.outside, "up"])?;
        let inside_cmd = |args: &[&str]| {
            let mut all = vec!["-n", host.netns.as_str()];
            all.extend_from_slice(args);
            ip(&all)
        };
        inside_cmd(&["addr", "add", &format!("{address}/30"), "dev", &inside])?;
        inside_cmd(&["link", "set", &inside, "up"])?;
        inside_cmd(&["link", "set", "lo", "up"])?;
        Ok(host)
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        // Removing the namespace removes its end, and with it the pair.
        let _ = ip(&["netns", "delete", &self.netns]);
        let _ = ip(&["link", "delete", &self.outside]);
    }
}
