//! A routing table for a router DuT: the lab's destination range plus generated prefixes, written
//! out as wirespeed's route file or as an `ip -batch` script, and [`LinuxRouterFib`], the Linux
//! router with such a table installed.
//!
//! The FIB-size sweep (seed 002 Figure 4) installs 1 to a million routes in a router DuT, all via
//! the tester's `t1`, so that whatever the longest match is, the frame comes back to the tester.
//! The table always holds [`LAB_DESTINATIONS`] (198.19.0.0/16, where the probe frames that
//! verify a DuT go) and leaves out every generated prefix that overlaps the lab's benchmark range
//! 198.18.0.0/15: a prefix inside the connected /24s of `d0` and `d1` would send the tester's own
//! addresses (the gateway among them) elsewhere, and one equal to a connected prefix is refused
//! by the kernel. The prefixes themselves come from the caller (the CLI draws them from the
//! testkit's BGP-like mix), so the table is a pure function of its input.
//!
//! [`LinuxRouterFib`] is [`LinuxRouter`] (which routes the lab's destinations itself) plus every
//! other route of the table in one `ip -batch` run (a million routes take seconds, not the hours
//! one `ip route add` each would), tagged with protocol [`LINUX_PROTO`] so that one
//! `ip route flush proto` takes them all out again.

use std::fmt::Write as _;
use std::net::Ipv4Addr;
use std::sync::Arc;

use super::{Dut, DutError, Host, LinuxRouter, Steps, Wiring};

/// The prefix the probe frames and one-destination templates go to: 198.19.0.0/16.
pub const LAB_DESTINATIONS: (u32, u8) = (0xc613_0000, 16);
/// The lab's benchmark range, 198.18.0.0/15 (RFC 2544's), which generated prefixes must not
/// overlap.
pub const LAB_RANGE: (u32, u8) = (0xc612_0000, 15);
/// The routing protocol number (`ip route ... proto N`) the Linux router's bulk routes carry, so
/// that one `ip route flush proto N` removes them all.
pub const LINUX_PROTO: u8 = 250;

/// Routes to install, every one via the same gateway.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RouteTable {
    /// (network address in host order, prefix length); [`LAB_DESTINATIONS`] first.
    prefixes: Vec<(u32, u8)>,
}

/// The mask of a prefix of length `len` (0..=32) in host order.
fn mask(len: u8) -> u32 {
    match len {
        0 => 0,
        l if l >= 32 => u32::MAX,
        l => u32::MAX << (32 - u32::from(l)),
    }
}

/// Whether two prefixes share any address (one contains the other).
pub fn overlaps(a: (u32, u8), b: (u32, u8)) -> bool {
    let shorter = mask(a.1.min(b.1));
    a.0 & shorter == b.0 & shorter
}

impl RouteTable {
    /// `count` routes (at least 1): [`LAB_DESTINATIONS`], then the first `count - 1` of
    /// `generated` that do not overlap [`LAB_RANGE`] (host bits cleared). Fewer when `generated`
    /// runs out; [`RouteTable::len`] says how many.
    pub fn new(generated: &[(u32, u8)], count: usize) -> RouteTable {
        let mut prefixes = Vec::with_capacity(count.max(1));
        prefixes.push(LAB_DESTINATIONS);
        prefixes.extend(
            generated
                .iter()
                .map(|&(address, len)| (address & mask(len), len.min(32)))
                .filter(|&prefix| !overlaps(prefix, LAB_RANGE))
                .take(count.saturating_sub(1)),
        );
        RouteTable { prefixes }
    }

    /// Number of routes.
    pub fn len(&self) -> usize {
        self.prefixes.len()
    }

    /// Never true: the table always routes [`LAB_DESTINATIONS`].
    pub fn is_empty(&self) -> bool {
        self.prefixes.is_empty()
    }

    /// The routes, [`LAB_DESTINATIONS`] first.
    pub fn prefixes(&self) -> &[(u32, u8)] {
        &self.prefixes
    }

    /// wirespeed's route file (`PREFIX via GATEWAY` per line), for `route load`.
    pub fn route_file(&self, gateway: Ipv4Addr) -> String {
        let mut out = String::with_capacity(self.prefixes.len() * 32);
        for &(address, len) in &self.prefixes {
            let _ = writeln!(out, "{}/{len} via {gateway}", Ipv4Addr::from(address));
        }
        out
    }

    /// An `ip -batch` script adding every route but [`LAB_DESTINATIONS`] (which
    /// [`LinuxRouter`] routes itself) via `gateway` on `device` with protocol [`LINUX_PROTO`].
    pub fn ip_batch(&self, gateway: Ipv4Addr, device: &str) -> String {
        let mut out = String::with_capacity(self.prefixes.len() * 56);
        for &(address, len) in self.prefixes.iter().filter(|&&p| p != LAB_DESTINATIONS) {
            let _ = writeln!(
                out,
                "route add {}/{len} via {gateway} dev {device} proto {LINUX_PROTO}",
                Ipv4Addr::from(address)
            );
        }
        out
    }
}

/// The Linux router with a [`RouteTable`]: [`LinuxRouter`]'s setup, then the rest of the table.
#[derive(Debug)]
pub struct LinuxRouterFib {
    router: LinuxRouter,
    routes: Arc<RouteTable>,
    steps: Steps,
    /// The router's commands, then this driver's.
    log: Vec<String>,
}

