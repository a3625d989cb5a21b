//! Which timestamp source the tester's RX port offers, which one the tester used, and how fine
//! and how costly each clock is, measured on this machine.
//!
//! A latency figure is only as good as its clock, so the report says where the stamps came
//! from and their resolution. Three sources exist, best first:
//!
//! * **NIC hardware** RX stamps (SO_TIMESTAMPING `hardware-receive`): taken by the NIC as the
//!   frame arrives; veth has none.
//! * **kernel software** RX stamps (`software-receive`): taken by the kernel when the packet
//!   enters the stack, from the system clock; a packet socket can ask for them.
//! * **TSC in the tester process**: TX and RX stamps from the same core-local counter, read by
//!   the generator just before a batch goes out and by the sink once per received batch.
//!
//! What the interface offers comes from `ethtool -T` run in its namespace (the same
//! `ETHTOOL_GET_TS_INFO` the kernel answers for SO_TIMESTAMPING users). The trials run over
//! AF_XDP, whose frames never become socket buffers: the kernel's SO_TIMESTAMPING stamps do not
//! exist for them, so the tester keeps the TSC there and the report says so, with the offered
//! capabilities beside it.
//!
//! Each clock is measured, not assumed: its **resolution** is the smallest non-zero difference
//! between successive readings (a clock that ticks coarser than it reads shows it here), its
//! **read cost** the mean time of one reading over a long run of them.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use wirespeed_packet::cpu::{rdtsc, tsc_hz};

/// Readings taken per clock measurement (a few milliseconds of work).
pub const READINGS: usize = 100_000;

/// What `ethtool -T` says an interface can stamp.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capabilities {
    pub hardware_receive: bool,
    pub hardware_transmit: bool,
    pub software_receive: bool,
    pub software_transmit: bool,
    /// The PTP hardware clock index, when the NIC has one.
    pub phc_index: Option<u32>,
}

impl Capabilities {
    /// Reads the capabilities from `ethtool -T` output; `None` when the text is not that
    /// output (no "Capabilities:" section).
    pub fn parse(text: &str) -> Option<Capabilities> {
        let mut lines = text.lines().map(str::trim);
        lines.by_ref().find(|l| l.starts_with("Capabilities:"))?;
        let mut caps = Capabilities::default();
        for line in lines {
            match line {
                "hardware-receive" | "hardware-receive (SOF_TIMESTAMPING_RX_HARDWARE)" => {
                    caps.hardware_receive = true
                }
                "hardware-transmit" | "hardware-transmit (SOF_TIMESTAMPING_TX_HARDWARE)" => {
                    caps.hardware_transmit = true
                }
                "software-receive" | "software-receive (SOF_TIMESTAMPING_RX_SOFTWARE)" => {
                    caps.software_receive = true
                }
                "software-transmit" | "software-transmit (SOF_TIMESTAMPING_TX_SOFTWARE)" => {
                    caps.software_transmit = true
                }
                _ => {
                    if let Some(rest) = line.strip_prefix("PTP Hardware Clock:") {
                        caps.phc_index = rest.trim().parse().ok();
                    }
                }
            }
        }
        Some(caps)
    }

    /// Reads `interface`'s capabilities in namespace `ns` with `ethtool -T`.
    pub fn probe(ns: &str, interface: &str) -> Result<Capabilities, String> {
        let text = wirespeed_lab::run_in(ns, "ethtool", &["-T", interface]).map_err(|error| {
            format!("probing the timestamping of {interface} (ethtool -T): {error}")
        })?;
        Capabilities::parse(&text).ok_or_else(|| {
            format!("probing the timestamping of {interface}: `ethtool -T` printed no capabilities")
        })
    }

    /// The best source these capabilities offer for RX stamps.
    pub fn best_rx(&self) -> &'static str {
        if self.hardware_receive {
            "NIC hardware"
        } else if self.software_receive {
            "kernel software"
        } else {
            "none"
        }
    }
}

/// One clock as measured here.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ClockFigures {
    pub name: String,
    /// Smallest non-zero difference between successive readings, nanoseconds.
    pub resolution_ns: f64,
    /// Mean cost of one reading, nanoseconds.
    pub read_cost_ns: f64,
}

/// The smallest non-zero difference between successive values of `readings`, in their unit;
/// `None` when no two successive readings differ (or there are fewer than two).
pub fn smallest_step(readings: &[u64]) -> Option<u64> {
    readings
        .windows(2)
        .filter_map(|pair| match pair {
            [a, b] if b > a => Some(b - a),
            _ => None,
        })
        .min()
}

/// Measures a clock: `read` returns its raw reading, `ns_per_unit` converts a reading's unit
/// to nanoseconds.
pub fn measure(name: &str, ns_per_unit: f64, mut read: impl FnMut() -> u64) -> ClockFigures {
    let mut readings = vec![0u64; READINGS];
    let started = Instant::now();
    for slot in readings.iter_mut() {
        *slot = read();
    }
    let elapsed = started.elapsed().as_secs_f64();
    ClockFigures {
        name: name.into(),
        resolution_ns: smallest_step(&readings).map_or(f64::NAN, |s| s as f64 * ns_per_unit),
        read_cost_ns: elapsed * 1e9 / READINGS as f64,
    }
}

