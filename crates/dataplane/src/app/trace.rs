//! Packet tracing shared by the apps: the ring that keeps the last N packets' records, and the
//! two ends every record has — the packet as it arrived ([`Arrival`]) and what became of it
//! ([`Disposition`]).
//!
//! Each app defines its own record type (one field per stage: that stage's per-packet outcome,
//! whose `Display` is the stage's trace line) and keeps it in a [`TraceRing`]. The ring is
//! allocated only when tracing is switched on (`set_trace(records)` on the app, between
//! batches); an app whose ring [`is_on`](TraceRing::is_on) runs its stages' `TRACE` variants
//! and pushes one record per packet, and an app whose ring is off never touches it, so the
//! untraced loop pays nothing for tracing (VPP keeps its trace out of the untraced loop the
//! same way).

use std::fmt;
use std::net::{IpAddr, Ipv6Addr};

use wirespeed_packet::flow_key::FlowKey;
use wirespeed_packet::{Desc, DropReason, Meta};

const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_ARP: u16 = 0x0806;
const ETHERTYPE_IPV6: u16 = 0x86dd;

/// The last traced records, oldest overwritten first. Empty (and free) while tracing is off.
#[derive(Debug)]
pub struct TraceRing<R> {
    records: Box<[R]>,
    next: usize,
    len: usize,
}

impl<R> Default for TraceRing<R> {
    fn default() -> Self {
        TraceRing {
            records: Box::default(),
            next: 0,
            len: 0,
        }
    }
}

impl<R: Copy> TraceRing<R> {
    /// A ring of `records` slots (0: tracing off), each starting as `blank`.
    pub fn new(records: usize, blank: R) -> Self {
        TraceRing {
            records: vec![blank; records].into_boxed_slice(),
            next: 0,
            len: 0,
        }
    }

    /// Whether tracing is on (the ring has room for at least one record).
    pub fn is_on(&self) -> bool {
        !self.records.is_empty()
    }

    /// Keeps `record`, overwriting the oldest when the ring is full; nothing when tracing is off.
    pub fn push(&mut self, record: R) {
        let size = self.records.len();
        let Some(slot) = self.records.get_mut(self.next) else {
            return;
        };
        *slot = record;
        self.next = (self.next + 1) % size;
        self.len = (self.len + 1).min(size);
    }

    /// The kept records, oldest first.
    pub fn records(&self) -> Vec<R> {
        let size = self.records.len().max(1);
        let start = (self.next + size - self.len) % size;
        (0..self.len)
            .filter_map(|i| self.records.get((start + i) % size))
            .copied()
            .collect()
    }
}

/// A packet as it arrived: its port, length and, from its flow key, its addresses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Arrival {
    pub in_port: u16,
    pub len: u16,
    /// EtherType after any VLAN tags (0: the frame did not parse).
    pub ethertype: u16,
    /// Source and destination IP (IPv4 mapped), or ARP's sender and target addresses.
    pub src: [u8; 16],
    pub dst: [u8; 16],
}

impl Arrival {
    /// The arrival of the packet `desc` whose flow key is `key` (call before any rewrite).
    pub fn new(desc: &Desc, key: &FlowKey) -> Arrival {
        Arrival {
            in_port: desc.port,
            len: desc.len,
            ethertype: key.ethertype,
            src: key.ip_src,
            dst: key.ip_dst,
        }
    }
}

/// A key address as text: IPv4 when mapped, IPv6 otherwise.
fn address(bytes: [u8; 16]) -> IpAddr {
    let v6 = Ipv6Addr::from(bytes);
    match v6.to_ipv4_mapped() {
        Some(v4) => IpAddr::V4(v4),
        None => IpAddr::V6(v6),
    }
}

/// `port 0 len 60 10.0.0.2 -> 10.1.0.2`, `port 0 len 60 arp 10.0.0.2 -> 10.0.0.1`,
/// `port 0 len 60 ethertype 0x88cc`.
impl fmt::Display for Arrival {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "port {} len {} ", self.in_port, self.len)?;
        let (src, dst) = (address(self.src), address(self.dst));
        match self.ethertype {
            ETHERTYPE_IPV4 | ETHERTYPE_IPV6 => write!(f, "{src} -> {dst}"),
            ETHERTYPE_ARP => write!(f, "arp {src} -> {dst}"),
            other => write!(f, "ethertype {other:#06x}"),
        }
    }
}

/// What became of a packet once the app was done with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Disposition {
    /// Sent out of this port.
    Out(u16),
    Dropped(DropReason),
    /// Kept by the app (e.g. waiting for a neighbour); it left the batch.
    Held,
}

impl Disposition {
    /// The disposition a packet's metadata gives it.
    pub fn of(meta: &Meta) -> Disposition {
        match meta.drop {
            Some(reason) => Disposition::Dropped(reason),
            None if meta.out_port == Meta::NO_PORT => Disposition::Dropped(DropReason::NoOutput),
            None => Disposition::Out(meta.out_port),
        }
    }
}

/// `out port 1`, `dropped (ttl_expired)`, `held`.
impl fmt::Display for Disposition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Disposition::Out(port) => write!(f, "out port {port}"),
            Disposition::Dropped(reason) => write!(f, "dropped ({})", reason.name()),
            Disposition::Held => f.write_str("held"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    #[test]
    fn the_ring_keeps_the_last_records_oldest_first() {
        let mut ring = TraceRing::new(3, 0u32);
        assert!(ring.is_on());
        assert!(ring.records().is_empty());
        for record in 1..=5 {
            ring.push(record);
        }
        assert_eq!(ring.records(), [3, 4, 5]);
        let mut off = TraceRing::<u32>::default();
        assert!(!off.is_on());
        off.push(1);
        assert!(off.records().is_empty());
    }

    #[test]
    fn arrivals_and_dispositions_read_as_text() {
        let key = FlowKey {
            ethertype: ETHERTYPE_IPV4,
            ip_src: FlowKey::map_ipv4(Ipv4Addr::new(10, 0, 0, 2)),
            ip_dst: FlowKey::map_ipv4(Ipv4Addr::new(10, 1, 0, 2)),
            ..FlowKey::default()
        };
        let desc = Desc {
            len: 60,
            port: 2,
            ..Desc::default()
        };
        let arrival = Arrival::new(&desc, &key);
        assert_eq!(arrival.to_string(), "port 2 len 60 10.0.0.2 -> 10.1.0.2");
        let lldp = Arrival {
            ethertype: 0x88cc,
            ..arrival
        };
        assert_eq!(lldp.to_string(), "port 2 len 60 ethertype 0x88cc");
        let v6 = Arrival {
            ethertype: ETHERTYPE_IPV6,
            src: "2001:db8::2".parse::<Ipv6Addr>().unwrap().octets(),
            ..arrival
        };
        assert!(v6.to_string().starts_with("port 2 len 60 2001:db8::2 -> "));
        let sent = Meta {
            out_port: 1,
            ..Meta::EMPTY
        };
        assert_eq!(Disposition::of(&sent).to_string(), "out port 1");
        let dropped = Meta {
            drop: Some(DropReason::TtlExpired),
            ..Meta::EMPTY
        };
        assert_eq!(
            Disposition::of(&dropped).to_string(),
            "dropped (ttl_expired)"
        );
        assert_eq!(Disposition::Held.to_string(), "held");
    }
}
