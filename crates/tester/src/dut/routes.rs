//! A routing table for a router DuT: the lab's destination range plus generated prefixes of one
//! IP version, written out as wirespeed's route file or as an `ip -batch` script, and
//! [`LinuxRouterFib`], the Linux router with such a table installed.
//!
//! The FIB-size sweep (seed 002 Figure 4) installs 1 to a million routes in a router DuT, all via
//! the tester's `t1`, so that whatever the longest match is, the frame comes back to the tester.
//! The table always holds the lab's destinations of its version ([`LAB_DESTINATIONS`],
//! 198.19.0.0/16, or [`LAB_DESTINATIONS6`], 2001:2:0:ff::/64, where the probe frames that
//! verify a DuT and one-destination templates go) and leaves out every generated prefix that
//! overlaps the lab's benchmark range (198.18.0.0/15, or RFC 5180's 2001:2::/48): a prefix
//! inside the connected prefixes of `d0` and `d1` would send the tester's own addresses (the
//! gateway among them) elsewhere, and one equal to a connected prefix is refused by the kernel.
//! The prefixes themselves come from the caller (the CLI draws them from the testkit's BGP-like
//! mix), so the table is a pure function of its input.
//!
//! A router DuT is set up for both IP versions whatever its table (the frames say which one is
//! measured, and [`probe::verify`](super::probe::verify) proves forwarding with IPv4), so the
//! routes a DuT gets ([`RouteTable::routes`]) are the lab's destinations of both versions, then
//! the table's others.
//!
//! [`LinuxRouterFib`] is [`LinuxRouter`] (which routes the lab's destinations itself) plus every
//! other route of the table in one `ip -batch` run (a million routes take seconds, not the hours
//! one `ip route add` each would), tagged with protocol [`LINUX_PROTO`] so that one
//! `ip route flush proto` takes them all out again.

use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use wirespeed_lab::PortPair;

use super::{Dut, DutError, Host, IpVersion, LinuxRouter, Steps, Wiring};

/// The prefix the IPv4 probe frames and one-destination templates go to: 198.19.0.0/16.
pub const LAB_DESTINATIONS: (u32, u8) = (0xc613_0000, 16);
/// The lab's IPv4 benchmark range, 198.18.0.0/15 (RFC 2544's), which generated prefixes must
/// not overlap.
pub const LAB_RANGE: (u32, u8) = (0xc612_0000, 15);
/// The prefix IPv6 templates go to: 2001:2:0:ff::/64 ([`super::GENERATOR_PREFIX6`]).
pub const LAB_DESTINATIONS6: (u128, u8) = (0x2001_0002_0000_00ff << 64, 64);
/// The lab's IPv6 benchmark range, 2001:2::/48 (RFC 5180's), which holds its links and
/// destinations and which generated prefixes must not overlap.
pub const LAB_RANGE6: (u128, u8) = (0x2001_0002_0000 << 80, 48);
/// The routing protocol number (`ip route ... proto N`) the Linux router's bulk routes carry, so
/// that one `ip route flush proto N` removes them all.
pub const LINUX_PROTO: u8 = 250;

/// The prefixes of a [`RouteTable`]: (network address in host order, prefix length), the lab's
/// destinations of that version first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Prefixes {
    V4(Vec<(u32, u8)>),
    V6(Vec<(u128, u8)>),
}

/// Routes to install, every one via the same gateway, all of one IP version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RouteTable {
    prefixes: Prefixes,
}

/// The mask of a prefix of length `len` in an address of `bits` bits (32 or 128), host order.
fn mask(len: u8, bits: u32) -> u128 {
    match u32::from(len).min(bits) {
        0 => 0,
        len => (u128::MAX << (128 - len)) >> (128 - bits),
    }
}

/// Whether two prefixes of `bits`-bit addresses share any address (one contains the other).
fn overlap(a: (u128, u8), b: (u128, u8), bits: u32) -> bool {
    let shorter = mask(a.1.min(b.1), bits);
    a.0 & shorter == b.0 & shorter
}

