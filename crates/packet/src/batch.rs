//! Batches: the unit every port and stage works on.
//!
//! A [`Batch`] is a caller-owned, fixed-capacity array of [`Desc`]riptors (which frame, where in
//! it, how long, from which port and queue) and a parallel array of [`Meta`] (what the parse stage
//! learned about each packet and what the pipeline decided). It is allocated once when a worker
//! starts; pushing and clearing never allocate. Descriptors are small and `Copy`: moving a packet
//! from one batch to another copies 12 bytes, never the frame.

use crate::pool::FrameId;

/// The largest batch any port or stage handles.
pub const MAX_BATCH: usize = 256;

/// Bytes every port leaves free in front of a received packet, so that stages can push headers
/// (VLAN tags, encapsulations) in place. 256 is what XDP reserves in front of a packet too.
pub const HEADROOM: u16 = 256;

/// Where one packet is: a frame of the pool, the packet's first byte in it and its length, and
/// the port and queue it arrived on (or leaves by).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct Desc {
    pub frame: FrameId,
    /// Offset of the first byte of the packet inside the frame (headroom before it).
    pub offset: u16,
    pub len: u16,
    pub port: u16,
    pub queue: u16,
}

/// Why a packet was dropped. Every stage counts its drops per reason; the numeric values index
/// counter arrays, so they are dense and start at zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum DropReason {
    /// Shorter than the headers it announces (including less than an Ethernet header).
    Truncated = 0,
    /// Longer than the port's MTU or the frame it was received into.
    Oversize,
    /// More VLAN tags than the parser supports.
    VlanTooDeep,
    /// IPv4 version/IHL invalid or header options overrun the header.
    BadIpv4Header,
    /// IPv4 total length below the header length or beyond the frame.
    BadIpv4Length,
    /// IPv4 header checksum wrong (checked where a stage forwards by IP).
    BadIpv4Checksum,
    /// IPv6 version wrong, payload length beyond the frame or an extension header chain that
    /// overruns the packet or is too long.
    BadIpv6Header,
    /// TCP/UDP/ICMP header truncated or inconsistent.
    BadL4Header,
    /// The output port's TX ring would not take the packet.
    TxFull,
    /// No decision sent the packet anywhere (e.g. a cross-connect without a peer).
    NoOutput,
    /// The router has no route for the destination.
    NoRoute,
    /// TTL or hop limit reached zero.
    TtlExpired,
    /// The next hop's MAC is unknown and its queue of waiting packets is full.
    NoNeighbour,
    /// A source address that must never be forwarded (loopback, multicast, ...).
    MartianSource,
    /// An IPv4 packet with options, refused by policy.
    Ipv4Options,
    /// An ACL rule denied the packet.
    AclDenied,
    /// The frame's VLAN is not allowed on the port it arrived on.
    VlanFiltered,
    /// The destination is on the port the frame came from (a bridge does not send it back).
    SameSegment,
    /// No flow matched and the table's miss action is drop.
    TableMiss,
    /// The app had no room left for the packets it creates in this batch (flood copies, ICMP
    /// errors, ARP replies).
    EmitOverflow,
    /// No free frame for a packet the app had to create.
    PoolEmpty,
    /// A control packet (ARP, NDP) the data plane answered or consumed itself.
    Consumed,
}

impl DropReason {
    /// Number of reasons; the size of a per-reason counter array.
    pub const COUNT: usize = DropReason::Consumed as usize + 1;
    /// Every reason, in counter order.
    pub const ALL: [DropReason; Self::COUNT] = [
        DropReason::Truncated,
        DropReason::Oversize,
        DropReason::VlanTooDeep,
        DropReason::BadIpv4Header,
        DropReason::BadIpv4Length,
        DropReason::BadIpv4Checksum,
        DropReason::BadIpv6Header,
        DropReason::BadL4Header,
        DropReason::TxFull,
        DropReason::NoOutput,
        DropReason::NoRoute,
        DropReason::TtlExpired,
        DropReason::NoNeighbour,
        DropReason::MartianSource,
        DropReason::Ipv4Options,
        DropReason::AclDenied,
        DropReason::VlanFiltered,
        DropReason::SameSegment,
        DropReason::TableMiss,
        DropReason::EmitOverflow,
        DropReason::PoolEmpty,
        DropReason::Consumed,
    ];

