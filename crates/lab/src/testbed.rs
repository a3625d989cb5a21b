//! The two-host testbed: a tester namespace and a DuT namespace joined by veth pairs.
//!
//! Names: namespaces `{prefix}-tester` and `{prefix}-dut`; pair *i* is `{prefix}-t{i}` in the
//! tester and `{prefix}-d{i}` in the DuT (interface names are at most 15 bytes, so the prefix is
//! at most 8). Pair *i* is subnet 198.18.*i*.0/24 and 2001:2:0:*i*::/64: the tester end is .1 /
//! ::1, the DuT end .254 / ::fe. MACs are locally administered and fixed: 02:57:53:*p*:*i*:01 on
//! the tester side and ...:fe on the DuT side, *p* = 0 (a testbed with another prefix gets the
//! same MACs, which is harmless as they live in other namespaces).
//!
//! With `calibration` set, one more veth pair has both ends in the tester namespace,
//! `{prefix}-c0` and `{prefix}-c1` (MACs 02:57:53:00:c0:01 and ...:c1:01, no addresses): the
//! tester sends on one end and receives on the other to measure itself without a DuT (its own
//! maximum rate and latency floor, DESIGN.md §6 "Calibration"). It is removed like the rest.
//!
//! **Backpressure** ([`Testbed::backpressure`], asked for by the RFC 2544 suite). A veth hands
//! frames to its peer through a 256-slot ring; since Linux 6.16 a full ring stops the sender's
//! TX queue and pushes back, but only when the device has a qdisc: with the default `noqueue`
//! the frame is dropped (counted as the sender's `tx_dropped`). In the lab that made the NDR
//! measure how often a NAPI thread on a shared core fell 256 frames behind: an AF_XDP sender
//! (the tester, or a DuT) lost frames it had already handed to the kernel, while a real NIC
//! would have held them in its TX ring. With a `pfifo` qdisc on every veth, the frame stays
//! in the sender's AF_XDP TX ring (or the qdisc, for the kernel's own forwarding) until the
//! peer catches up, as on hardware; what is lost then shows where it is lost (a full TX ring
//! the sender counts, or a queue of the DuT), not in a counter no test reads. The other
//! benchmarks keep `noqueue`, so their figures stay comparable with the ones already taken.

use crate::command::{CommandError, run};

/// Frames a DuT may queue on its way out to the tester when the lab pushes back
/// ([`Testbed::backpressure`]): the `pfifo` limit of the DuT's veth ends, which the kernel's
/// forwarding queues in, and the size the wirespeed DuT gives its AF_XDP TX and completion rings,
/// which it queues in instead (AF_XDP transmits past the qdisc). Equal for every DuT, and deep
/// enough (16 ms at 0.5 Mpps) that a DuT does not lose frames while the tester's receive thread,
/// which shares the generator's core, waits for its turn: with 1000 / 2048 it did, and two NDR
/// searches in a row differed by 24-34 % (docs/benchmarks.md).
pub const DUT_EGRESS_FRAMES: u32 = 8192;

/// What to build.
#[derive(Clone, Debug)]
pub struct TestbedConfig {
    /// Name prefix of everything created; at most 8 bytes of `[a-z0-9]`.
    pub prefix: String,
    /// Number of tester <-> DuT veth pairs.
    pub pairs: u16,
    /// RX and TX queues per veth (numrxqueues/numtxqueues).
    pub queues: u16,
    /// Whether to add the looped-back calibration pair `{prefix}-c0` <-> `{prefix}-c1`, both
    /// ends in the tester namespace.
    pub calibration: bool,
    /// MTU of every veth ([`DEFAULT_MTU`], or 9000 for jumbo frames up to 9018 bytes).
    pub mtu: u32,
}

/// The MTU veths get by default: Ethernet's 1500 (frames up to 1518 bytes with FCS).
pub const DEFAULT_MTU: u32 = 1500;

impl Default for TestbedConfig {
    fn default() -> Self {
        Self {
            prefix: "ws".into(),
            pairs: 2,
            queues: 1,
            calibration: false,
            mtu: DEFAULT_MTU,
        }
    }
}

