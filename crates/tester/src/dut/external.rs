//! A DuT the tester does not configure: a hardware switch, another server, a box someone else
//! set up, wired to two interfaces of the namespace the tester runs in.
//!
//! The tester sends on `tx` and counts what comes back on `rx`; it changes nothing on the DuT
//! and cannot see inside it, so what it must know comes from the user: the destination MAC of
//! the frames (the DuT's own on the `tx` side when it routes; by default `rx`'s, which a switch
//! forwards to the port it learnt it on or floods), and whether the DuT routes, in which case a
//! frame comes back from the DuT's MAC on the `rx` side to `rx`'s, its TTL (hop limit) one
//! lower. That is what the probe frames that prove the DuT forwards before it is measured
//! ([`super::probe::verify`]) are compared with. The frames go from `tx`'s lab address
//! (198.18.0.1, 2001:2:0:0::1) to the generator's prefix (198.19.0.0/16, 2001:2:0:ff::/64),
//! which a routing DuT must route towards `rx`.

use std::path::Path;

use wirespeed_lab::{HERE, PortPair};

use super::linux_router::routed;
use super::{Dut, DutError, Wiring};

/// What the tester must be told about an external DuT.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExternalConfig {
    /// The tester's sending interface, wired to the DuT's ingress.
    pub tx: String,
    /// The tester's receiving interface, wired to the DuT's egress.
    pub rx: String,
    /// The DuT's MAC on the `tx` side, the frames' destination; `None` addresses them to `rx`.
    pub dut_mac: Option<[u8; 6]>,
    /// The DuT's MAC on the `rx` side when it routes: the source of the frames it returns.
    pub dut_egress_mac: Option<[u8; 6]>,
}

/// Why an external DuT cannot be measured as given; says what to change.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ExternalError {
    #[error(
        "interface {0} does not exist in the network namespace wirespeed runs in; give --tx and \
         --rx interfaces that `ip link` lists here, or run wirespeed in their namespace \
         (`ip netns exec NS wirespeed ...`)"
    )]
    NoInterface(String),
    #[error(
        "--tx and --rx are both {0}; the tester sends on one interface and receives on another"
    )]
    SameInterface(String),
    #[error(
        "a routing DuT (--dut-egress-mac) forwards only frames addressed to it: give its MAC on \
         the --tx side with --dut-mac"
    )]
    RoutedWithoutMac,
    #[error("reading {path}: {detail}")]
    Read { path: String, detail: String },
}

/// The external DuT's driver: it sets nothing up and tears nothing down.
#[derive(Debug)]
pub struct ExternalDut {
    addressed: bool,
    routed: bool,
    commands: Vec<String>,
}

impl ExternalDut {
    pub const NAME: &'static str = "external";

    /// The driver and the wiring for `config`, after checking it: both interfaces exist here
    /// and differ, and a routing DuT has a MAC to address.
    pub fn wire(config: &ExternalConfig) -> Result<(ExternalDut, Wiring), ExternalError> {
        if config.tx == config.rx {
            return Err(ExternalError::SameInterface(config.tx.clone()));
        }
        if config.dut_egress_mac.is_some() && config.dut_mac.is_none() {
            return Err(ExternalError::RoutedWithoutMac);
        }
        let tx = Interface::read(&config.tx)?;
        let rx = Interface::read(&config.rx)?;
        let pair = |index: u16, tester: &Interface, dut_mac: Option<[u8; 6]>| PortPair {
            tester_if: tester.name.clone(),
            dut_if: String::new(),
            tester_mac: tester.mac,
            dut_mac: dut_mac.unwrap_or_default(),
            tester_ipv4: std::net::Ipv4Addr::new(198, 18, index as u8, 1),
            dut_ipv4: std::net::Ipv4Addr::new(198, 18, index as u8, 254),
            tester_ipv6: std::net::Ipv6Addr::new(0x2001, 2, 0, index, 0, 0, 0, 1),
            dut_ipv6: std::net::Ipv6Addr::new(0x2001, 2, 0, index, 0, 0, 0, 0xfe),
        };
        let wiring = Wiring {
            tester_ns: HERE.into(),
            dut_ns: HERE.into(),
            ingress: pair(0, &tx, config.dut_mac),
            egress: pair(1, &rx, config.dut_egress_mac),
            mtu: tx.mtu.min(rx.mtu),
            dut_host: None,
        };
        let dut = ExternalDut {
            addressed: config.dut_mac.is_some(),
            routed: config.dut_egress_mac.is_some(),
            commands: Vec::new(),
        };
        Ok((dut, wiring))
    }
}

/// One of the tester's interfaces as /sys shows it in this namespace.
struct Interface {
    name: String,
    mac: [u8; 6],
    mtu: u32,
}