    /// The name used in counters and stats output.
    pub fn name(self) -> &'static str {
        match self {
            DropReason::Truncated => "truncated",
            DropReason::Oversize => "oversize",
            DropReason::VlanTooDeep => "vlan_too_deep",
            DropReason::BadIpv4Header => "bad_ipv4_header",
            DropReason::BadIpv4Length => "bad_ipv4_length",
            DropReason::BadIpv4Checksum => "bad_ipv4_checksum",
            DropReason::BadIpv6Header => "bad_ipv6_header",
            DropReason::BadL4Header => "bad_l4_header",
            DropReason::TxFull => "tx_full",
            DropReason::NoOutput => "no_output",
            DropReason::NoRoute => "no_route",
            DropReason::TtlExpired => "ttl_expired",
            DropReason::NoNeighbour => "no_neighbour",
            DropReason::MartianSource => "martian_source",
            DropReason::Ipv4Options => "ipv4_options",
            DropReason::AclDenied => "acl_denied",
            DropReason::VlanFiltered => "vlan_filtered",
            DropReason::SameSegment => "same_segment",
            DropReason::TableMiss => "table_miss",
            DropReason::EmitOverflow => "emit_overflow",
            DropReason::PoolEmpty => "pool_empty",
            DropReason::Consumed => "consumed",
        }
    }
}

/// VLAN tags a frame may carry, as Linux bounds a stack (`VLAN_MAX_DEPTH`); one more is
/// [`DropReason::VlanTooDeep`]. Every tag is kept in [`Meta::vlan`], so a stage that pops one
/// still knows the next.
pub const MAX_VLAN_TAGS: usize = 8;

/// What is known about one packet of a batch. One cache line, checked at compile time, so that
/// the metadata of a batch of 32 is 32 lines the worker keeps hot.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C, align(64))]
pub struct Meta {
    /// TSC (or other clock) reading when the packet was received; 0 when not recorded.
    pub rx_time: u64,
    /// CRC32C hash of the flow key, filled by the parse stage (0 when the pipeline's parse was
    /// built without it: `Parse::without_flow_hash` in the data plane).
    pub flow_hash: u32,
    /// Ethertype after all VLAN tags (0 until parsed).
    pub ethertype: u16,
    /// Offset of the L3 header from the packet's first byte (0 when there is none).
    pub l3_offset: u16,
    /// Offset of the L4 header from the packet's first byte (0 when there is none).
    pub l4_offset: u16,
    /// Offset of the L4 payload from the packet's first byte (0 when there is none).
    pub payload_offset: u16,
    /// VLAN TCIs, outermost first; `vlan_depth` of them are valid.
    pub vlan: [u16; MAX_VLAN_TAGS],
    pub vlan_depth: u8,
    /// IP protocol / IPv6 next header of the transport (0 when not IP).
    pub ip_proto: u8,
    /// `FLAG_*` bits.
    pub flags: u8,
    /// The pipeline's decision: output port, or [`Meta::NO_PORT`].
    pub out_port: u16,
    /// `Some` once a stage decided to drop the packet.
    pub drop: Option<DropReason>,
}

const _: () = assert!(std::mem::size_of::<Meta>() == 64);

impl Meta {
    /// `out_port` value meaning "not decided".
    pub const NO_PORT: u16 = u16::MAX;
    /// The packet is IPv4.
    pub const FLAG_IPV4: u8 = 1 << 0;
    /// The packet is IPv6.
    pub const FLAG_IPV6: u8 = 1 << 1;
    /// Destination MAC is a group address (broadcast or multicast).
    pub const FLAG_GROUP_DST: u8 = 1 << 2;
    /// The IP packet is a fragment (not the first, or more follow): no L4 header to trust.
    pub const FLAG_FRAGMENT: u8 = 1 << 3;
    /// The parse stage has filled this metadata.
    pub const FLAG_PARSED: u8 = 1 << 7;

    /// Metadata of a packet nothing has looked at yet.
    pub const EMPTY: Meta = Meta {
        rx_time: 0,
        flow_hash: 0,
        ethertype: 0,
        l3_offset: 0,
        l4_offset: 0,
        payload_offset: 0,
        vlan: [0; MAX_VLAN_TAGS],
        vlan_depth: 0,
        ip_proto: 0,
        flags: 0,
        out_port: Meta::NO_PORT,
        drop: None,
    };
}

/// A fixed-capacity batch of descriptors and their metadata.
#[derive(Clone, Debug)]
pub struct Batch {
    descs: Box<[Desc]>,
    meta: Box<[Meta]>,
    len: usize,
}