/// The looped-back pair in the tester namespace: frames sent on `sender_if` arrive on
/// `receiver_if`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CalibrationPair {
    pub sender_if: String,
    pub receiver_if: String,
    pub sender_mac: [u8; 6],
    pub receiver_mac: [u8; 6],
}

/// One tester <-> DuT link.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortPair {
    pub tester_if: String,
    pub dut_if: String,
    pub tester_mac: [u8; 6],
    pub dut_mac: [u8; 6],
    pub tester_ipv4: std::net::Ipv4Addr,
    pub dut_ipv4: std::net::Ipv4Addr,
    pub tester_ipv6: std::net::Ipv6Addr,
    pub dut_ipv6: std::net::Ipv6Addr,
}

/// A built testbed; dropping it removes everything it created, last first.
#[derive(Debug)]
pub struct Testbed {
    pub tester_ns: String,
    pub dut_ns: String,
    pub pairs: Vec<PortPair>,
    /// The looped-back calibration pair, when the configuration asked for it.
    pub calibration: Option<CalibrationPair>,
    /// MTU of every veth.
    pub mtu: u32,
    /// Commands that undo what was built, in the order they were pushed.
    undo: Vec<Vec<String>>,
    /// Every setup command run, for reports.
    log: Vec<String>,
}

/// Errors while building a testbed.
#[derive(Debug, thiserror::Error)]
pub enum TestbedError {
    #[error("lab prefix {0:?} must be 1 to 8 characters of a-z and 0-9")]
    Prefix(String),
    #[error(
        "a lab needs 1 to 64 port pairs and 1 to 64 queues; got {pairs} pairs, {queues} queues"
    )]
    Size { pairs: u16, queues: u16 },
    #[error(
        "a lab with prefix {0:?} already exists; remove it with `wirespeed lab down --prefix {0}`"
    )]
    Exists(String),
    #[error(transparent)]
    Command(#[from] CommandError),
}

fn mac(side: u8, pair: u16) -> [u8; 6] {
    [0x02, 0x57, 0x53, 0, pair as u8, side]
}

impl Testbed {
    /// Builds the testbed. On any failure, whatever was already built is removed before the
    /// error is returned.
    pub fn up(config: &TestbedConfig) -> Result<Testbed, TestbedError> {
        let prefix = &config.prefix;
        if prefix.is_empty()
            || prefix.len() > 8
            || !prefix
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        {
            return Err(TestbedError::Prefix(prefix.clone()));
        }
        if !(1..=64).contains(&config.pairs) || !(1..=64).contains(&config.queues) {
            return Err(TestbedError::Size {
                pairs: config.pairs,
                queues: config.queues,
            });
        }
        if list()?
            .iter()
            .any(|ns| ns == &format!("{prefix}-tester") || ns == &format!("{prefix}-dut"))
        {
            return Err(TestbedError::Exists(prefix.clone()));
        }
        let mut testbed = Testbed {
            tester_ns: format!("{prefix}-tester"),
            dut_ns: format!("{prefix}-dut"),
            pairs: Vec::new(),
            calibration: None,
            mtu: config.mtu,
            undo: Vec::new(),
            log: Vec::new(),
        };
        // On error `testbed` is dropped here, which runs the undo stack.
        testbed.build(config)?;
        Ok(testbed)
    }

