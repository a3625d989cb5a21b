//! The router's interfaces: for each port, its MAC address and its IPv4/IPv6 addresses with
//! their prefix lengths.
//!
//! Every router stage asks the same few questions of this table: the MAC to put in front of a
//! packet leaving a port (hot path: an indexed read), whether an address is the router's own on
//! a port (ARP and NDP answers), whether a neighbour lies on a port's link (learning only
//! neighbours the port is connected to, so a hostile ARP cannot poison arbitrary addresses),
//! and which of its addresses the router speaks from towards a host (ICMP errors, ARP and NDP
//! requests). Interfaces have a handful of addresses, so the control-path questions are linear
//! scans; the MACs sit in their own array indexed by port.

use std::net::{Ipv4Addr, Ipv6Addr};

use wirespeed_packet::wire::EthernetAddress;

/// One port as a router interface.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Interface {
    /// The worker's port index.
    pub port: u16,
    /// Source MAC of everything the router sends on this port; frames to it are the router's.
    pub mac: EthernetAddress,
    /// Addresses with prefix lengths; each gives a connected route and a local address.
    pub ipv4: Vec<(Ipv4Addr, u8)>,
    /// Addresses with prefix lengths; each gives a connected route and a local address.
    pub ipv6: Vec<(Ipv6Addr, u8)>,
}

fn mask4(len: u8) -> u32 {
    if len == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(len.min(32)))
    }
}

fn mask6(len: u8) -> u128 {
    if len == 0 {
        0
    } else {
        u128::MAX << (128 - u32::from(len.min(128)))
    }
}

/// Whether `addr` is an IPv6 link-local unicast address (fe80::/10): on the link of every port.
pub fn is_link_local(addr: Ipv6Addr) -> bool {
    addr.to_bits() >> 118 == 0xfe80 >> 6
}

/// The router's interfaces, indexed by port.
#[derive(Clone, Debug, Default)]
pub struct Interfaces {
    by_port: Vec<Option<Interface>>,
    macs: Vec<EthernetAddress>,
}

impl Interfaces {
    /// The table of `list`; a later interface for the same port replaces an earlier one.
    pub fn new(list: Vec<Interface>) -> Self {
        let ports = list
            .iter()
            .map(|i| usize::from(i.port) + 1)
            .max()
            .unwrap_or(0);
        let mut by_port = vec![None; ports];
        let mut macs = vec![EthernetAddress([0; 6]); ports];
        for interface in list {
            let port = usize::from(interface.port);
            macs[port] = interface.mac;
            by_port[port] = Some(interface);
        }
        Interfaces { by_port, macs }
    }

    /// The interface on `port`.
    pub fn get(&self, port: u16) -> Option<&Interface> {
        self.by_port.get(usize::from(port))?.as_ref()
    }

    /// Every interface, by port.
    pub fn iter(&self) -> impl Iterator<Item = &Interface> {
        self.by_port.iter().flatten()
    }

    /// The MAC of `port` (hot path).
    #[inline]
    pub fn mac(&self, port: u16) -> Option<EthernetAddress> {
        self.macs.get(usize::from(port)).copied()
    }

    /// Whether `addr` is one of `port`'s IPv4 addresses.
    pub fn owns_v4(&self, port: u16, addr: Ipv4Addr) -> bool {
        self.get(port)
            .is_some_and(|i| i.ipv4.iter().any(|&(a, _)| a == addr))
    }

    /// Whether `addr` is one of `port`'s IPv6 addresses.
    pub fn owns_v6(&self, port: u16, addr: Ipv6Addr) -> bool {
        self.get(port)
            .is_some_and(|i| i.ipv6.iter().any(|&(a, _)| a == addr))
    }

    /// Whether `addr` lies in one of `port`'s IPv4 subnets.
    pub fn on_link_v4(&self, port: u16, addr: Ipv4Addr) -> bool {
        self.get(port).is_some_and(|i| {
            i.ipv4.iter().any(|&(a, len)| {
                let mask = mask4(len);
                a.to_bits() & mask == addr.to_bits() & mask
            })
        })
    }

    /// Whether `addr` lies in one of `port`'s IPv6 subnets, or is link-local.
    pub fn on_link_v6(&self, port: u16, addr: Ipv6Addr) -> bool {
        is_link_local(addr)
            || self.get(port).is_some_and(|i| {
                i.ipv6.iter().any(|&(a, len)| {
                    let mask = mask6(len);
                    a.to_bits() & mask == addr.to_bits() & mask
                })
            })
    }

