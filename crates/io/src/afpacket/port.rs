//! [`AfPacketPort`]: the [`Port`] over AF_PACKET rings, one RX/TX socket pair per queue.
//!
//! Opening checks everything that can be checked before a socket exists (geometry), then what
//! the first socket can tell (permission, interface, MTU), and only then builds the rings, so a
//! misconfigured port fails with one clear error and nothing half-built. The hot path makes no
//! system call per packet: `rx` reads the mapped ring, `tx` writes it and kicks the kernel once.

use std::cell::Cell;
use std::ops::Range;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use wirespeed_packet::batch::HEADROOM;
use wirespeed_packet::{Batch, Desc, FramePool};

use super::ring::{RxRing, TxRing};
use super::socket::{self, Interface, Mapping};
use super::{AfPacketConfig, AfPacketError, FanoutMode, RxRingKind};
use crate::port::{Backend, Port, PortInfo, PortStats, QueueId};

/// Smallest frame either path accepts: an Ethernet header.
const MIN_TX_FRAME: usize = 14;

/// Counters beyond [`PortStats`] that explain what the port did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AfPacketCounters {
    /// `sendto` kicks issued (one per `tx` call that queued frames, plus retries from `poll`).
    pub tx_kicks: u64,
    /// Kicks the kernel answered with EAGAIN/ENOBUFS: the socket's send buffer or the device
    /// queue was full (kernel ≥ 6.16 veth stops its queue when the peer's ring is full). The
    /// frames stay in the TX ring and the next `tx` or `poll` kicks again.
    pub tx_busy: u64,
    /// Kicks that failed otherwise (link down, interface gone); the frames stay queued.
    pub tx_kick_errors: u64,
    /// Frames `tx` took and dropped because they were shorter than an Ethernet header, longer
    /// than a TX slot, or their descriptor pointed outside the frame (also in `tx_refused`).
    pub tx_malformed: u64,
    /// Packets the RX ring delivered that the host itself sent, skipped.
    pub rx_outgoing_skipped: u64,
    /// RX blocks (V3) or slots (V2) given back early because their headers did not add up
    /// (also in `rx_errors`).
    pub rx_corrupt_blocks: u64,
}

/// The two sockets and rings of one queue.
struct Queue {
    rx: RxRing,
    tx: TxRing,
    // The rings are declared first so that they are unmapped before their sockets close.
    rx_socket: OwnedFd,
    tx_socket: OwnedFd,
    /// Frames are waiting in the TX ring for a kick that has not succeeded yet.
    kick_pending: bool,
    /// Kernel drops read from PACKET_STATISTICS so far (reading resets the kernel's counter).
    kernel_drops: Cell<u64>,
}

/// A port on a Linux interface through AF_PACKET rings (see the module documentation of
/// [`crate::afpacket`]).
pub struct AfPacketPort {
    info: PortInfo,
    /// One entry per queue of the port; `None` for queues another port object opened.
    queues: Vec<Option<Queue>>,
    stats: PortStats,
    counters: AfPacketCounters,
    /// The interface's name and index when the port was opened, to tell whether it is still
    /// there.
    interface: String,
    ifindex: i32,
    /// Why the port stopped: its interface went away ([`AfPacketPort::check_interface`]).
    gone: Option<String>,
}

impl AfPacketPort {
    /// Opens every queue of interface `interface` (in the calling thread's network namespace)
    /// as port `name`.
    pub fn open(
        name: &str,
        interface: &str,
        config: &AfPacketConfig,
    ) -> Result<AfPacketPort, AfPacketError> {
        Self::open_queues(name, interface, config, 0..config.queues)
    }

