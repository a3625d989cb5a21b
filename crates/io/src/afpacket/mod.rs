//! The AF_PACKET backend: the port that works on every Linux interface.
//!
//! Each queue of an [`AfPacketPort`] is two packet sockets bound to the interface:
//!
//! - **RX**: a `TPACKET_V3` ring by default. The kernel fills blocks of many packets and hands a
//!   whole block to user space (when it is full, or after [`AfPacketConfig::block_timeout_ms`] so
//!   that a lightly loaded port still delivers promptly); the worker walks the block and gives it
//!   back by resetting its status. One status check per block instead of per packet is what makes
//!   V3 the fastest packet-socket ring for receiving, but below the rate that fills a block within
//!   the timeout every packet waits for it (milliseconds: the unit of the timeout). Where latency
//!   matters more, [`RxRingKind::Slots`] takes a `TPACKET_V2` ring instead: one packet per slot,
//!   each handed over as soon as the kernel has written it.
//! - **TX**: a `TPACKET_V2` ring on a second socket with `PACKET_QDISC_BYPASS`: the worker fills
//!   slots and kicks the kernel once per batch with `sendto(MSG_DONTWAIT)`. V2 rather than V3
//!   because the V3 TX ring is a plain slot ring too (the block layout applies to RX only), so V3
//!   gains nothing for TX while V2 TX is the path every user of packet sockets exercises. One
//!   socket can have one version only, hence the second socket; it binds with protocol 0 so it
//!   never receives.
//!
//! **The price of the fallback backend is one copy per packet in each direction.** AF_PACKET
//! cannot receive into or transmit from the worker's [`FramePool`](wirespeed_packet::FramePool):
//! a received packet is copied from the ring into a frame of the pool at
//! [`HEADROOM`](wirespeed_packet::batch::HEADROOM), and a transmitted frame is copied into a TX slot and
//! released to the pool at once. So the port never holds a frame ([`Port::frames_held`] is 0),
//! and AF_XDP against AF_PACKET is a comparison of zero-copy against copying I/O.
//!
//! **Queues are fanout members.** A port opened with `queues: N` creates N socket pairs whose RX
//! sockets join one `PACKET_FANOUT` group; the kernel spreads the interface's traffic over them
//! by [`FanoutMode`] (flow hash by default). Queue *i* is the *i*-th member to join. One
//! [`AfPacketPort::open`] opens every member in order; a worker that owns only some queues opens
//! them with [`AfPacketPort::open_queues`], and the port answers `rx`/`tx` on the other queues
//! with nothing. For [`FanoutMode::QueueMapping`] the member order is the RX queue order, so the
//! queues must be opened in ascending order (one `open` does that).
//!
//! The RX socket ignores packets the host itself sends on the interface (`PACKET_IGNORE_OUTGOING`,
//! or the fanout flag of the same name, and the packet type in each ring header as a second
//! guard), otherwise a forwarder would receive every frame it transmits. The kernel removes a
//! received VLAN tag from the packet data and reports it beside it; the port puts it back, so a
//! frame arrives in the pool byte for byte as it was on the wire. Packets the kernel marks
//! "checksum not ready" (sent by the local stack with checksum offload) are delivered as they
//! are; the interface should belong to the data plane alone, with GRO/LRO off.
//!
//! Interface facts come from `ioctl`s on the port's own socket rather than `/sys/class/net`:
//! sysfs shows the namespace it was mounted in, the socket the namespace it lives in.

mod port;
mod ring;
mod socket;

pub use port::{AfPacketCounters, AfPacketPort};

use wirespeed_packet::batch::HEADROOM;
pub use wirespeed_packet::pool::L2_OVERHEAD;
use wirespeed_packet::pool::{MAX_FRAME_SIZE, MIN_FRAME_SIZE};

/// How the kernel spreads an interface's packets over the fanout members (the port's queues).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum FanoutMode {
    /// By the packet's flow hash: every packet of a flow goes to the same queue.
    #[default]
    Hash,
    /// By the CPU the packet was received on.
    Cpu,
    /// By the interface RX queue the packet arrived on ("qm"): queue *i* gets RX queue *i*.
    QueueMapping,
    /// Packets dealt out in turn ("round-robin"); flows are not kept together.
    RoundRobin,
}

impl FanoutMode {
    /// The name used in configuration and in [`crate::PortInfo::mode`].
    pub fn name(self) -> &'static str {
        match self {
            FanoutMode::Hash => "hash",
            FanoutMode::Cpu => "cpu",
            FanoutMode::QueueMapping => "qm",
            FanoutMode::RoundRobin => "round-robin",
        }
    }

    /// The `PACKET_FANOUT_*` type.
    fn kernel_type(self) -> u32 {
        match self {
            FanoutMode::Hash => libc::PACKET_FANOUT_HASH,
            FanoutMode::Cpu => libc::PACKET_FANOUT_CPU,
            FanoutMode::QueueMapping => libc::PACKET_FANOUT_QM,
            FanoutMode::RoundRobin => libc::PACKET_FANOUT_LB,
        }
    }
}

