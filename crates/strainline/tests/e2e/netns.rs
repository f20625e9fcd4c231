//! "Hosts" inside this machine: network namespaces joined by a bridge on private
//! addresses (10.213.N.0/24) that exist only here. Load agents run on them, and a target
//! behind one can be given a lossy link (nftables dropping a known share of packets).

use std::process::Command;

use crate::common::*;

/// Namespaces on a bridge: `hosts[0]` for the target, the rest for agents; this
/// machine's side of the bridge is `.1`. Everything is removed when dropped.
pub struct Hosts {
    prefix: String,
    bridge: String,
    pub names: Vec<String>,
    pub net: String,
}

impl Hosts {
    pub fn new(count: usize) -> Hosts {
        // Unique per test process and call: names are at most 15 characters.
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let k = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let id = (std::process::id() % 10_000) * 10 + k % 10;
        let prefix = format!("sl{id}");
        let net = format!("10.213.{}", 1 + (id % 250));
        let h = Hosts {
            bridge: format!("{prefix}br"),
            names: (0..count).map(|i| format!("{prefix}h{i}")).collect(),
            prefix,
            net,
        };
        h.ip(&["link", "add", &h.bridge, "type", "bridge"]);
        h.ip(&["addr", "add", &format!("{}.1/24", h.net), "dev", &h.bridge]);
        h.ip(&["link", "set", &h.bridge, "up"]);
        for (i, ns) in h.names.iter().enumerate() {
            let veth = format!("{}v{i}", h.prefix);
            h.ip(&["netns", "add", ns]);
            h.ip(&[
                "link", "add", &veth, "type", "veth", "peer", "name", "eth0", "netns", ns,
            ]);
            h.ip(&["link", "set", &veth, "master", &h.bridge, "up"]);
            h.ip(&[
                "-n",
                ns,
                "addr",
                "add",
                &format!("{}/24", h.addr(i)),
                "dev",
                "eth0",
            ]);
            h.ip(&["-n", ns, "link", "set", "eth0", "up"]);
            h.ip(&["-n", ns, "link", "set", "lo", "up"]);
        }
        h
    }

    pub fn ip(&self, args: &[&str]) {
        let o = Command::new("ip")
            .args(args)
            .output()
            .expect("iproute2 (make test installs it)");
        assert!(o.status.success(), "ip {args:?}: {}", stderr(&o));
    }

    pub fn addr(&self, i: usize) -> String {
        format!("{}.{}", self.net, 10 + i)
    }

    /// `argv` run inside host `i`.
    pub fn command(&self, i: usize, argv: &[&str]) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.names[i]]).args(argv);
        c
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        for ns in &self.names {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
        let _ = Command::new("ip")
            .args(["link", "del", &self.bridge])
            .status();
    }
}