    /// Opens queues `queues` of the port's `config.queues` (fanout members, joined in this
    /// order); `rx` and `tx` on the other queues move nothing.
    pub fn open_queues(
        name: &str,
        interface: &str,
        config: &AfPacketConfig,
        queues: Range<QueueId>,
    ) -> Result<AfPacketPort, AfPacketError> {
        let port = name.to_string();
        config.check().map_err(|problem| AfPacketError::Geometry {
            port: port.clone(),
            problem,
        })?;
        if queues.start >= queues.end || queues.end > config.queues {
            return Err(AfPacketError::Queues {
                port,
                first: queues.start,
                end: queues.end,
                queues: config.queues,
            });
        }
        let os = |operation: &'static str| {
            let port = port.clone();
            move |source: std::io::Error| AfPacketError::Os {
                port,
                operation,
                source,
            }
        };
        let first = socket::packet_socket().map_err(|error| match error.raw_os_error() {
            Some(libc::EPERM) | Some(libc::EACCES) => {
                AfPacketError::Permission { port: port.clone() }
            }
            _ => os("socket(AF_PACKET)")(error),
        })?;
        let link =
            socket::interface(&first, interface).map_err(|error| match error.raw_os_error() {
                Some(libc::ENODEV) | Some(libc::ENXIO) => AfPacketError::NoInterface {
                    port: port.clone(),
                    interface: interface.to_string(),
                },
                _ => os("reading the interface (SIOCGIF*)")(error),
            })?;
        if link.mtu > config.max_mtu() {
            return Err(AfPacketError::MtuTooLarge {
                port,
                interface: interface.to_string(),
                mtu: link.mtu,
                frame_size: config.frame_size,
                max_mtu: config.max_mtu(),
            });
        }
        let group = config
            .fanout_group
            .unwrap_or((link.index as u32 & 0xffff) as u16);
        let mut opened: Vec<Option<Queue>> = (0..config.queues).map(|_| None).collect();
        let mut first = Some(first);
        for queue in queues {
            let rx_socket = match first.take() {
                Some(fd) => fd,
                None => socket::packet_socket().map_err(os("socket(AF_PACKET)"))?,
            };
            let built =
                open_queue(rx_socket, &link, config, group).map_err(|(operation, source)| {
                    AfPacketError::Os {
                        port: port.clone(),
                        operation,
                        source,
                    }
                })?;
            opened[queue as usize] = Some(built);
        }
        let fanout = if config.queues > 1 {
            format!("fanout {} group {group}", config.fanout.name())
        } else {
            "no fanout".to_string()
        };
        Ok(AfPacketPort {
            info: PortInfo {
                name: port,
                backend: Backend::AfPacket,
                mac: link.mac,
                mtu: link.mtu.min(u16::MAX as u32) as u16,
                queues: config.queues,
                link_up: link.up,
                mode: format!(
                    "tpacket_{} rx, v2 tx, qdisc bypass, {fanout}",
                    config.rx_ring.name()
                ),
            },
            queues: opened,
            stats: PortStats::default(),
            counters: AfPacketCounters::default(),
            interface: interface.to_string(),
            ifindex: link.index,
            gone: None,
        })
    }

    /// Asks the kernel whether the port's interface is still the one it was opened on, after
    /// `why` (a socket error, a failed kick) suggested otherwise. When it is gone, the port
    /// stops: its fault and its mode say so, `tx` takes nothing and nothing is kicked, so that
    /// neither a kick the kernel refuses nor a socket in error keeps the worker busy.
    fn check_interface(&mut self, why: &std::io::Error) {
        if self.gone.is_some() {
            return;
        }
        let Some(queue) = self.queues.iter().flatten().next() else {
            return;
        };
        let now = match socket::interface(&queue.rx_socket, &self.interface) {
            // Still there (the error was a link going down): nothing to stop.
            Ok(link) if link.index == self.ifindex => return,
            Ok(_) => "another interface has its name now",
            Err(_) => "no interface has its name now",
        };
        self.gone = Some(format!(
            "interface {} went away ({why}; {now}): deleted or moved to another network \
             namespace; its frames are dropped until the switch is restarted with it back",
            self.interface
        ));
        self.info.link_up = false;
        self.info.mode = format!(
            "GONE (interface {} deleted), {}",
            self.interface, self.info.mode
        );
        for queue in self.queues.iter_mut().flatten() {
            queue.kick_pending = false;
        }
    }

    /// The port's own counters.
    pub fn counters(&self) -> AfPacketCounters {
        let mut counters = self.counters;
        counters.rx_corrupt_blocks = self
            .queues
            .iter()
            .flatten()
            .map(|queue| queue.rx.corrupt())
            .sum();
        counters
    }

    /// Kicks `queue`'s TX ring and accounts for the answer; returns an error that says the
    /// interface may be gone (ENXIO: the socket's device was unregistered; ENODEV, ENETDOWN).
    fn kick(queue: &mut Queue, counters: &mut AfPacketCounters) -> Option<std::io::Error> {
        counters.tx_kicks += 1;
        match socket::kick(&queue.tx_socket) {
            Ok(()) => queue.kick_pending = false,
            Err(error) => {
                queue.kick_pending = true;
                match error.raw_os_error() {
                    Some(libc::EAGAIN) | Some(libc::ENOBUFS) | Some(libc::EINTR) => {
                        counters.tx_busy += 1
                    }
                    Some(libc::ENXIO) | Some(libc::ENODEV) | Some(libc::ENETDOWN) => {
                        counters.tx_kick_errors += 1;
                        return Some(error);
                    }
                    _ => counters.tx_kick_errors += 1,
                }
            }
        }
        None
    }
}