impl Batch {
    /// A batch of `capacity` packets, clamped to `1..=MAX_BATCH`.
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.clamp(1, MAX_BATCH);
        Self {
            descs: vec![Desc::default(); capacity].into_boxed_slice(),
            meta: vec![Meta::EMPTY; capacity].into_boxed_slice(),
            len: 0,
        }
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline]
    pub fn capacity(&self) -> usize {
        self.descs.len()
    }

    /// Free slots left.
    #[inline]
    pub fn room(&self) -> usize {
        self.descs.len() - self.len
    }

    #[inline]
    pub fn is_full(&self) -> bool {
        self.len == self.descs.len()
    }

    /// Appends a packet with fresh metadata; returns `false` (and leaves the batch unchanged)
    /// when it is full.
    #[inline]
    pub fn push(&mut self, desc: Desc) -> bool {
        self.push_with_meta(desc, Meta::EMPTY)
    }

    /// Appends a packet keeping metadata computed earlier; `false` when full.
    #[inline]
    pub fn push_with_meta(&mut self, desc: Desc, meta: Meta) -> bool {
        if self.len == self.descs.len() {
            return false;
        }
        self.descs[self.len] = desc;
        self.meta[self.len] = meta;
        self.len += 1;
        true
    }

    /// Appends as many of `descs` as fit, each with fresh metadata; returns how many. What a
    /// port receives in bulk: one copy of the descriptors instead of a `push` per packet.
    #[inline]
    pub fn extend_from_slice(&mut self, descs: &[Desc]) -> usize {
        let count = descs.len().min(self.room());
        let end = self.len + count;
        if let (Some(to), Some(from), Some(meta)) = (
            self.descs.get_mut(self.len..end),
            descs.get(..count),
            self.meta.get_mut(self.len..end),
        ) {
            to.copy_from_slice(from);
            meta.fill(Meta::EMPTY);
            self.len = end;
        }
        count
    }

    /// The descriptors of the packets in the batch.
    #[inline]
    pub fn descs(&self) -> &[Desc] {
        &self.descs[..self.len]
    }

    #[inline]
    pub fn descs_mut(&mut self) -> &mut [Desc] {
        &mut self.descs[..self.len]
    }

    /// The metadata of the packets in the batch, index for index with [`Batch::descs`].
    #[inline]
    pub fn meta(&self) -> &[Meta] {
        &self.meta[..self.len]
    }

    #[inline]
    pub fn meta_mut(&mut self) -> &mut [Meta] {
        &mut self.meta[..self.len]
    }

    /// Descriptors and metadata at once, for stages that read one and write the other.
    #[inline]
    pub fn split_mut(&mut self) -> (&mut [Desc], &mut [Meta]) {
        (&mut self.descs[..self.len], &mut self.meta[..self.len])
    }

    /// Forgets every packet (the frames must have been handed on or released first).
    #[inline]
    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// Removes the first `n` packets, keeping the order of the rest (what a port did not take).
    #[inline]
    pub fn consume_front(&mut self, n: usize) {
        let n = n.min(self.len);
        self.descs.copy_within(n..self.len, 0);
        self.meta.copy_within(n..self.len, 0);
        self.len -= n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn desc(frame: u32) -> Desc {
        Desc {
            frame,
            len: 60,
            ..Desc::default()
        }
    }

    #[test]
    fn push_stops_at_capacity() {
        let mut batch = Batch::new(4);
        for i in 0..4 {
            assert!(batch.push(desc(i)));
        }
        assert!(!batch.push(desc(9)));
        assert_eq!(batch.len(), 4);
        assert!(batch.is_full());
    }

    #[test]
    fn consume_front_keeps_the_rest_in_order() {
        let mut batch = Batch::new(8);
        for i in 0..5 {
            batch.push(desc(i));
        }
        batch.meta_mut()[3].out_port = 7;
        batch.consume_front(3);
        assert_eq!(
            batch.descs().iter().map(|d| d.frame).collect::<Vec<_>>(),
            [3, 4]
        );
        assert_eq!(batch.meta()[0].out_port, 7);
        batch.consume_front(10);
        assert!(batch.is_empty());
    }

    #[test]
    fn extend_from_slice_appends_what_fits_with_fresh_metadata() {
        let mut batch = Batch::new(4);
        batch.push(desc(0));
        batch.meta_mut()[0].out_port = 3;
        let more = [desc(1), desc(2), desc(3), desc(4)];
        assert_eq!(batch.extend_from_slice(&more[..1]), 1);
        assert_eq!(batch.extend_from_slice(&more[1..]), 2);
        assert_eq!(batch.extend_from_slice(&more), 0);
        assert_eq!(
            batch.descs().iter().map(|d| d.frame).collect::<Vec<_>>(),
            [0, 1, 2, 3]
        );
        assert_eq!(batch.meta()[0].out_port, 3);
        assert!(batch.meta()[1..].iter().all(|m| *m == Meta::EMPTY));
        // A slot that held a decision before comes back fresh.
        batch.clear();
        assert_eq!(batch.extend_from_slice(&more[..2]), 2);
        assert_eq!(batch.meta()[0], Meta::EMPTY);
    }

    #[test]
    fn capacity_is_clamped() {
        assert_eq!(Batch::new(0).capacity(), 1);
        assert_eq!(Batch::new(10_000).capacity(), MAX_BATCH);
    }

    #[test]
    fn drop_reasons_index_densely() {
        for (i, reason) in DropReason::ALL.iter().enumerate() {
            assert_eq!(*reason as usize, i);
        }
    }
}