impl std::str::FromStr for FanoutMode {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "hash" => Ok(FanoutMode::Hash),
            "cpu" => Ok(FanoutMode::Cpu),
            "qm" | "queue_mapping" => Ok(FanoutMode::QueueMapping),
            "round-robin" | "rr" | "lb" => Ok(FanoutMode::RoundRobin),
            other => Err(format!(
                "unknown fanout mode {other:?}; use hash, cpu, qm or round-robin"
            )),
        }
    }
}

/// The layout of the RX ring, i.e. the `TPACKET` version of the RX socket.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum RxRingKind {
    /// `TPACKET_V3`: packets packed into blocks handed over whole, when full or after
    /// [`AfPacketConfig::block_timeout_ms`]. Fewest status checks; adds up to the timeout of
    /// latency at low rates.
    #[default]
    Blocks,
    /// `TPACKET_V2`: one packet per slot of `frame_size` bytes, handed over at once.
    Slots,
}

impl RxRingKind {
    /// The name used in configuration and in [`crate::PortInfo::mode`].
    pub fn name(self) -> &'static str {
        match self {
            RxRingKind::Blocks => "v3",
            RxRingKind::Slots => "v2",
        }
    }
}

impl std::str::FromStr for RxRingKind {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "v3" => Ok(RxRingKind::Blocks),
            "v2" => Ok(RxRingKind::Slots),
            other => Err(format!(
                "unknown RX ring {other:?}; use \"v3\" (blocks: throughput) or \"v2\" (slots: latency)"
            )),
        }
    }
}

/// How to open an AF_PACKET port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AfPacketConfig {
    /// The RX ring's layout. With [`RxRingKind::Slots`] the ring has `block_size / frame_size`
    /// slots per block and `block_timeout_ms` does not apply.
    pub rx_ring: RxRingKind,
    /// Bytes per RX ring block: a multiple of the page size and a power of two, at least
    /// `frame_size`, at most 4 MiB. A block holds about `block_size / (len + 64)` packets.
    pub block_size: u32,
    /// Blocks per RX ring (at least 2).
    pub block_count: u32,
    /// Milliseconds after which the kernel hands over a block that is not full (1..=1000):
    /// the bound on the latency the ring adds at low packet rates.
    pub block_timeout_ms: u32,
    /// Bytes per frame: the pool's frame size (2048 or 4096); also the size of a TX slot. A
    /// received packet must fit in `frame_size - HEADROOM`.
    pub frame_size: u32,
    /// Slots per TX ring (8..=65536).
    pub tx_slots: u32,
    /// Queues of the port = fanout members (1..=64). With 1 there is no fanout group.
    pub queues: u16,
    /// How the kernel spreads packets over the queues.
    pub fanout: FanoutMode,
    /// Fanout group id; `None` derives it from the interface index.
    pub fanout_group: Option<u16>,
    /// Put the interface in promiscuous mode while the port is open (a forwarder needs it on
    /// real NICs; veth delivers every frame anyway).
    pub promiscuous: bool,
}

impl Default for AfPacketConfig {
    fn default() -> Self {
        Self {
            rx_ring: RxRingKind::Blocks,
            block_size: 1 << 16,
            block_count: 64,
            block_timeout_ms: 2,
            frame_size: 2048,
            tx_slots: 1024,
            queues: 1,
            fanout: FanoutMode::Hash,
            fanout_group: None,
            promiscuous: true,
        }
    }
}

impl AfPacketConfig {
    /// Largest MTU this configuration can carry.
    pub fn max_mtu(&self) -> u32 {
        self.frame_size
            .saturating_sub(HEADROOM as u32)
            .saturating_sub(L2_OVERHEAD)
    }

    /// Checks the ring geometry; the error text says what to change.
    fn check(&self) -> Result<(), String> {
        let page = socket::page_size();
        if !self.frame_size.is_power_of_two()
            || !(MIN_FRAME_SIZE..=MAX_FRAME_SIZE).contains(&self.frame_size)
        {
            return Err(format!(
                "frame_size {} must be 2048, 4096, 8192 or 16384 (the pool's frame size)",
                self.frame_size
            ));
        }
        if !self.block_size.is_power_of_two()
            || !self.block_size.is_multiple_of(page)
            || self.block_size < self.frame_size
            || self.block_size > 4 << 20
        {
            return Err(format!(
                "block_size {} must be a power of two, a multiple of the page size ({page}), \
                 at least frame_size ({}) and at most 4 MiB; 65536 is a good start",
                self.block_size, self.frame_size
            ));
        }
        if !(2..=65536).contains(&self.block_count) {
            return Err(format!(
                "block_count {} must be between 2 and 65536",
                self.block_count
            ));
        }
        if self.block_size as u64 * self.block_count as u64 > 1 << 30 {
            return Err(format!(
                "an RX ring of {} blocks of {} bytes exceeds 1 GiB; lower block_count",
                self.block_count, self.block_size
            ));
        }
        if !(1..=1000).contains(&self.block_timeout_ms) {
            return Err(format!(
                "block_timeout_ms {} must be between 1 and 1000",
                self.block_timeout_ms
            ));
        }
        if !(8..=65536).contains(&self.tx_slots) {
            return Err(format!(
                "tx_slots {} must be between 8 and 65536",
                self.tx_slots
            ));
        }
        if !(1..=64).contains(&self.queues) {
            return Err(format!("queues {} must be between 1 and 64", self.queues));
        }
        Ok(())
    }
}