/// Builds one queue on an RX socket already created; errors name the step.
fn open_queue(
    rx_socket: OwnedFd,
    link: &Interface,
    config: &AfPacketConfig,
    group: u16,
) -> Result<Queue, (&'static str, std::io::Error)> {
    let step = |operation: &'static str| move |error| (operation, error);
    let sol = libc::SOL_PACKET;

    // RX: a V3 (blocks) or V2 (slots) ring, bound to every protocol, outgoing packets ignored.
    let frames_per_block = config.block_size / config.frame_size;
    let (version, name) = match config.rx_ring {
        RxRingKind::Blocks => (libc::tpacket_versions::TPACKET_V3, "setting TPACKET_V3"),
        RxRingKind::Slots => (
            libc::tpacket_versions::TPACKET_V2,
            "setting TPACKET_V2 for RX",
        ),
    };
    socket::set_option(
        &rx_socket,
        sol,
        libc::PACKET_VERSION,
        &(version as libc::c_int),
    )
    .map_err(step(name))?;
    let frame_nr = frames_per_block * config.block_count;
    match config.rx_ring {
        RxRingKind::Blocks => {
            let request = libc::tpacket_req3 {
                tp_block_size: config.block_size,
                tp_block_nr: config.block_count,
                tp_frame_size: config.frame_size,
                tp_frame_nr: frame_nr,
                tp_retire_blk_tov: config.block_timeout_ms,
                tp_sizeof_priv: 0,
                tp_feature_req_word: 0,
            };
            socket::set_option(&rx_socket, sol, libc::PACKET_RX_RING, &request)
        }
        RxRingKind::Slots => {
            let request = libc::tpacket_req {
                tp_block_size: config.block_size,
                tp_block_nr: config.block_count,
                tp_frame_size: config.frame_size,
                tp_frame_nr: frame_nr,
            };
            socket::set_option(&rx_socket, sol, libc::PACKET_RX_RING, &request)
        }
    }
    .map_err(step("creating the RX ring (PACKET_RX_RING)"))?;
    let rx_len = config.block_size as usize * config.block_count as usize;
    let rx_map = Mapping::new(&rx_socket, rx_len).map_err(step("mapping the RX ring"))?;
    let rx = RxRing::new(
        config.rx_ring,
        rx_map,
        config.block_size as usize,
        config.block_count as usize,
        config.frame_size as usize,
    );
    if config.queues == 1 {
        // Older kernels lack the option; the packet type check in the ring still applies.
        let _ = socket::set_option(&rx_socket, sol, libc::PACKET_IGNORE_OUTGOING, &1 as &i32);
    }
    if config.promiscuous {
        let membership = libc::packet_mreq {
            mr_ifindex: link.index,
            mr_type: libc::PACKET_MR_PROMISC as u16,
            mr_alen: 0,
            mr_address: [0; 8],
        };
        socket::set_option(&rx_socket, sol, libc::PACKET_ADD_MEMBERSHIP, &membership)
            .map_err(step("enabling promiscuous mode"))?;
    }
    socket::bind(&rx_socket, link.index, libc::ETH_P_ALL as u16)
        .map_err(step("binding the RX socket"))?;
    if config.queues > 1 {
        join_fanout(&rx_socket, config.fanout, group).map_err(step("joining the fanout group"))?;
    }

    // TX: TPACKET_V2 ring on a socket that receives nothing, bypassing the qdisc.
    let tx_socket = socket::packet_socket().map_err(step("socket(AF_PACKET) for TX"))?;
    socket::set_option(
        &tx_socket,
        sol,
        libc::PACKET_VERSION,
        &(libc::tpacket_versions::TPACKET_V2 as libc::c_int),
    )
    .map_err(step("setting TPACKET_V2"))?;
    socket::set_option(&tx_socket, sol, libc::PACKET_QDISC_BYPASS, &1 as &i32)
        .map_err(step("setting PACKET_QDISC_BYPASS"))?;
    // A malformed slot is skipped instead of stopping the ring for good.
    socket::set_option(&tx_socket, sol, libc::PACKET_LOSS, &1 as &i32)
        .map_err(step("setting PACKET_LOSS"))?;
    let slot_size = config.frame_size;
    let tx_block = slot_size.max(socket::page_size());
    let slots_per_block = tx_block / slot_size;
    let tx_blocks = config.tx_slots.div_ceil(slots_per_block);
    let slots = tx_blocks * slots_per_block;
    // Room in the send buffer for a full ring in flight, so the ring, not the buffer, is the
    // limit; only root may force it past wmem_max, and a smaller buffer still works.
    let send_buffer = (slots as usize * slot_size as usize * 2).min(i32::MAX as usize) as i32;
    let _ = socket::set_option(
        &tx_socket,
        libc::SOL_SOCKET,
        libc::SO_SNDBUFFORCE,
        &send_buffer,
    );
    let request = libc::tpacket_req {
        tp_block_size: tx_block,
        tp_block_nr: tx_blocks,
        tp_frame_size: slot_size,
        tp_frame_nr: slots,
    };
    socket::set_option(&tx_socket, sol, libc::PACKET_TX_RING, &request)
        .map_err(step("creating the TX ring (PACKET_TX_RING)"))?;
    let tx_len = tx_block as usize * tx_blocks as usize;
    let tx_map = Mapping::new(&tx_socket, tx_len).map_err(step("mapping the TX ring"))?;
    let tx = TxRing::new(
        tx_map,
        slot_size as usize,
        tx_block as usize,
        tx_blocks as usize,
    );
    socket::bind(&tx_socket, link.index, 0).map_err(step("binding the TX socket"))?;

    Ok(Queue {
        rx,
        tx,
        rx_socket,
        tx_socket,
        kick_pending: false,
        kernel_drops: Cell::new(0),
    })
}