/// Whether two IPv4 prefixes share any address (one contains the other).
pub fn overlaps(a: (u32, u8), b: (u32, u8)) -> bool {
    overlap((a.0.into(), a.1), (b.0.into(), b.1), 32)
}

/// `lab`, then the first `count - 1` of `generated` (host bits cleared) that do not overlap
/// `range`, for `bits`-bit addresses.
fn select(
    generated: impl Iterator<Item = (u128, u8)>,
    count: usize,
    lab: (u128, u8),
    range: (u128, u8),
    bits: u32,
) -> Vec<(u128, u8)> {
    let mut prefixes = Vec::with_capacity(count.max(1));
    prefixes.push(lab);
    prefixes.extend(
        generated
            .map(|(address, len)| (address & mask(len, bits), len.min(bits as u8)))
            .filter(|&prefix| !overlap(prefix, range, bits))
            .take(count.saturating_sub(1)),
    );
    prefixes
}

impl RouteTable {
    /// `count` IPv4 routes (at least 1): [`LAB_DESTINATIONS`], then the first `count - 1` of
    /// `generated` that do not overlap [`LAB_RANGE`] (host bits cleared). Fewer when `generated`
    /// runs out; [`RouteTable::len`] says how many.
    pub fn new(generated: &[(u32, u8)], count: usize) -> RouteTable {
        let wide = |(address, len): (u32, u8)| (u128::from(address), len);
        let prefixes = select(
            generated.iter().copied().map(wide),
            count,
            wide(LAB_DESTINATIONS),
            wide(LAB_RANGE),
            32,
        );
        RouteTable {
            prefixes: Prefixes::V4(
                prefixes
                    .into_iter()
                    .map(|(address, len)| (address as u32, len))
                    .collect(),
            ),
        }
    }

    /// `count` IPv6 routes, as [`RouteTable::new`]: [`LAB_DESTINATIONS6`], then generated
    /// prefixes outside [`LAB_RANGE6`].
    pub fn new_v6(generated: &[(u128, u8)], count: usize) -> RouteTable {
        RouteTable {
            prefixes: Prefixes::V6(select(
                generated.iter().copied(),
                count,
                LAB_DESTINATIONS6,
                LAB_RANGE6,
                128,
            )),
        }
    }

    /// The table of this one's first `count` routes (at least the lab's destinations): what
    /// [`RouteTable::new`] makes of the same prefixes with the smaller count.
    pub fn first(&self, count: usize) -> RouteTable {
        let count = count.max(1);
        RouteTable {
            prefixes: match &self.prefixes {
                Prefixes::V4(p) => Prefixes::V4(p.iter().take(count).copied().collect()),
                Prefixes::V6(p) => Prefixes::V6(p.iter().take(count).copied().collect()),
            },
        }
    }

    /// Number of routes.
    pub fn len(&self) -> usize {
        match &self.prefixes {
            Prefixes::V4(prefixes) => prefixes.len(),
            Prefixes::V6(prefixes) => prefixes.len(),
        }
    }

    /// Never true: the table always routes the lab's destinations.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The IP version of every route.
    pub fn ip(&self) -> IpVersion {
        match self.prefixes {
            Prefixes::V4(_) => IpVersion::V4,
            Prefixes::V6(_) => IpVersion::V6,
        }
    }

    /// The routes, the lab's destinations first.
    pub fn prefixes(&self) -> &Prefixes {
        &self.prefixes
    }

    /// The table's routes but the lab's destinations, each as `PREFIX/LEN` and its gateway
    /// (`t1`'s address of its version on `egress`).
    fn others(&self, egress: &PortPair) -> Vec<(String, IpAddr)> {
        let v4 = IpAddr::from(egress.tester_ipv4);
        let v6 = IpAddr::from(egress.tester_ipv6);
        match &self.prefixes {
            Prefixes::V4(prefixes) => prefixes
                .iter()
                .skip(1)
                .map(|&(address, len)| (format!("{}/{len}", Ipv4Addr::from(address)), v4))
                .collect(),
            Prefixes::V6(prefixes) => prefixes
                .iter()
                .skip(1)
                .map(|&(address, len)| (format!("{}/{len}", Ipv6Addr::from(address)), v6))
                .collect(),
        }
    }