    /// The IPv4 address the router speaks from on `port` towards `peer`: one in the peer's
    /// subnet, else the port's first.
    pub fn source_v4(&self, port: u16, peer: Ipv4Addr) -> Option<Ipv4Addr> {
        let interface = self.get(port)?;
        interface
            .ipv4
            .iter()
            .find(|&&(a, len)| a.to_bits() & mask4(len) == peer.to_bits() & mask4(len))
            .or(interface.ipv4.first())
            .map(|&(a, _)| a)
    }

    /// The IPv6 address the router speaks from on `port` towards `peer`: one in the peer's
    /// subnet, else the port's first.
    pub fn source_v6(&self, port: u16, peer: Ipv6Addr) -> Option<Ipv6Addr> {
        let interface = self.get(port)?;
        interface
            .ipv6
            .iter()
            .find(|&&(a, len)| a.to_bits() & mask6(len) == peer.to_bits() & mask6(len))
            .or(interface.ipv6.first())
            .map(|&(a, _)| a)
    }

    /// The port whose subnets hold `addr` (the longest such subnet wins).
    pub fn port_for_v4(&self, addr: Ipv4Addr) -> Option<u16> {
        self.iter()
            .flat_map(|i| i.ipv4.iter().map(move |&(a, len)| (i.port, a, len)))
            .filter(|&(_, a, len)| a.to_bits() & mask4(len) == addr.to_bits() & mask4(len))
            .max_by_key(|&(_, _, len)| len)
            .map(|(port, _, _)| port)
    }

    /// The port whose subnets hold `addr` (the longest such subnet wins).
    pub fn port_for_v6(&self, addr: Ipv6Addr) -> Option<u16> {
        self.iter()
            .flat_map(|i| i.ipv6.iter().map(move |&(a, len)| (i.port, a, len)))
            .filter(|&(_, a, len)| a.to_bits() & mask6(len) == addr.to_bits() & mask6(len))
            .max_by_key(|&(_, _, len)| len)
            .map(|(port, _, _)| port)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_ownership_links_and_sources() {
        let interfaces = Interfaces::new(vec![Interface {
            port: 1,
            mac: EthernetAddress([2, 0, 0, 0, 1, 1]),
            ipv4: vec![
                (Ipv4Addr::new(10, 1, 0, 1), 24),
                (Ipv4Addr::new(10, 9, 0, 1), 16),
            ],
            ipv6: vec![("2001:db8:1::1".parse().unwrap(), 64)],
        }]);
        assert_eq!(interfaces.mac(1), Some(EthernetAddress([2, 0, 0, 0, 1, 1])));
        assert_eq!(interfaces.mac(0), Some(EthernetAddress([0; 6])));
        assert!(interfaces.get(0).is_none());
        assert!(interfaces.owns_v4(1, Ipv4Addr::new(10, 1, 0, 1)));
        assert!(!interfaces.owns_v4(0, Ipv4Addr::new(10, 1, 0, 1)));
        assert!(interfaces.on_link_v4(1, Ipv4Addr::new(10, 9, 200, 3)));
        assert!(!interfaces.on_link_v4(1, Ipv4Addr::new(10, 2, 0, 3)));
        assert_eq!(
            interfaces.source_v4(1, Ipv4Addr::new(10, 9, 3, 3)),
            Some(Ipv4Addr::new(10, 9, 0, 1))
        );
        assert_eq!(
            interfaces.source_v4(1, Ipv4Addr::new(192, 0, 2, 1)),
            Some(Ipv4Addr::new(10, 1, 0, 1))
        );
        assert!(interfaces.on_link_v6(1, "fe80::7".parse().unwrap()));
        assert!(interfaces.on_link_v6(1, "2001:db8:1::9".parse().unwrap()));
        assert!(!interfaces.on_link_v6(1, "2001:db8:2::9".parse().unwrap()));
        assert_eq!(
            interfaces.port_for_v6("2001:db8:1::9".parse().unwrap()),
            Some(1)
        );
        assert_eq!(interfaces.port_for_v4(Ipv4Addr::new(11, 0, 0, 1)), None);
    }
}