    fn build(&mut self, config: &TestbedConfig) -> Result<(), TestbedError> {
        let queues = config.queues.to_string();
        for ns in [self.tester_ns.clone(), self.dut_ns.clone()] {
            self.step(
                &["ip", "netns", "add", &ns],
                Some(&["ip", "netns", "delete", &ns]),
            )?;
            self.step(&["ip", "-n", &ns, "link", "set", "lo", "up"], None)?;
            for sysctl in [
                "net.ipv6.conf.all.accept_dad=0",
                "net.ipv6.conf.default.accept_dad=0",
                "net.ipv6.conf.all.disable_ipv6=0",
            ] {
                self.step(&["ip", "netns", "exec", &ns, "sysctl", "-qw", sysctl], None)?;
            }
        }
        for i in 0..config.pairs {
            let pair = PortPair {
                tester_if: format!("{}-t{i}", config.prefix),
                dut_if: format!("{}-d{i}", config.prefix),
                tester_mac: mac(0x01, i),
                dut_mac: mac(0xfe, i),
                tester_ipv4: std::net::Ipv4Addr::new(198, 18, i as u8, 1),
                dut_ipv4: std::net::Ipv4Addr::new(198, 18, i as u8, 254),
                tester_ipv6: std::net::Ipv6Addr::new(0x2001, 2, 0, i, 0, 0, 0, 1),
                dut_ipv6: std::net::Ipv6Addr::new(0x2001, 2, 0, i, 0, 0, 0, 0xfe),
            };
            let (tester_ns, dut_ns) = (self.tester_ns.clone(), self.dut_ns.clone());
            self.step(
                &[
                    "ip",
                    "link",
                    "add",
                    &pair.tester_if,
                    "netns",
                    &tester_ns,
                    "numrxqueues",
                    &queues,
                    "numtxqueues",
                    &queues,
                    "type",
                    "veth",
                    "peer",
                    "name",
                    &pair.dut_if,
                    "netns",
                    &dut_ns,
                    "numrxqueues",
                    &queues,
                    "numtxqueues",
                    &queues,
                ],
                // Deleting the namespaces removes the links too; this entry covers the case where
                // the namespaces outlive a half-built pair.
                Some(&["ip", "-n", &tester_ns, "link", "delete", &pair.tester_if]),
            )?;
            for (ns, ifname, mac, v4, v6) in [
                (
                    &tester_ns,
                    &pair.tester_if,
                    pair.tester_mac,
                    pair.tester_ipv4,
                    pair.tester_ipv6,
                ),
                (
                    &dut_ns,
                    &pair.dut_if,
                    pair.dut_mac,
                    pair.dut_ipv4,
                    pair.dut_ipv6,
                ),
            ] {
                let mac = format_mac(mac);
                self.step(
                    &["ip", "-n", ns, "link", "set", ifname, "address", &mac],
                    None,
                )?;
                self.step(
                    &[
                        "ip",
                        "-n",
                        ns,
                        "addr",
                        "add",
                        &format!("{v4}/24"),
                        "dev",
                        ifname,
                    ],
                    None,
                )?;
                self.step(
                    &[
                        "ip",
                        "-n",
                        ns,
                        "addr",
                        "add",
                        &format!("{v6}/64"),
                        "dev",
                        ifname,
                        "nodad",
                    ],
                    None,
                )?;
                self.set_mtu(ns, ifname, config.mtu)?;
                self.step(&["ip", "-n", ns, "link", "set", ifname, "up"], None)?;
            }
            self.pairs.push(pair);
        }
        if config.calibration {
            self.build_calibration(&config.prefix, config.mtu)?;
        }
        Ok(())
    }

    /// Sets the MTU of `ifname` in `ns` when it is not the default (so default labs log no
    /// extra command).
    fn set_mtu(&mut self, ns: &str, ifname: &str, mtu: u32) -> Result<(), TestbedError> {
        if mtu == DEFAULT_MTU {
            return Ok(());
        }
        let mtu = mtu.to_string();
        self.step(&["ip", "-n", ns, "link", "set", ifname, "mtu", &mtu], None)
    }

    fn build_calibration(&mut self, prefix: &str, mtu: u32) -> Result<(), TestbedError> {
        let ns = self.tester_ns.clone();
        let pair = CalibrationPair {
            sender_if: format!("{prefix}-c0"),
            receiver_if: format!("{prefix}-c1"),
            sender_mac: [0x02, 0x57, 0x53, 0, 0xc0, 0x01],
            receiver_mac: [0x02, 0x57, 0x53, 0, 0xc1, 0x01],
        };
        self.step(
            &[
                "ip",
                "link",
                "add",
                &pair.sender_if,
                "netns",
                &ns,
                "type",
                "veth",
                "peer",
                "name",
                &pair.receiver_if,
                "netns",
                &ns,
            ],
            Some(&["ip", "-n", &ns, "link", "delete", &pair.sender_if]),
        )?;
        for (ifname, mac) in [
            (&pair.sender_if, pair.sender_mac),
            (&pair.receiver_if, pair.receiver_mac),
        ] {
            let mac = format_mac(mac);
            self.step(
                &["ip", "-n", &ns, "link", "set", ifname, "address", &mac],
                None,
            )?;
            self.set_mtu(&ns, ifname, mtu)?;
            self.step(&["ip", "-n", &ns, "link", "set", ifname, "up"], None)?;
        }
        self.calibration = Some(pair);
        Ok(())
    }