    /// Every route a router DuT behind `egress` gets: the lab's destinations of both versions
    /// (the DuT is set up for both, and a route load replaces the whole table), then the
    /// table's others, as `PREFIX/LEN` and gateway.
    pub fn routes(&self, egress: &PortPair) -> Vec<(String, IpAddr)> {
        let (address, len) = LAB_DESTINATIONS;
        let (address6, len6) = LAB_DESTINATIONS6;
        let mut routes = vec![
            (
                format!("{}/{len}", Ipv4Addr::from(address)),
                egress.tester_ipv4.into(),
            ),
            (
                format!("{}/{len6}", Ipv6Addr::from(address6)),
                egress.tester_ipv6.into(),
            ),
        ];
        routes.extend(self.others(egress));
        routes
    }

    /// wirespeed's route file (`PREFIX via GATEWAY` per line) of [`RouteTable::routes`], for
    /// `route load`.
    pub fn route_file(&self, egress: &PortPair) -> String {
        let routes = self.routes(egress);
        let mut out = String::with_capacity(routes.len() * 32);
        for (prefix, gateway) in routes {
            let _ = writeln!(out, "{prefix} via {gateway}");
        }
        out
    }

    /// An `ip -batch` script adding every route but the lab's destinations (which
    /// [`LinuxRouter`] routes itself) via `t1` on `egress`'s DuT interface with protocol
    /// [`LINUX_PROTO`].
    pub fn ip_batch(&self, egress: &PortPair) -> String {
        let others = self.others(egress);
        let mut out = String::with_capacity(others.len() * 64);
        for (prefix, gateway) in others {
            let _ = writeln!(
                out,
                "route add {prefix} via {gateway} dev {} proto {LINUX_PROTO}",
                egress.dut_if
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
        let (family, gateway) = match self.routes.ip() {
            IpVersion::V4 => ("-4", IpAddr::from(wiring.egress.tester_ipv4)),
            IpVersion::V6 => ("-6", IpAddr::from(wiring.egress.tester_ipv6)),
        };
        let path = std::env::temp_dir().join(format!(
            "wirespeed-{}-linux-routes-{}.batch",
            wiring.prefix(),
            std::process::id()
        ));
        let path_text = path.to_string_lossy().to_string();
        self.steps.write(
            "write the route batch",
            &path_text,
            &self.routes.ip_batch(&wiring.egress),
            (
                0,
                &format!(
                    "# {} lines `route add PREFIX via {gateway} dev {egress} proto {LINUX_PROTO}`",
                    self.routes.len().saturating_sub(1)
                ),
            ),
        )?;
        // The flush goes on the stack first: a batch that fails halfway leaves routes behind.
        // A flush without a family takes IPv4 routes only.
        let proto = LINUX_PROTO.to_string();
        self.steps
            .push_undo(&["ip", "-n", ns, family, "route", "flush", "proto", &proto]);
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

    fn reset_method(&self) -> Option<&'static str> {
        self.router.reset_method()
    }

    fn reset(&mut self, wiring: &Wiring) -> Result<(), DutError> {
        let done = self.router.reset(wiring);
        self.refresh_log();
        done
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

    fn egress() -> PortPair {
        PortPair {
            tester_if: "lab-t1".into(),
            dut_if: "lab-d1".into(),
            tester_mac: [2, 0, 0, 0, 1, 1],
            dut_mac: [2, 0, 0, 0, 1, 2],
            tester_ipv4: Ipv4Addr::new(198, 18, 1, 1),
            dut_ipv4: Ipv4Addr::new(198, 18, 1, 2),
            tester_ipv6: Ipv6Addr::new(0x2001, 2, 0, 1, 0, 0, 0, 1),
            dut_ipv6: Ipv6Addr::new(0x2001, 2, 0, 1, 0, 0, 0, 2),
        }
    }

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
            &Prefixes::V4(vec![
                LAB_DESTINATIONS,
                (0x0a00_0000, 8),
                (0x0102_0300, 24),
                (0x0b00_0000, 8)
            ])
        );
        let egress = egress();
        assert_eq!(
            table.route_file(&egress),
            "198.19.0.0/16 via 198.18.1.1\n2001:2:0:ff::/64 via 2001:2:0:1::1\n\
             10.0.0.0/8 via 198.18.1.1\n1.2.3.0/24 via 198.18.1.1\n11.0.0.0/8 via 198.18.1.1\n"
        );
        // The Linux router routes the lab's destinations itself: the batch has the rest.
        let script = table.ip_batch(&egress);
        assert_eq!(script.lines().count(), 3);
        assert_eq!(
            script.lines().nth(1),
            Some("route add 1.2.3.0/24 via 198.18.1.1 dev lab-d1 proto 250")
        );
        assert_eq!(RouteTable::new(&generated, 7).first(4), table);
        // One route is the lab's destinations alone; a short list gives what it has.
        assert_eq!(RouteTable::new(&generated, 1).len(), 1);
        assert_eq!(RouteTable::new(&generated, 0).len(), 1);
        assert_eq!(RouteTable::new(&generated, 100).len(), 5);
    }

    #[test]
    fn an_ipv6_table_starts_with_its_lab_destinations_and_leaves_out_rfc_5180s_range() {
        let generated = [
            (0x2400_0000_0000_0000_0000_0000_0000_0000, 12),
            (0x2001_0002_0000_0001_0000_0000_0000_0000, 64), // a lab link
            (0x2001_0000_0000_0000_0000_0000_0000_0000, 16), // contains the lab range
            (0x2a00_0001_0000_0000_0000_0000_0000_0001, 32), // host bits set: cleared
        ];
        let table = RouteTable::new_v6(&generated, 10);
        assert_eq!(table.ip(), IpVersion::V6);
        assert_eq!(
            table.prefixes(),
            &Prefixes::V6(vec![
                LAB_DESTINATIONS6,
                (0x2400 << 112, 12),
                (0x2a00_0001 << 96, 32)
            ])
        );
        let (address, len) = LAB_DESTINATIONS6;
        assert_eq!(
            format!("{}/{len}", Ipv6Addr::from(address)),
            super::super::GENERATOR_PREFIX6
        );
        let egress = egress();
        // Both versions' lab destinations first: a route load replaces the whole table.
        assert_eq!(
            table.route_file(&egress),
            "198.19.0.0/16 via 198.18.1.1\n2001:2:0:ff::/64 via 2001:2:0:1::1\n\
             2400::/12 via 2001:2:0:1::1\n2a00:1::/32 via 2001:2:0:1::1\n"
        );
        assert_eq!(
            table.ip_batch(&egress),
            "route add 2400::/12 via 2001:2:0:1::1 dev lab-d1 proto 250\n\
             route add 2a00:1::/32 via 2001:2:0:1::1 dev lab-d1 proto 250\n"
        );
    }

    #[test]
    fn overlap_is_containment_either_way() {
        assert!(overlaps((0xc600_0000, 8), LAB_RANGE));
        assert!(overlaps((0xc613_0500, 24), LAB_RANGE));
        assert!(!overlaps((0xc614_0000, 16), LAB_RANGE));
        assert!(overlaps((0, 0), (0x0102_0304, 32)));
        assert!(overlap(LAB_DESTINATIONS6, LAB_RANGE6, 128));
        assert!(!overlap((0x2001_0003 << 96, 32), LAB_RANGE6, 128));
    }
}
