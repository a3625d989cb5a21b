//! The Linux router as a DuT: kernel forwarding between `d0` and `d1`, IPv4 and IPv6.
//!
//! The generator's destinations are in 198.19.0.0/16 (the second half of the RFC 2544 range)
//! or [`GENERATOR_PREFIX6`], routed via `t1`'s address of that version. The neighbour entries
//! for `t1` are static, so no ARP or NDP exchange is needed (the tester's AF_XDP socket would
//! swallow the requests). The tester's frames are addressed to `d0`'s MAC, as a host addresses
//! its gateway; each leaves `d1` with `d1`'s MAC as source, `t1`'s as destination, the TTL (hop
//! limit) one lower and the IPv4 header checksum updated.

use wirespeed_packet::checksum;
use wirespeed_packet::wire::EthernetAddress;

use super::{Dut, DutError, GENERATOR_PREFIX6, Host, INGRESS_FLAP, Steps, Wiring, flap_ingress};

/// The destination prefix the generator uses and the router routes.
pub const GENERATOR_PREFIX: &str = "198.19.0.0/16";

/// What a DuT built on the Linux router adds to it (a firewall, a shaper): its name and
/// description, and the steps that set it up before the forwarding is configured, their undo
/// on the router's stack. [`Router`] is the one driver for all of them.
pub trait RouterAddition: std::fmt::Debug + Send {
    fn name(&self) -> String;

    fn description(&self) -> String {
        self.name()
    }

    fn setup(&self, steps: &mut Steps, wiring: &Wiring) -> Result<(), DutError>;
}

/// Plain kernel forwarding: nothing added.
#[derive(Debug)]
pub struct Forwarding;

impl RouterAddition for Forwarding {
    fn name(&self) -> String {
        LinuxRouter::NAME.into()
    }

    fn setup(&self, _steps: &mut Steps, _wiring: &Wiring) -> Result<(), DutError> {
        Ok(())
    }
}

/// The Linux router driver, with what `A` adds to it.
#[derive(Debug)]
pub struct Router<A> {
    addition: A,
    steps: Steps,
}

/// The Linux router as it is.
pub type LinuxRouter = Router<Forwarding>;

impl<A: RouterAddition> Router<A> {
    /// The router with `addition`.
    pub fn with(addition: A) -> Self {
        let steps = Steps::new(&addition.name());
        Self { addition, steps }
    }

    /// What this router adds to kernel forwarding.
    pub fn addition(&self) -> &A {
        &self.addition
    }
}

impl LinuxRouter {
    pub const NAME: &'static str = "linux-router";

    pub fn new() -> Self {
        Self::with(Forwarding)
    }
}

impl Default for LinuxRouter {
    fn default() -> Self {
        Self::new()
    }
}

impl<A: RouterAddition> Dut for Router<A> {
    fn name(&self) -> String {
        self.addition.name()
    }

    fn description(&self) -> String {
        self.addition.description()
    }

    fn setup(&mut self, wiring: &Wiring) -> Result<(), DutError> {
        self.addition.setup(&mut self.steps, wiring)?;
        configure(&mut self.steps, wiring)
    }

    fn teardown(&mut self) -> Result<(), DutError> {
        self.steps.undo_all()
    }

    fn reset_method(&self) -> Option<&'static str> {
        Some(INGRESS_FLAP)
    }

    fn reset(&mut self, wiring: &Wiring) -> Result<(), DutError> {
        flap_ingress(&mut self.steps, wiring)
    }

    fn commands(&self) -> &[String] {
        self.steps.log()
    }

    fn destination_mac(&self, wiring: &Wiring) -> [u8; 6] {
        wiring.ingress.dut_mac
    }

    fn forwarded(&self, wiring: &Wiring, frame: &[u8]) -> Vec<u8> {
        routed(frame, wiring.egress.dut_mac, wiring.egress.tester_mac)
    }

    fn set_host(&mut self, host: Host) -> Result<(), DutError> {
        self.steps.set_host(host);
        Ok(())
    }

    fn host(&self) -> Host {
        self.steps.host().clone()
    }
}

impl<A> Drop for Router<A> {
    fn drop(&mut self) {
        if let Err(error) = self.steps.undo_all() {
            eprintln!("{error}");
        }
    }
}

/// Turns the DuT namespace of `wiring` into the router, through `steps`: IPv4 and IPv6 alike.
fn configure(steps: &mut Steps, wiring: &Wiring) -> Result<(), DutError> {
    let v4 = wiring.egress.tester_ipv4.to_string();
    let v6 = wiring.egress.tester_ipv6.to_string();
    forward(steps, wiring, "net.ipv4.ip_forward", &v4, GENERATOR_PREFIX)?;
    // A namespace's own IPv6 setting is its `all.forwarding`.
    forward(
        steps,
        wiring,
        "net.ipv6.conf.all.forwarding",
        &v6,
        GENERATOR_PREFIX6,
    )
}