    /// Gives every veth of the testbed (the calibration pair's too) a `pfifo` qdisc, so that
    /// a full peer ring pushes back instead of dropping (see the module documentation). The
    /// DuT's ends queue [`DUT_EGRESS_FRAMES`], the tester's the usual 1000 (AF_XDP transmits
    /// past the qdisc: there only its presence counts). The qdiscs go away with the links.
    pub fn backpressure(&mut self) -> Result<(), TestbedError> {
        let mut links: Vec<(String, String, u32)> = Vec::new();
        for pair in &self.pairs {
            links.push((self.tester_ns.clone(), pair.tester_if.clone(), 1000));
            links.push((self.dut_ns.clone(), pair.dut_if.clone(), DUT_EGRESS_FRAMES));
        }
        if let Some(pair) = &self.calibration {
            links.push((self.tester_ns.clone(), pair.sender_if.clone(), 1000));
            links.push((self.tester_ns.clone(), pair.receiver_if.clone(), 1000));
        }
        for (ns, ifname, limit) in links {
            let limit = limit.to_string();
            self.step(
                &[
                    "tc", "-n", &ns, "qdisc", "replace", "dev", &ifname, "root", "pfifo", "limit",
                    &limit,
                ],
                None,
            )?;
        }
        Ok(())
    }

    /// Runs one setup command, records it, and pushes its undo command if it has one.
    fn step(&mut self, command: &[&str], undo: Option<&[&str]>) -> Result<(), TestbedError> {
        self.log.push(command.join(" "));
        run(command[0], &command[1..])?;
        if let Some(undo) = undo {
            self.undo.push(undo.iter().map(|s| s.to_string()).collect());
        }
        Ok(())
    }

    /// Every command that built the testbed, in order (for reports).
    pub fn commands(&self) -> &[String] {
        &self.log
    }

    /// Takes the testbed down now (what dropping it does), reporting the first failure.
    pub fn teardown(mut self) -> Result<(), CommandError> {
        self.undo_all()
    }