/// The TSC as the tester reads it.
pub fn measure_tsc() -> ClockFigures {
    measure("TSC", 1e9 / tsc_hz().max(1) as f64, rdtsc)
}

/// The system clock the kernel's software stamps come from (CLOCK_REALTIME).
pub fn measure_system_clock() -> ClockFigures {
    measure("system clock (CLOCK_REALTIME)", 1.0, || {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
    })
}

/// What the report says about timestamps.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TimestampProbe {
    /// The interface probed (the tester's RX port).
    pub interface: String,
    /// What it offers, when the probe worked.
    pub capabilities: Option<Capabilities>,
    /// The source the trials used.
    pub used: String,
    /// Why that one.
    pub reason: String,
    /// The clocks measured: the one used first.
    pub clocks: Vec<ClockFigures>,
}

impl TimestampProbe {
    /// Probes the tester's RX `interface` in `ns` and measures the clocks, for trials whose
    /// ports are AF_XDP (`afxdp` true) or a kernel socket.
    pub fn run(ns: &str, interface: &str, afxdp: bool) -> TimestampProbe {
        let probed = Capabilities::probe(ns, interface);
        let capabilities = probed.as_ref().ok().copied();
        let offered = capabilities.map_or("unknown", |c| c.best_rx());
        let reason = match (&probed, afxdp) {
            (Err(error), _) => format!("{error}; the TSC needs no kernel support"),
            (Ok(_), true) => format!(
                "{interface} offers {offered} RX stamps, but AF_XDP frames bypass the socket \
                 layer where SO_TIMESTAMPING stamps are taken: TX and RX are stamped from the \
                 TSC in the tester process (one clock, no synchronisation)"
            ),
            (Ok(_), false) => format!(
                "{interface} offers {offered} RX stamps; the tester stamps TX and RX from the \
                 TSC in its own process so that both ends use one clock"
            ),
        };
        TimestampProbe {
            interface: interface.into(),
            capabilities,
            used: "TSC (TX and RX in the tester process)".into(),
            reason,
            clocks: vec![measure_tsc(), measure_system_clock()],
        }
    }

    /// The measured resolution of the source used, nanoseconds.
    pub fn resolution_ns(&self) -> Option<f64> {
        self.clocks.first().map(|c| c.resolution_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ethtool_output_gives_the_capabilities() {
        let veth = "Time stamping parameters for wst-t1:\nCapabilities:\n\tsoftware-transmit\n\
                    \tsoftware-receive\n\tsoftware-system-clock\nPTP Hardware Clock: none\n\
                    Hardware Transmit Timestamp Modes: none\nHardware Receive Filter Modes: none\n";
        let caps = Capabilities::parse(veth).unwrap();
        assert_eq!(
            caps,
            Capabilities {
                software_receive: true,
                software_transmit: true,
                ..Capabilities::default()
            }
        );
        assert_eq!(caps.best_rx(), "kernel software");
        let nic = "Time stamping parameters for eth0:\nCapabilities:\n\
                   \thardware-transmit (SOF_TIMESTAMPING_TX_HARDWARE)\n\
                   \tsoftware-transmit (SOF_TIMESTAMPING_TX_SOFTWARE)\n\
                   \thardware-receive (SOF_TIMESTAMPING_RX_HARDWARE)\n\
                   \tsoftware-receive (SOF_TIMESTAMPING_RX_SOFTWARE)\n\
                   \thardware-raw-clock (SOF_TIMESTAMPING_RAW_HARDWARE)\nPTP Hardware Clock: 2\n";
        let caps = Capabilities::parse(nic).unwrap();
        assert!(caps.hardware_receive && caps.hardware_transmit && caps.software_receive);
        assert_eq!(caps.phc_index, Some(2));
        assert_eq!(caps.best_rx(), "NIC hardware");
        assert_eq!(Capabilities::parse("ethtool: bad command line"), None);
        assert_eq!(
            Capabilities::parse("Capabilities:\n").unwrap().best_rx(),
            "none"
        );
    }

    #[test]
    fn the_resolution_is_the_smallest_nonzero_step() {
        assert_eq!(smallest_step(&[10, 10, 10, 17, 17, 20, 40]), Some(3));
        assert_eq!(smallest_step(&[5, 5, 5]), None);
        assert_eq!(smallest_step(&[5]), None);
        // A clock stepping back (another core's counter) is not a step.
        assert_eq!(smallest_step(&[100, 90, 95]), Some(5));
        let mut ticks = [0u64, 0, 0, 1000, 1000, 2000].into_iter();
        let clock = measure("coarse", 2.0, move || ticks.next().unwrap_or(2000));
        assert_eq!(clock.resolution_ns, 2000.0);
        assert!(clock.read_cost_ns > 0.0);
    }

    #[test]
    fn the_tsc_reads_finer_than_100_ns_and_cheaply() {
        let tsc = measure_tsc();
        assert!(
            tsc.resolution_ns > 0.0 && tsc.resolution_ns <= 100.0,
            "{tsc:?}"
        );
        assert!(tsc.read_cost_ns < 10_000.0, "{tsc:?}");
    }
}