impl LinuxRouterFib {
    pub fn new(routes: Arc<RouteTable>) -> Self {
        Self {
            router: LinuxRouter::new(),
            routes,
            steps: Steps::new(LinuxRouter::NAME),
            log: Vec::new(),
        }
    }

    /// Installs every route of the table but the lab's destinations with `ip -batch`.
    fn install(&mut self, wiring: &Wiring) -> Result<(), DutError> {
        let ns = wiring.dut_ns.as_str();
        let egress = wiring.egress.dut_if.as_str();
        let gateway = wiring.egress.tester_ipv4;
        let path = std::env::temp_dir().join(format!(
            "wirespeed-{}-linux-routes-{}.batch",
            wiring.prefix(),
            std::process::id()
        ));
        let path_text = path.to_string_lossy().to_string();
        self.steps.write(
            "write the route batch",
            &path_text,
            &self.routes.ip_batch(gateway, egress),
            (
                0,
                &format!(
                    "# {} lines `route add PREFIX via {gateway} dev {egress} proto {LINUX_PROTO}`",
                    self.routes.len().saturating_sub(1)
                ),
            ),
        )?;
        // The flush goes on the stack first: a batch that fails halfway leaves routes behind.
        let proto = LINUX_PROTO.to_string();
        self.steps
            .push_undo(&["ip", "-n", ns, "route", "flush", "proto", &proto]);
        self.steps.run(
            &format!("add {} routes via {gateway}", self.routes.len()),
            &["ip", "-n", ns, "-batch", &path_text],
            None,
        )?;
        Ok(())
    }

    fn refresh_log(&mut self) {
        self.log = self.router.commands().to_vec();
        self.log.extend_from_slice(self.steps.log());
    }
}

impl Dut for LinuxRouterFib {
    fn name(&self) -> String {
        self.router.name()
    }

    fn setup(&mut self, wiring: &Wiring) -> Result<(), DutError> {
        let done = self
            .router
            .setup(wiring)
            .and_then(|()| self.install(wiring));
        self.refresh_log();
        done
    }

    fn teardown(&mut self) -> Result<(), DutError> {
        let mine = self.steps.undo_all();
        let router = self.router.teardown();
        self.refresh_log();
        mine.and(router)
    }

    fn commands(&self) -> &[String] {
        &self.log
    }

    fn destination_mac(&self, wiring: &Wiring) -> [u8; 6] {
        self.router.destination_mac(wiring)
    }

    fn forwarded(&self, wiring: &Wiring, frame: &[u8]) -> Vec<u8> {
        self.router.forwarded(wiring, frame)
    }

    fn set_host(&mut self, host: Host) -> Result<(), DutError> {
        self.steps.set_host(host.clone());
        self.router.set_host(host)
    }

    fn host(&self) -> Host {
        self.steps.host().clone()
    }
}

impl Drop for LinuxRouterFib {
    fn drop(&mut self) {
        if let Err(error) = self.teardown() {
            eprintln!("{error}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_starts_with_the_lab_destinations_and_leaves_out_the_lab_range() {
        let generated = [
            (0x0a00_0000, 8),  // 10.0.0.0/8
            (0xc612_0100, 24), // 198.18.1.0/24: a connected prefix of the lab
            (0xc600_0000, 8),  // 198.0.0.0/8 contains the lab range
            (0xc613_0000, 16), // the lab destinations again
            (0x0102_0304, 24), // host bits set: cleared
            (0x0b00_0000, 8),
            (0x0c00_0000, 8),
        ];
        let table = RouteTable::new(&generated, 4);
        assert_eq!(
            table.prefixes(),
            &[
                LAB_DESTINATIONS,
                (0x0a00_0000, 8),
                (0x0102_0300, 24),
                (0x0b00_0000, 8)
            ]
        );
        let gateway = Ipv4Addr::new(198, 18, 1, 1);
        assert_eq!(
            table.route_file(gateway),
            "198.19.0.0/16 via 198.18.1.1\n10.0.0.0/8 via 198.18.1.1\n\
             1.2.3.0/24 via 198.18.1.1\n11.0.0.0/8 via 198.18.1.1\n"
        );
        // The Linux router routes the lab's destinations itself: the batch has the rest.
        let script = table.ip_batch(gateway, "lab-d1");
        assert_eq!(script.lines().count(), 3);
        assert_eq!(
            script.lines().nth(1),
            Some("route add 1.2.3.0/24 via 198.18.1.1 dev lab-d1 proto 250")
        );
        // One route is the lab's destinations alone; a short list gives what it has.
        assert_eq!(RouteTable::new(&generated, 1).len(), 1);
        assert_eq!(RouteTable::new(&generated, 0).len(), 1);
        assert_eq!(RouteTable::new(&generated, 100).len(), 5);
    }

    #[test]
    fn overlap_is_containment_either_way() {
        assert!(overlaps((0xc600_0000, 8), LAB_RANGE));
        assert!(overlaps((0xc613_0500, 24), LAB_RANGE));
        assert!(!overlaps((0xc614_0000, 16), LAB_RANGE));
        assert!(overlaps((0, 0), (0x0102_0304, 32)));
    }
}