    fn undo_all(&mut self) -> Result<(), CommandError> {
        let mut first_error = None;
        while let Some(command) = self.undo.pop() {
            let args: Vec<&str> = command[1..].iter().map(String::as_str).collect();
            if let Err(error) = run(&command[0], &args) {
                // A link already gone with its namespace is not a failure.
                if !error.to_string().contains("Cannot find device")
                    && !error.to_string().contains("No such file")
                {
                    first_error.get_or_insert(error);
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

impl Drop for Testbed {
    fn drop(&mut self) {
        if let Err(error) = self.undo_all() {
            eprintln!("lab teardown: {error}");
        }
    }
}

fn format_mac(mac: [u8; 6]) -> String {
    mac.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// The network namespaces on this machine (`ip netns list`), names only.
pub fn list() -> Result<Vec<String>, CommandError> {
    let out = run("ip", &["netns", "list"])?;
    Ok(out
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_string)
        .collect())
}

/// Removes the namespaces of a lab with `prefix` left by a run that could not clean up (deleting
/// a namespace deletes the veths in it). Returns what it removed.
pub fn down(prefix: &str) -> Result<Vec<String>, CommandError> {
    let mut removed = Vec::new();
    for ns in list()? {
        if ns == format!("{prefix}-tester") || ns == format!("{prefix}-dut") {
            run("ip", &["netns", "delete", &ns])?;
            removed.push(ns);
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_prefixes_and_sizes_are_refused_before_anything_is_built() {
        for prefix in ["", "UPPER", "much-too-long", "a b"] {
            let config = TestbedConfig {
                prefix: prefix.into(),
                ..TestbedConfig::default()
            };
            assert!(matches!(Testbed::up(&config), Err(TestbedError::Prefix(_))));
        }
        let config = TestbedConfig {
            pairs: 0,
            ..TestbedConfig::default()
        };
        assert!(matches!(
            Testbed::up(&config),
            Err(TestbedError::Size { .. })
        ));
    }

    #[test]
    fn up_builds_a_reachable_lab_and_drop_removes_it() {
        if !crate::available_for_test() {
            return;
        }
        let config = TestbedConfig {
            prefix: "wstlab1".into(),
            pairs: 2,
            queues: 2,
            calibration: false,
            mtu: DEFAULT_MTU,
        };
        let _ = down(&config.prefix);
        {
            let mut lab = Testbed::up(&config).expect("lab up");
            assert_eq!(lab.pairs.len(), 2);
            // The DuT answers a ping from the tester over each pair: the wiring is right.
            for pair in &lab.pairs {
                let dst = pair.dut_ipv4.to_string();
                crate::run_in(&lab.tester_ns, "ping", &["-c1", "-W2", &dst]).expect("ping");
            }
            let details = crate::run(
                "ip",
                &["-n", &lab.dut_ns, "-d", "link", "show", "wstlab1-d0"],
            );
            assert!(details.unwrap().contains("numrxqueues 2"));
            // Asked for, every veth gets a qdisc, so a full peer ring pushes back instead of
            // dropping.
            lab.backpressure().expect("qdiscs");
            let dut_limit = format!("limit {DUT_EGRESS_FRAMES}p");
            for (ns, ifname, limit) in lab.pairs.iter().flat_map(|pair| {
                [
                    (&lab.tester_ns, &pair.tester_if, "limit 1000p"),
                    (&lab.dut_ns, &pair.dut_if, dut_limit.as_str()),
                ]
            }) {
                let qdisc = crate::run("tc", &["-n", ns, "qdisc", "show", "dev", ifname]).unwrap();
                assert!(qdisc.contains("qdisc pfifo"), "{ifname}: {qdisc}");
                assert!(qdisc.contains(limit), "{ifname}: {qdisc}");
            }
            assert!(
                Testbed::up(&config).is_err(),
                "a second lab with one prefix must fail"
            );
            assert!(list().unwrap().contains(&lab.dut_ns));
        }
        let left = list().unwrap();
        assert!(
            !left.iter().any(|ns| ns.starts_with("wstlab1")),
            "left behind: {left:?}"
        );
    }

    #[test]
    fn the_calibration_pair_loops_back_in_the_tester_namespace_and_goes_away() {
        if !crate::available_for_test() {
            return;
        }
        let config = TestbedConfig {
            prefix: "wstcal1".into(),
            pairs: 1,
            queues: 1,
            calibration: true,
            mtu: DEFAULT_MTU,
        };
        let _ = down(&config.prefix);
        {
            let lab = Testbed::up(&config).expect("lab up");
            let pair = lab.calibration.clone().expect("calibration pair");
            assert_eq!(pair.sender_if, "wstcal1-c0");
            let links = crate::run("ip", &["-n", &lab.tester_ns, "-o", "link", "show"]).unwrap();
            // Both ends live in the tester namespace, peered with each other, up.
            assert!(links.contains("wstcal1-c0@wstcal1-c1"), "{links}");
            assert!(links.contains("wstcal1-c1@wstcal1-c0"), "{links}");
            assert!(links.contains("02:57:53:00:c1:01"), "{links}");
            assert!(
                lab.commands()
                    .iter()
                    .any(|c| c.contains("link add wstcal1-c0"))
            );
            let dut_links = crate::run("ip", &["-n", &lab.dut_ns, "-o", "link", "show"]).unwrap();
            assert!(!dut_links.contains("wstcal1-c"), "{dut_links}");
            lab.teardown().expect("teardown");
        }
        assert!(!list().unwrap().iter().any(|ns| ns.starts_with("wstcal1")));
        let all = crate::run("ip", &["-o", "link", "show"]).unwrap();
        assert!(!all.contains("wstcal1-c"), "{all}");
    }

    #[test]
    fn down_removes_leftovers_of_a_killed_run() {
        if !crate::available_for_test() {
            return;
        }
        let config = TestbedConfig {
            prefix: "wstlab2".into(),
            pairs: 1,
            queues: 1,
            calibration: false,
            mtu: DEFAULT_MTU,
        };
        let _ = down(&config.prefix);
        let lab = Testbed::up(&config).expect("lab up");
        std::mem::forget(lab); // as if the process had been killed
        let removed = down("wstlab2").unwrap();
        assert_eq!(removed.len(), 2);
        assert!(!list().unwrap().iter().any(|ns| ns.starts_with("wstlab2")));
    }
}