/// Turns forwarding sysctl `switch` on (restoring it on undo), adds `t1`'s address `next_hop`
/// as a static neighbour on the egress interface and routes `prefix` via it.
fn forward(
    steps: &mut Steps,
    wiring: &Wiring,
    switch: &str,
    next_hop: &str,
    prefix: &str,
) -> Result<(), DutError> {
    let ns = wiring.dut_ns.as_str();
    let egress = wiring.egress.dut_if.as_str();
    let next_hop_mac = EthernetAddress(wiring.egress.tester_mac).to_string();
    let sysctl = |args: &[&str]| -> Vec<String> {
        ["ip", "netns", "exec", ns, "sysctl"]
            .iter()
            .chain(args)
            .map(|word| word.to_string())
            .collect()
    };
    let read = sysctl(&["-n", switch]);
    let old = steps.run(&format!("read {switch}"), &words(&read), None)?;
    let (enable, restore) = (
        sysctl(&["-qw", &format!("{switch}=1")]),
        sysctl(&["-qw", &format!("{switch}={}", old.trim())]),
    );
    steps.run(
        &format!("turn {switch} on"),
        &words(&enable),
        Some(&words(&restore)),
    )?;
    steps.run(
        &format!("add a static neighbour {next_hop} on {egress}"),
        &[
            "ip",
            "-n",
            ns,
            "neigh",
            "replace",
            next_hop,
            "lladdr",
            &next_hop_mac,
            "dev",
            egress,
            "nud",
            "permanent",
        ],
        Some(&["ip", "-n", ns, "neigh", "del", next_hop, "dev", egress]),
    )?;
    steps.run(
        &format!("route {prefix} via {next_hop}"),
        &[
            "ip", "-n", ns, "route", "add", prefix, "via", next_hop, "dev", egress,
        ],
        Some(&["ip", "-n", ns, "route", "del", prefix]),
    )?;
    Ok(())
}

/// `words` as the `&str`s a step takes.
fn words(words: &[String]) -> Vec<&str> {
    words.iter().map(String::as_str).collect()
}

/// `frame` (Ethernet + IPv4 without options, or IPv6) as a router forwards it: new MACs, TTL or
/// hop limit one lower, an IPv4 header checksum recomputed. Anything else is returned unchanged.
pub fn routed(frame: &[u8], src_mac: [u8; 6], dst_mac: [u8; 6]) -> Vec<u8> {
    let mut out = frame.to_vec();
    // IPv6 (no extension header): new MACs and the hop limit one lower; it has no checksum.
    if out.len() >= 54 && out[12..14] == [0x86, 0xdd] && out[14] >> 4 == 6 && out[21] > 0 {
        out[0..6].copy_from_slice(&dst_mac);
        out[6..12].copy_from_slice(&src_mac);
        out[21] -= 1;
        return out;
    }
    if out.len() < 34 || out[12..14] != [0x08, 0x00] || out[14] != 0x45 || out[22] == 0 {
        return out;
    }
    out[0..6].copy_from_slice(&dst_mac);
    out[6..12].copy_from_slice(&src_mac);
    out[22] -= 1;
    out[24..26].copy_from_slice(&[0, 0]);
    let sum = checksum::internet_checksum(&out[14..34]);
    out[24..26].copy_from_slice(&sum.to_be_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generator::{Template, TemplateConfig};

    #[test]
    fn a_routed_frame_has_new_macs_a_lower_ttl_and_a_valid_header_checksum() {
        let template = Template::new(&TemplateConfig::default()).unwrap();
        let frame = template.bytes();
        let out = routed(frame, [2, 0, 0, 0, 0, 0xaa], [2, 0, 0, 0, 0, 0xbb]);
        assert_eq!(out[..12], [2, 0, 0, 0, 0, 0xbb, 2, 0, 0, 0, 0, 0xaa]);
        assert_eq!(out[22], frame[22] - 1);
        assert!(checksum::is_valid(&out[14..34]));
        assert_eq!(out[26..], frame[26..], "addresses and UDP are untouched");
        assert_eq!(routed(&frame[..20], [0; 6], [0; 6]), frame[..20]);
    }

    #[test]
    fn a_routed_ipv6_frame_has_new_macs_and_a_lower_hop_limit() {
        let template = Template::new(&TemplateConfig {
            frame_size: crate::generator::probe::SMALLEST_IPV6_FRAME,
            src_ip: "2001:2::1".parse().unwrap(),
            dst_ip: "2001:2:0:ff::1".parse().unwrap(),
            ..TemplateConfig::default()
        })
        .unwrap();
        let frame = template.bytes();
        let out = routed(frame, [2, 0, 0, 0, 0, 0xaa], [2, 0, 0, 0, 0, 0xbb]);
        assert_eq!(out[..12], [2, 0, 0, 0, 0, 0xbb, 2, 0, 0, 0, 0, 0xaa]);
        assert_eq!(out[21], frame[21] - 1);
        assert_eq!(out[22..], frame[22..], "addresses and UDP are untouched");
        assert_eq!(out[12..21], frame[12..21]);
    }
}