/// Joins fanout group `group` in `mode`, ignoring outgoing packets where the kernel can.
fn join_fanout(fd: &OwnedFd, mode: FanoutMode, group: u16) -> std::io::Result<()> {
    let join = |flags: u32| {
        let value = (group as u32 | ((mode.kernel_type() | flags) << 16)) as i32;
        socket::set_option(fd, libc::SOL_PACKET, libc::PACKET_FANOUT, &value)
    };
    // The fanout group's hook, not the member socket's, decides about outgoing packets; older
    // kernels lack the flag, and the ring's packet type check covers them.
    join(libc::PACKET_FANOUT_FLAG_IGNORE_OUTGOING).or_else(|_| join(0))
}

impl Port for AfPacketPort {
    fn info(&self) -> &PortInfo {
        &self.info
    }

    fn rx(&mut self, queue: QueueId, pool: &mut FramePool, batch: &mut Batch) -> usize {
        let Some(Some(ring)) = self.queues.get_mut(queue as usize) else {
            return 0;
        };
        let room = (pool.frame_size() as usize).saturating_sub(HEADROOM as usize);
        let start = HEADROOM as usize;
        let mut received = 0;
        // Skipped packets do not fill the batch; bound the walk so one call stays short.
        let mut budget = batch.room() * 4;
        while !batch.is_full() && budget > 0 {
            budget -= 1;
            let Some(packet) = ring.rx.peek() else { break };
            if packet.outgoing {
                ring.rx.advance();
                self.counters.rx_outgoing_skipped += 1;
                continue;
            }
            let tag = if packet.vlan.is_some() { 4 } else { 0 };
            let len = packet.data.len() + tag;
            // Truncated by the ring, too long for a frame, or without a whole Ethernet header.
            if (packet.data.len() as u64) < packet.wire_len as u64
                || len > room
                || packet.data.len() < MIN_TX_FRAME
            {
                ring.rx.advance();
                self.stats.rx_errors += 1;
                continue;
            }
            // An empty pool leaves the packet in the ring for the next call.
            let Some(frame) = pool.alloc() else { break };
            let out = &mut pool.frame_mut(frame)[start..start + len];
            match packet.vlan {
                None => out.copy_from_slice(packet.data),
                Some((tpid, tci)) => {
                    // Put back the tag the kernel took out, after the two MAC addresses.
                    out[..12].copy_from_slice(&packet.data[..12]);
                    out[12..14].copy_from_slice(&tpid.to_be_bytes());
                    out[14..16].copy_from_slice(&tci.to_be_bytes());
                    out[16..].copy_from_slice(&packet.data[12..]);
                }
            }
            ring.rx.advance();
            batch.push(Desc {
                frame,
                offset: HEADROOM,
                len: len as u16,
                port: 0,
                queue,
            });
            self.stats.rx_bytes += len as u64;
            received += 1;
        }
        self.stats.rx_packets += received as u64;
        received
    }