/// Why an AF_PACKET port could not be opened. Every variant names the port and the fix.
#[derive(Debug, thiserror::Error)]
pub enum AfPacketError {
    #[error(
        "port {port}: interface {interface:?} does not exist in this network namespace; check \
         the name with `ip link` and open the port in the interface's namespace"
    )]
    NoInterface { port: String, interface: String },
    #[error(
        "port {port}: AF_PACKET sockets need CAP_NET_RAW; run as root or grant the capability \
         (`setcap cap_net_raw+ep <program>`)"
    )]
    Permission { port: String },
    #[error(
        "port {port}: interface {interface} has MTU {mtu}, but {frame_size}-byte frames carry \
         at most MTU {max_mtu} ({HEADROOM} bytes headroom, {L2_OVERHEAD} bytes Ethernet and \
         VLAN headers); lower it (`ip link set {interface} mtu {max_mtu}`) or use larger frames \
         (`frame_size`: 4096 up to an MTU of 3818, 16384 for jumbo frames)"
    )]
    MtuTooLarge {
        port: String,
        interface: String,
        mtu: u32,
        frame_size: u32,
        max_mtu: u32,
    },
    #[error("port {port}: bad ring geometry: {problem}")]
    Geometry { port: String, problem: String },
    #[error("port {port}: queues {first}..{end} are outside the port's {queues} queues")]
    Queues {
        port: String,
        first: u16,
        end: u16,
        queues: u16,
    },
    #[error("port {port}: {operation} failed: {source}")]
    Os {
        port: String,
        operation: &'static str,
        source: std::io::Error,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_geometry_is_valid_and_carries_a_standard_mtu() {
        let config = AfPacketConfig::default();
        assert_eq!(config.check(), Ok(()));
        assert_eq!(config.max_mtu(), 1770);
        let jumbo = AfPacketConfig {
            frame_size: 4096,
            ..config
        };
        assert_eq!(jumbo.max_mtu(), 3818);
    }

    #[test]
    fn bad_geometry_is_refused_with_the_fix() {
        let good = AfPacketConfig::default();
        let cases = [
            (
                AfPacketConfig {
                    block_size: 3 * 4096,
                    ..good.clone()
                },
                "power of two",
            ),
            (
                AfPacketConfig {
                    block_size: 1024,
                    ..good.clone()
                },
                "page size",
            ),
            (
                AfPacketConfig {
                    block_size: 8 << 20,
                    ..good.clone()
                },
                "4 MiB",
            ),
            (
                AfPacketConfig {
                    block_count: 1,
                    ..good.clone()
                },
                "block_count",
            ),
            (
                AfPacketConfig {
                    block_count: 65536,
                    block_size: 1 << 22,
                    ..good.clone()
                },
                "1 GiB",
            ),
            (
                AfPacketConfig {
                    frame_size: 1024,
                    ..good.clone()
                },
                "2048, 4096, 8192 or 16384",
            ),
            (
                AfPacketConfig {
                    block_timeout_ms: 0,
                    ..good.clone()
                },
                "block_timeout_ms",
            ),
            (
                AfPacketConfig {
                    tx_slots: 7,
                    ..good.clone()
                },
                "tx_slots",
            ),
            (
                AfPacketConfig {
                    queues: 65,
                    ..good.clone()
                },
                "queues",
            ),
        ];
        for (config, hint) in cases {
            let problem = config.check().expect_err(hint);
            assert!(
                problem.contains(hint),
                "{problem:?} should mention {hint:?}"
            );
        }
    }

    #[test]
    fn fanout_modes_parse_by_name() {
        for mode in [
            FanoutMode::Hash,
            FanoutMode::Cpu,
            FanoutMode::QueueMapping,
            FanoutMode::RoundRobin,
        ] {
            assert_eq!(mode.name().parse::<FanoutMode>(), Ok(mode));
        }
        assert_eq!("rr".parse::<FanoutMode>(), Ok(FanoutMode::RoundRobin));
        assert!(
            "random"
                .parse::<FanoutMode>()
                .unwrap_err()
                .contains("hash, cpu, qm")
        );
    }
}