impl Interface {
    fn read(name: &str) -> Result<Interface, ExternalError> {
        // A name with a slash would read another file of /sys: no interface has one.
        let dir = Path::new("/sys/class/net").join(name);
        if name.is_empty() || name.contains('/') || !dir.is_dir() {
            return Err(ExternalError::NoInterface(name.into()));
        }
        let read = |file: &str| {
            let path = dir.join(file);
            std::fs::read_to_string(&path)
                .map(|text| text.trim().to_owned())
                .map_err(|error| ExternalError::Read {
                    path: path.display().to_string(),
                    detail: error.to_string(),
                })
        };
        let parse_error = |file: &str, text: &str| ExternalError::Read {
            path: dir.join(file).display().to_string(),
            detail: format!("unexpected contents {text:?}"),
        };
        let mac_text = read("address")?;
        let mac = mac_text
            .parse::<wirespeed_packet::wire::EthernetAddress>()
            .map_err(|_| parse_error("address", &mac_text))?
            .0;
        let mtu_text = read("mtu")?;
        let mtu = mtu_text
            .parse()
            .map_err(|_| parse_error("mtu", &mtu_text))?;
        Ok(Interface {
            name: name.into(),
            mac,
            mtu,
        })
    }
}

impl Dut for ExternalDut {
    fn name(&self) -> String {
        Self::NAME.into()
    }

    fn description(&self) -> String {
        format!(
            "external DuT, not configured by the tester; {}",
            match (self.addressed, self.routed) {
                (_, true) => "routes (frames to its MAC, back from its other MAC, TTL one lower)",
                (true, false) => "frames addressed to its MAC come back unchanged",
                (false, false) => "switches (frames to the receiving port's MAC, back unchanged)",
            }
        )
    }

    fn setup(&mut self, wiring: &Wiring) -> Result<(), DutError> {
        self.commands.push(format!(
            "# nothing configured: the DuT is external, wired to tx {} and rx {}",
            wiring.ingress.tester_if, wiring.egress.tester_if
        ));
        Ok(())
    }

    fn teardown(&mut self) -> Result<(), DutError> {
        Ok(())
    }

    fn commands(&self) -> &[String] {
        &self.commands
    }

    fn destination_mac(&self, wiring: &Wiring) -> [u8; 6] {
        if self.addressed {
            wiring.ingress.dut_mac
        } else {
            wiring.egress.tester_mac
        }
    }

    fn forwarded(&self, wiring: &Wiring, frame: &[u8]) -> Vec<u8> {
        if self.routed {
            routed(frame, wiring.egress.dut_mac, wiring.egress.tester_mac)
        } else {
            frame.to_vec()
        }
    }

    /// Unknown: the tester cannot ask.
    fn version(&self) -> Option<String> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(tx: &str, rx: &str) -> ExternalConfig {
        ExternalConfig {
            tx: tx.into(),
            rx: rx.into(),
            ..ExternalConfig::default()
        }
    }

    #[test]
    fn a_missing_interface_is_named_with_the_fix() {
        let error = ExternalDut::wire(&config("lo", "wsx-no-such0")).unwrap_err();
        assert_eq!(error, ExternalError::NoInterface("wsx-no-such0".into()));
        assert!(error.to_string().contains("ip netns exec NS"), "{error}");
        assert!(matches!(
            ExternalDut::wire(&config("../lo", "lo")),
            Err(ExternalError::NoInterface(_))
        ));
        assert_eq!(
            ExternalDut::wire(&config("lo", "lo")).unwrap_err(),
            ExternalError::SameInterface("lo".into())
        );
        let routed = ExternalConfig {
            dut_egress_mac: Some([2, 0, 0, 0, 0, 1]),
            ..config("lo", "wsx-no-such0")
        };
        assert_eq!(
            ExternalDut::wire(&routed).unwrap_err(),
            ExternalError::RoutedWithoutMac
        );
    }

    #[test]
    fn a_switch_gets_frames_for_rx_and_a_router_for_itself() {
        let wiring = |dut_mac, dut_egress_mac| {
            let pair = |mac: u8| PortPair {
                tester_if: format!("x{mac}"),
                dut_if: String::new(),
                tester_mac: [2, 0, 0, 0, 0, mac],
                dut_mac: [0; 6],
                tester_ipv4: [198, 18, 0, 1].into(),
                dut_ipv4: [198, 18, 0, 254].into(),
                tester_ipv6: std::net::Ipv6Addr::LOCALHOST,
                dut_ipv6: std::net::Ipv6Addr::LOCALHOST,
            };
            let (mut ingress, mut egress) = (pair(1), pair(2));
            ingress.dut_mac = dut_mac;
            egress.dut_mac = dut_egress_mac;
            Wiring {
                tester_ns: HERE.into(),
                dut_ns: HERE.into(),
                ingress,
                egress,
                mtu: 1500,
                dut_host: None,
            }
        };
        let switch = ExternalDut {
            addressed: false,
            routed: false,
            commands: Vec::new(),
        };
        let plain = wiring([0; 6], [0; 6]);
        let frame = crate::generator::Template::new(&Default::default())
            .unwrap()
            .bytes()
            .to_vec();
        assert_eq!(switch.destination_mac(&plain), [2, 0, 0, 0, 0, 2]);
        assert_eq!(switch.forwarded(&plain, &frame), frame);
        let router = ExternalDut {
            addressed: true,
            routed: true,
            commands: Vec::new(),
        };
        let routing = wiring([2, 0, 0, 0, 0, 0xa], [2, 0, 0, 0, 0, 0xb]);
        assert_eq!(router.destination_mac(&routing), [2, 0, 0, 0, 0, 0xa]);
        let back = router.forwarded(&routing, &frame);
        assert_eq!(back[..12], [2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 0xb]);
        assert_eq!(back[22], frame[22] - 1);
    }
}