    fn tx(&mut self, queue: QueueId, pool: &mut FramePool, batch: &mut Batch) -> usize {
        if self.gone.is_some() {
            self.stats.tx_refused += batch.len() as u64;
            return 0;
        }
        let Some(Some(ring)) = self.queues.get_mut(queue as usize) else {
            return 0;
        };
        let capacity = ring.tx.capacity();
        let mut taken = 0;
        let mut queued = 0;
        for desc in batch.descs() {
            let start = desc.offset as usize;
            let frame = pool
                .frame(desc.frame)
                .get(start..start + desc.len as usize)
                .filter(|data| (MIN_TX_FRAME..=capacity).contains(&data.len()));
            match frame {
                Some(data) => {
                    if !ring.tx.push(data) {
                        break;
                    }
                    self.stats.tx_bytes += data.len() as u64;
                    queued += 1;
                }
                None => {
                    self.counters.tx_malformed += 1;
                    self.stats.tx_refused += 1;
                }
            }
            pool.release(desc.frame);
            taken += 1;
        }
        batch.consume_front(taken);
        self.stats.tx_packets += queued as u64;
        self.stats.tx_refused += batch.len() as u64;
        if (queued > 0 || ring.kick_pending)
            && let Some(error) = Self::kick(ring, &mut self.counters)
        {
            self.check_interface(&error);
        }
        taken
    }

    /// Free TX ring slots from the one `tx` fills next, read from their status words.
    fn tx_room(&mut self, queue: QueueId, _pool: &mut FramePool, want: usize) -> usize {
        match self.queues.get(queue as usize) {
            Some(Some(ring)) => ring.tx.free(want),
            _ => 0,
        }
    }

    fn poll(&mut self, _pool: &mut FramePool) {
        let mut refused = None;
        for ring in self.queues.iter_mut().flatten() {
            if ring.kick_pending {
                refused = refused.or(Self::kick(ring, &mut self.counters));
            }
        }
        if let Some(error) = refused {
            self.check_interface(&error);
        }
    }

    fn descriptor_failed(&mut self, queue: QueueId) {
        let Some(Some(ring)) = self.queues.get(queue as usize) else {
            return;
        };
        // The pending error, or the error reading it: either way the interface is checked.
        let error = socket::take_error(&ring.rx_socket).unwrap_or_else(|error| error);
        self.check_interface(&error);
    }

    fn fault(&self) -> Option<String> {
        self.gone.clone()
    }

    /// Frames queued on the TX ring: the kernel sends them inside the kick `tx` makes, so
    /// this is the port's own count, read without the system call `stats` makes.
    fn tx_departed(&self) -> u64 {
        self.stats.tx_packets
    }

    fn tx_backlog(&mut self) -> bool {
        self.queues.iter().flatten().any(|ring| ring.kick_pending)
    }

    fn rx_fd(&self, queue: QueueId) -> Option<RawFd> {
        match self.queues.get(queue as usize) {
            Some(Some(ring)) => Some(ring.rx_socket.as_raw_fd()),
            _ => None,
        }
    }

    fn frames_held(&self) -> usize {
        0
    }

    fn release_all(&mut self, _pool: &mut FramePool) {}

    fn stats(&self) -> PortStats {
        let mut stats = self.stats;
        for ring in self.queues.iter().flatten() {
            ring.kernel_drops
                .set(ring.kernel_drops.get() + socket::kernel_drops(&ring.rx_socket));
            stats.rx_dropped += ring.kernel_drops.get();
            stats.rx_errors += ring.rx.corrupt();
        }
        stats
    }
}
