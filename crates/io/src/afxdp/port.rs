//! [`AfXdpPort`]: one interface driven through AF_XDP sockets, one per opened queue.
//!
//! Opening checks everything that can be checked before the kernel is touched (interface, queues,
//! MTU against the frame size, ring sizes, the pool), then attaches the XDP program (or, opened
//! with [`AfXdpPort::open_shared`], uses the interface's [`XdpAttachment`] that several workers
//! share), claims its queues, then opens and binds a socket per queue, gives each fill ring a
//! ring's worth of frames, and puts the sockets into the program's XSKMAP.
//!
//! The data path per call, without allocation or locks, with at most one system call per call
//! and only when the kernel asked for it (`need_wakeup`):
//! * `rx`: read up to `batch.room()` RX descriptors into the batch (frame and offset from the
//!   UMEM address), hand the slots back, top the fill ring up from the pool in bulk.
//! * `tx`: return completed frames to the pool, write as many TX descriptors as the ring has room
//!   for, leave the rest in the batch, kick the kernel if the TX ring's flag says so (copy mode
//!   always does: it transmits only inside `sendto`).
//! * `poll`: return completed frames, and kick again where the TX ring still holds frames (copy
//!   mode transmits at most 32 frames per kick).
//!
//! Jumbo frames (a pool frame larger than a page, the largest UMEM chunk) cross in several
//! descriptors chained by `XDP_PKT_CONTD` (AF_XDP multi-buffer, Linux 6.6): a received jumbo
//! frame arrives in the first chunk of several pool frames and is gathered into the first (a
//! copy of all but its first 3840 bytes, the one copy the port makes, and only for them); a
//! sent one leaves from its one frame in a piece per chunk it spans, without a copy.
//!
//! Frames the port handed to the kernel are tracked in a [`Ledger`], so that [`Port::frames_held`]
//! is exact and [`Port::release_all`] can return them after the sockets are closed.

use std::os::fd::RawFd;
use std::sync::Arc;

use wirespeed_packet::batch::HEADROOM;
use wirespeed_packet::pool::L2_OVERHEAD;
use wirespeed_packet::{Batch, Desc, FrameId, FramePool};

use super::attachment::{Claim, XdpAttachment};
use super::config::{AfXdpConfig, AfXdpError, QueueSelection};
use super::interface::{Interface, InterfaceError};
use super::ledger::Ledger;
use super::memlock::MemlockLimit;
use super::program::{ProgramError, is_busy};
use super::socket::{REGISTER_UMEM, RingSizes, SocketError, XskSocket};
use super::umem::Umem;
use crate::port::{Backend, Port, PortInfo, PortStats, QueueId};

/// Frames moved between the pool and the fill ring per `alloc_bulk` call.
const REFILL_CHUNK: usize = 64;

/// A network interface driven through AF_XDP.
pub struct AfXdpPort {
    info: PortInfo,
    // Fields drop in order: the claim first (the sockets leave the XSKMAP, and the program
    // detaches if this port was its last user), then the sockets.
    claim: Option<Claim>,
    /// Index = queue id; `None` for queues not opened.
    sockets: Vec<Option<XskSocket>>,
    ledger: Ledger,
    umem: Umem,
    frame_size: u32,
    fill_size: u32,
    completion_size: u32,
    stats: PortStats,
    /// Descriptors the kernel never saw because they were invalid (outside the frame or pool,
    /// or a frame the port already held); counted in `tx_refused`.
    tx_invalid: u64,
    /// TX descriptors published to the kernel, all sockets ([`Port::tx_departed`]).
    tx_submitted: u64,
    /// Bytes per UMEM chunk: the frame size, or a page for jumbo frames (multi-buffer).
    chunk_size: u32,
    /// Index = queue id: the jumbo frame whose fragments are being received, if any.
    gathering: Vec<Option<Gathering>>,
    /// Index = queue id, in multi-buffer mode only (empty otherwise): where each packet's
    /// pieces end in the TX ring, so that departures count packets, not pieces.
    chains: Vec<TxChains>,
    /// Why the port stopped: its interface went away ([`AfXdpPort::unbound`]).
    gone: Option<String>,
}

/// The packets of one TX ring sent in several pieces: for the last packets written (as many as
/// the ring has slots, the most it can hold), the running count of pieces at each one's end.
/// The ring is a FIFO, so a packet has left once the kernel consumed its last piece.
#[derive(Debug)]
struct TxChains {
    pieces: u64,
    packets: u64,
    ends: Box<[u64]>,
}

impl TxChains {
    fn new(ring: u32) -> Self {
        TxChains {
            pieces: 0,
            packets: 0,
            ends: vec![0; ring as usize].into_boxed_slice(),
        }
    }

    /// Records a packet of `pieces` descriptors written to the ring.
    fn push(&mut self, pieces: u32) {
        self.pieces += u64::from(pieces);
        let slot = (self.packets % self.ends.len() as u64) as usize;
        self.ends[slot] = self.pieces;
        self.packets += 1;
    }

    /// Packets all of whose pieces the kernel consumed, `in_ring` pieces being still there.
    fn departed(&self, in_ring: u32) -> u64 {
        let consumed = self.pieces.saturating_sub(u64::from(in_ring));
        let len = self.ends.len() as u64;
        let end_of = |back: u64| self.ends[((self.packets - 1 - back) % len) as usize];
        // Packets still (partly) in the ring are the newest ones: count them back from the
        // last, by binary search over the ends, which grow with the packet number.
        let (mut low, mut high) = (0, self.packets.min(len));
        while low < high {
            let mid = (low + high) / 2;
            if end_of(mid) > consumed {
                low = mid + 1;
            } else {
                high = mid;
            }
        }
        self.packets - low
    }
}

/// A frame received in several buffers (AF_XDP multi-buffer) while its fragments arrive: the
/// first buffer, into whose frame the others are copied, and whether one did not fit (then
/// the whole frame is dropped at its last fragment).
#[derive(Clone, Copy, Debug)]
struct Gathering {
    head: Desc,
    overflow: bool,
}

impl AfXdpPort {
    /// Stops the port after a kick answered `why` (ENXIO: the socket is no longer bound,
    /// because its interface was unregistered, [`XskSocket::kick_tx`]): its fault and its mode
    /// say so, `tx` takes nothing and nothing is kicked, so that neither the kicks nor the
    /// frames stuck in its TX ring keep the worker busy. The kernel's answer is the proof: the
    /// interface cannot be looked up by name from here, since the worker's thread need not be
    /// in the port's network namespace.
    fn unbound(&mut self, why: &std::io::Error) {
        if self.gone.is_some() {
            return;
        }
        self.gone = Some(format!(
            "interface {} went away (a kick answered: {why}; the socket was unbound): deleted \
             or moved to another network namespace; its frames are dropped until the switch is \
             restarted with it back",
            self.info.name
        ));
        self.info.link_up = false;
        self.info.mode = format!(
            "GONE (interface {} deleted), {}",
            self.info.name, self.info.mode
        );
    }

    /// Opens interface `name` of the calling thread's network namespace on the worker's `umem`,
    /// filling the fill rings from `pool` (which must be the pool `umem` was made from). The
    /// port attaches its own XDP program (in `config.xdp_mode`), so no other port can open the
    /// interface while it is open; for several workers on one interface, see
    /// [`AfXdpPort::open_shared`].
    pub fn open(
        name: &str,
        config: &AfXdpConfig,
        umem: &Umem,
        pool: &mut FramePool,
    ) -> Result<Self, AfXdpError> {
        Self::open_on(name, None, config, umem, pool)
    }

    /// Opens the selected queues of `attachment`'s interface (in the calling thread's network
    /// namespace, the one it was attached in) as one worker's port, on that worker's `umem`
    /// and `pool`. Other workers open other queues of the same attachment with their own pools;
    /// a queue another port holds is refused ([`AfXdpError::QueueTaken`]). `config.xdp_mode` is
    /// not used: the attachment has its mode. Releasing or dropping the port frees its queues.
    pub fn open_shared(
        attachment: &Arc<XdpAttachment>,
        config: &AfXdpConfig,
        umem: &Umem,
        pool: &mut FramePool,
    ) -> Result<Self, AfXdpError> {
        Self::open_on(attachment.interface(), Some(attachment), config, umem, pool)
    }

    fn open_on(
        name: &str,
        attachment: Option<&Arc<XdpAttachment>>,
        config: &AfXdpConfig,
        umem: &Umem,
        pool: &mut FramePool,
    ) -> Result<Self, AfXdpError> {
        let port = || name.to_string();
        if !umem.is_of(pool) {
            return Err(AfXdpError::WrongPool { port: port() });
        }
        for (ring, size) in [
            ("fill", config.fill_size),
            ("completion", config.completion_size),
            ("RX", config.rx_size),
            ("TX", config.tx_size),
        ] {
            if !size.is_power_of_two() || !(64..=65536).contains(&size) {
                return Err(AfXdpError::RingSize {
                    port: port(),
                    ring,
                    size,
                });
            }
        }
        let interface = query_interface(name)?;
        let mut queues: Vec<QueueId> = match &config.queues {
            QueueSelection::All => (0..interface.queues).collect(),
            QueueSelection::List(list) => list.clone(),
        };
        queues.sort_unstable();
        queues.dedup();
        if queues.is_empty() {
            return Err(AfXdpError::NoQueues { port: port() });
        }
        if let Some(attachment) = attachment
            && attachment.ifindex() != interface.ifindex
        {
            return Err(AfXdpError::AttachmentMismatch {
                port: port(),
                attached: attachment.ifindex(),
                ifindex: interface.ifindex,
            });
        }
        // The XSKMAP has a slot per queue the interface had when the program was attached.
        let available = attachment.map_or(interface.queues, |a| a.queues().min(interface.queues));
        if let Some(&queue) = queues.iter().find(|&&q| q >= available) {
            return Err(AfXdpError::QueueOutOfRange {
                port: port(),
                queue,
                queues: available,
            });
        }
        let frame_size = umem.frame_size();
        let room = frame_size - HEADROOM as u32;
        if interface.mtu + L2_OVERHEAD > room {
            return Err(AfXdpError::MtuTooLarge {
                port: port(),
                mtu: interface.mtu,
                frame_size,
                headroom: HEADROOM,
                room,
                max_mtu: room - L2_OVERHEAD,
            });
        }
        let needed = config.fill_size * queues.len() as u32;
        if pool.free_count() < needed {
            return Err(AfXdpError::PoolTooSmall {
                port: port(),
                free: pool.free_count(),
                needed,
            });
        }

        let attachment = match attachment {
            Some(shared) => Arc::clone(shared),
            None => Arc::new(XdpAttachment::attach_described(
                name,
                &interface,
                config.xdp_mode,
            )?),
        };
        let claim = attachment
            .claim(&queues)
            .map_err(|queue| AfXdpError::QueueTaken {
                port: port(),
                queue,
            })?;
        let program = claim.attachment();

        let sizes = RingSizes {
            fill: config.fill_size,
            completion: config.completion_size,
            rx: config.rx_size,
            tx: config.tx_size,
            send_buffer: config.send_buffer,
        };
        let mut notes: Vec<String> = program.fallback().map(str::to_string).into_iter().collect();
        let mut sockets: Vec<Option<XskSocket>> = (0..interface.queues).map(|_| None).collect();
        for &queue in &queues {
            let opened = XskSocket::open(
                umem,
                interface.ifindex,
                queue as u32,
                sizes,
                config.zero_copy,
            )
            .map_err(|error| socket_error(name, queue, error))?;
            for note in opened.notes {
                if !notes.contains(&note) {
                    notes.push(note);
                }
            }
            sockets[queue as usize] = Some(opened.socket);
        }
        // Fill the rings before the program redirects anything to the sockets, so the first
        // frames do not meet an empty fill ring.
        let mut ledger = Ledger::new(pool.total());
        for socket in sockets.iter_mut().flatten() {
            refill(socket, &mut ledger, pool, config.fill_size);
        }
        for (queue, socket) in sockets.iter().enumerate() {
            let Some(socket) = socket else { continue };
            if let Err(error) = claim.insert(queue as QueueId, socket.raw_fd()) {
                // Close the sockets first: then the kernel references none of the frames.
                drop(sockets);
                ledger.drain(|frame| pool.release(frame));
                return Err(insert_error(name, queue as QueueId, error));
            }
        }

        let first = sockets.iter().flatten().next();
        let zero_copy = first.is_some_and(XskSocket::zero_copy);
        let shared = sockets.iter().flatten().all(XskSocket::on_worker_umem);
        let mut mode = format!(
            "xdp={} bind={} need_wakeup umem={}",
            program.mode(),
            if zero_copy { "zerocopy" } else { "copy" },
            if shared { "shared" } else { "own" },
        );
        for note in &notes {
            mode.push_str("; ");
            mode.push_str(note);
        }
        Ok(AfXdpPort {
            info: PortInfo {
                name: name.to_string(),
                backend: Backend::AfXdp,
                mac: interface.mac,
                mtu: interface.mtu.min(u16::MAX as u32) as u16,
                queues: interface.queues,
                link_up: interface.link_up,
                mode,
            },
            claim: Some(claim),
            sockets,
            ledger,
            umem: umem.clone(),
            frame_size,
            fill_size: config.fill_size,
            completion_size: config.completion_size,
            stats: PortStats::default(),
            tx_invalid: 0,
            tx_submitted: 0,
            chunk_size: umem.chunk_size(),
            gathering: vec![None; usize::from(interface.queues)],
            gone: None,
            chains: if umem.is_multi_buffer() {
                (0..interface.queues)
                    .map(|_| TxChains::new(config.tx_size))
                    .collect()
            } else {
                Vec::new()
            },
        })
    }

    /// The queues this port opened, in order.
    pub fn open_queues(&self) -> impl Iterator<Item = QueueId> + '_ {
        self.sockets
            .iter()
            .enumerate()
            .filter(|(_, socket)| socket.is_some())
            .map(|(queue, _)| queue as QueueId)
    }

    /// Whether the port still has its sockets (false after [`Port::release_all`]).
    pub fn is_open(&self) -> bool {
        self.claim.is_some()
    }
}

impl std::fmt::Debug for AfXdpPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AfXdpPort")
            .field("info", &self.info)
            .field("queues", &self.open_queues().collect::<Vec<_>>())
            .field("frames_held", &self.ledger.held())
            .finish()
    }
}

/// Describes interface `name` of the calling thread's namespace, or says why not.
pub(super) fn query_interface(name: &str) -> Result<Interface, AfXdpError> {
    Interface::query(name).map_err(|error| match error {
        InterfaceError::Missing => AfXdpError::NoSuchInterface {
            port: name.to_string(),
        },
        InterfaceError::Query(what, source) => AfXdpError::Sysfs {
            port: name.to_string(),
            path: format!("{what} ioctl"),
            source,
        },
    })
}

/// The error a failed step of attaching a program to interface `port` is reported as.
/// The index of `interface` in the calling thread's network namespace.
pub fn interface_index(interface: &str) -> Result<u32, AfXdpError> {
    Ok(query_interface(interface)?.ifindex)
}

/// The MTU of `interface` in the calling thread's network namespace.
pub fn interface_mtu(interface: &str) -> Result<u32, AfXdpError> {
    Ok(query_interface(interface)?.mtu)
}

/// The driver of `interface` in the calling thread's network namespace ("veth", "mlx5_core",
/// ...; empty where the driver does not say).
pub fn interface_driver(interface: &str) -> Result<String, AfXdpError> {
    Ok(query_interface(interface)?.driver)
}

pub(super) fn program_error(port: &str, error: ProgramError) -> AfXdpError {
    let port = port.to_string();
    let denied = |error: &std::io::Error| error.raw_os_error() == Some(libc::EPERM);
    match error {
        ProgramError::Map(source) if denied(&source) => AfXdpError::PermissionDenied {
            port,
            what: format!("bpf(BPF_MAP_CREATE): {source}"),
        },
        ProgramError::Map(source) => AfXdpError::XskMap { port, source },
        ProgramError::Load { source, .. } if denied(&source) => AfXdpError::PermissionDenied {
            port,
            what: format!("bpf(BPF_PROG_LOAD): {source}"),
        },
        ProgramError::Load {
            program,
            source,
            log,
        } => AfXdpError::XdpLoad {
            port,
            program,
            source,
            log,
        },
        ProgramError::Attach(source, _) if is_busy(&source) => {
            AfXdpError::XdpAlreadyAttached { port }
        }
        ProgramError::Attach(source, _) if denied(&source) => AfXdpError::PermissionDenied {
            port,
            what: format!("bpf(BPF_LINK_CREATE): {source}"),
        },
        ProgramError::Attach(source, mode) => AfXdpError::XdpAttach { port, mode, source },
        ProgramError::Insert(source) => AfXdpError::Socket {
            port,
            queue: 0,
            step: "insert the socket into the XSKMAP",
            source,
        },
    }
}

fn insert_error(port: &str, queue: QueueId, error: ProgramError) -> AfXdpError {
    match error {
        ProgramError::Insert(source) => AfXdpError::Socket {
            port: port.to_string(),
            queue,
            step: "insert the socket into the XSKMAP",
            source,
        },
        other => program_error(port, other),
    }
}

fn socket_error(port: &str, queue: QueueId, error: SocketError) -> AfXdpError {
    if error.source.raw_os_error() == Some(libc::EPERM) {
        return AfXdpError::PermissionDenied {
            port: port.to_string(),
            what: format!("{}: {}", error.step, error.source),
        };
    }
    if error.step == REGISTER_UMEM
        && error.source.raw_os_error() == Some(libc::ENOBUFS)
        && let Ok(limit) = MemlockLimit::read()
    {
        return AfXdpError::Memlock {
            port: port.to_string(),
            queue,
            limit,
        };
    }
    AfXdpError::Socket {
        port: port.to_string(),
        queue,
        step: error.step,
        source: error.source,
    }
}

/// Tops the fill ring up to `fill_size` frames from the pool, in chunks, and wakes the kernel if
/// it asked for it.
#[inline]
fn refill(socket: &mut XskSocket, ledger: &mut Ledger, pool: &mut FramePool, fill_size: u32) {
    let mut free = socket.fill.free(fill_size);
    let mut ids = [0 as FrameId; REFILL_CHUNK];
    while free > 0 {
        let chunk = (free as usize).min(REFILL_CHUNK);
        let got = pool.alloc_bulk(&mut ids[..chunk]);
        if got == 0 {
            break;
        }
        let mut written = 0;
        for &id in &ids[..got] {
            // A frame the ledger already holds would be given to the kernel twice; the pool
            // handed it out by mistake (a release of a frame the kernel held), so keep it out.
            if ledger.give(id) {
                socket.fill.write(written, pool.addr(id, 0));
                written += 1;
            }
        }
        socket.fill.submit(written);
        free -= got as u32;
        if got < chunk {
            break;
        }
    }
    if socket.fill.needs_wakeup() {
        socket.kick_rx();
    }
}

/// Returns every completed transmission's frame to the pool.
#[inline]
fn reap(
    socket: &mut XskSocket,
    ledger: &mut Ledger,
    pool: &mut FramePool,
    completion_size: u32,
    chunk_size: u32,
) -> u64 {
    let n = socket.completion.available(completion_size);
    let mut strays = 0;
    for i in 0..n {
        let addr = socket.completion.read(i);
        match pool.locate(addr) {
            // A later piece of a jumbo frame (it starts on a chunk boundary past the first
            // chunk): its frame went back with the first piece, which completes with it.
            Some((_, offset)) if u32::from(offset) >= chunk_size => {}
            Some((frame, _)) if ledger.take_back(frame) => pool.release(frame),
            _ => strays += 1,
        }
    }
    socket.completion.release(n);
    strays
}

impl Port for AfXdpPort {
    fn info(&self) -> &PortInfo {
        &self.info
    }

    fn rx(&mut self, queue: QueueId, pool: &mut FramePool, batch: &mut Batch) -> usize {
        let Some(Some(socket)) = self.sockets.get_mut(queue as usize) else {
            return 0;
        };
        let gathering = &mut self.gathering[queue as usize];
        let n = socket.rx.available(batch.room() as u32);
        let mut received = 0;
        for i in 0..n {
            let desc = socket.rx.read(i);
            let more = desc.options & libc::XDP_PKT_CONTD != 0;
            let located = pool
                .locate(desc.addr)
                .filter(|&(frame, _)| self.ledger.take_back(frame));
            let Some((frame, offset)) = located else {
                // Not a frame this port gave the kernel: never hand it out twice. A frame in
                // the middle of a jumbo frame spoils the whole of it.
                self.stats.rx_errors += 1;
                if let Some(partial) = gathering {
                    partial.overflow = true;
                }
                continue;
            };
            let in_frame = offset as u64 + desc.len as u64 <= self.frame_size as u64;
            let packet = match gathering {
                // A later fragment of a jumbo frame: copied behind the others, its buffer freed.
                Some(partial) => {
                    let head = &mut partial.head;
                    let end = usize::from(head.offset) + usize::from(head.len);
                    let copied = !partial.overflow
                        && in_frame
                        && pool.copy_between(
                            frame,
                            usize::from(offset),
                            desc.len as usize,
                            head.frame,
                            end,
                        );
                    if copied {
                        head.len += desc.len as u16;
                    } else {
                        partial.overflow = true;
                    }
                    pool.release(frame);
                    if more {
                        continue;
                    }
                    let done = *partial;
                    *gathering = None;
                    if done.overflow {
                        self.stats.rx_errors += 1;
                        pool.release(done.head.frame);
                        continue;
                    }
                    done.head
                }
                None => {
                    if !in_frame {
                        self.stats.rx_errors += 1;
                        pool.release(frame);
                        continue;
                    }
                    let head = Desc {
                        frame,
                        offset,
                        len: desc.len as u16,
                        port: 0,
                        queue,
                    };
                    if more {
                        *gathering = Some(Gathering {
                            head,
                            overflow: false,
                        });
                        continue;
                    }
                    head
                }
            };
            batch.push(packet);
            self.stats.rx_bytes += u64::from(packet.len);
            received += 1;
        }
        socket.rx.release(n);
        self.stats.rx_packets += received as u64;
        refill(socket, &mut self.ledger, pool, self.fill_size);
        received
    }

    fn tx(&mut self, queue: QueueId, pool: &mut FramePool, batch: &mut Batch) -> usize {
        if self.gone.is_some() {
            self.stats.tx_refused += batch.len() as u64;
            return 0;
        }
        let Some(Some(socket)) = self.sockets.get_mut(queue as usize) else {
            return 0;
        };
        self.stats.rx_errors += reap(
            socket,
            &mut self.ledger,
            pool,
            self.completion_size,
            self.chunk_size,
        );
        let chunk = self.chunk_size;
        // Chunks are a power of two (an aligned UMEM): chunk arithmetic per packet is a shift.
        let shift = chunk.trailing_zeros();
        // Room for every piece the batch could need (one per packet unless frames are jumbo).
        let most_pieces = self.frame_size.div_ceil(chunk) as usize;
        let free = socket
            .tx
            .free((batch.len() * most_pieces).min(u32::MAX as usize) as u32);
        let mut taken = 0;
        let mut written = 0;
        let mut packets = 0;
        for desc in batch.descs() {
            let (start, end) = (
                u32::from(desc.offset),
                u32::from(desc.offset) + u32::from(desc.len),
            );
            // One descriptor per chunk the packet touches: a jumbo frame goes out in pieces
            // that each stay inside their chunk, as the kernel requires, chained by
            // XDP_PKT_CONTD; every other packet is one descriptor.
            let pieces = if end > start {
                ((end - 1) >> shift) - (start >> shift) + 1
            } else {
                1
            };
            if written + pieces > free {
                break;
            }
            taken += 1;
            // A packet must start in its frame's first chunk: a completion there returns it.
            if desc.len == 0 || end > self.frame_size || start >= chunk {
                // The kernel would skip it without completing it; the frame goes back now.
                self.tx_invalid += 1;
                pool.release(desc.frame);
                continue;
            }
            if !self.ledger.give(desc.frame) {
                // Outside the pool, or a frame this port already holds: not ours to send.
                self.tx_invalid += 1;
                continue;
            }
            let mut at = start;
            while at < end {
                let piece_end = end.min(((at >> shift) + 1) << shift);
                socket.tx.write(
                    written,
                    libc::xdp_desc {
                        addr: pool.addr(desc.frame, at as u16),
                        len: piece_end - at,
                        options: if piece_end < end {
                            libc::XDP_PKT_CONTD
                        } else {
                            0
                        },
                    },
                );
                written += 1;
                at = piece_end;
            }
            packets += 1;
            if let Some(chains) = self.chains.get_mut(queue as usize) {
                chains.push(pieces);
            }
            self.stats.tx_bytes += desc.len as u64;
        }
        let mut refused = None;
        if written > 0 {
            socket.tx.submit(written);
            self.tx_submitted += written as u64;
            if socket.tx.needs_wakeup() {
                refused = socket.kick_tx();
            }
        }
        self.stats.tx_packets += packets;
        batch.consume_front(taken);
        self.stats.tx_refused += batch.len() as u64;
        if let Some(error) = refused {
            self.unbound(&error);
        }
        taken
    }

    /// Free TX descriptors after returning completed frames, exactly what `tx` would write (in
    /// multi-buffer mode, the packets of the largest size that fit: at least what `tx` takes).
    /// Reads the kernel's consumer index only when the cached one leaves fewer than `want`.
    fn tx_room(&mut self, queue: QueueId, pool: &mut FramePool, want: usize) -> usize {
        let Some(Some(socket)) = self.sockets.get_mut(queue as usize) else {
            return 0;
        };
        self.stats.rx_errors += reap(
            socket,
            &mut self.ledger,
            pool,
            self.completion_size,
            self.chunk_size,
        );
        // Packets of the largest size that fit: a jumbo frame takes a descriptor per chunk.
        let most_pieces = self.frame_size.div_ceil(self.chunk_size) as usize;
        let want = (want * most_pieces).min(u32::MAX as usize) as u32;
        socket.tx.free(want) as usize / most_pieces
    }

    fn poll(&mut self, pool: &mut FramePool) {
        let mut refused = None;
        for socket in self.sockets.iter_mut().flatten() {
            self.stats.rx_errors += reap(
                socket,
                &mut self.ledger,
                pool,
                self.completion_size,
                self.chunk_size,
            );
            if self.gone.is_none() && socket.tx.needs_wakeup() && socket.tx.pending() > 0 {
                refused = refused.or(socket.kick_tx());
            }
        }
        if let Some(error) = refused {
            self.unbound(&error);
        }
    }

    fn fault(&self) -> Option<String> {
        self.gone.clone()
    }

    /// Descriptors the kernel has consumed from the TX rings. In copy mode it consumes one only
    /// once the frame is built and handed to the device inside the kick; one the device
    /// refuses (a stopped queue) or the socket's send buffer has no room for (its frames still
    /// held downstream) stays in the ring. So this is when a frame left, not when it was
    /// queued: completions come later still, when the last holder frees the frame.
    /// In multi-buffer mode a packet has left once its last piece has.
    fn tx_departed(&self) -> u64 {
        if !self.chains.is_empty() {
            return self
                .sockets
                .iter()
                .zip(&self.chains)
                .filter_map(|(socket, chains)| Some(chains.departed(socket.as_ref()?.tx.in_ring())))
                .sum();
        }
        let in_rings: u64 = self
            .sockets
            .iter()
            .flatten()
            .map(|socket| u64::from(socket.tx.in_ring()))
            .sum();
        self.tx_submitted.saturating_sub(in_rings)
    }

    fn tx_backlog(&mut self) -> bool {
        // Frames left in the ring of a port whose interface is gone never leave.
        self.gone.is_none()
            && self
                .sockets
                .iter_mut()
                .flatten()
                .any(|socket| socket.tx.pending() > 0)
    }

    fn rx_fd(&self, queue: QueueId) -> Option<RawFd> {
        self.sockets
            .get(queue as usize)?
            .as_ref()
            .map(XskSocket::raw_fd)
    }

    fn frames_held(&self) -> usize {
        self.ledger.held()
    }

    /// Takes the sockets out of the XSKMAP and frees their queues (detaching the XDP program
    /// unless other ports share it), closes the sockets (after which the kernel references none
    /// of the frames) and returns every frame the port gave the kernel to `pool`. The port is
    /// closed afterwards: `rx` and `tx` do nothing.
    fn release_all(&mut self, pool: &mut FramePool) {
        self.claim = None;
        for socket in &mut self.sockets {
            *socket = None;
        }
        if self.umem.is_of(pool) {
            self.ledger.drain(|frame| pool.release(frame));
        }
    }

    fn stats(&self) -> PortStats {
        let mut stats = self.stats;
        stats.tx_refused += self.tx_invalid;
        for socket in self.sockets.iter().flatten() {
            let kernel = socket.statistics();
            // A frame the socket could not take is one of: no UMEM frame for it (`rx_dropped`)
            // or no room in the RX ring (`rx_ring_full`). In copy mode an empty fill ring is
            // the first case too (the kernel counts the frame in both `rx_dropped` and
            // `rx_fill_ring_empty_descs`); in zero-copy mode the driver drops it before the
            // socket, so only that counter has it.
            let fill_empty = if socket.zero_copy() {
                kernel.rx_fill_ring_empty_descs
            } else {
                0
            };
            stats.rx_dropped += kernel.rx_dropped + kernel.rx_ring_full + fill_empty;
            stats.rx_errors += kernel.rx_invalid_descs;
            stats.tx_refused += kernel.tx_invalid_descs;
        }
        stats
    }
}

#[cfg(test)]
mod tests {
    use super::TxChains;

    #[test]
    fn a_packet_in_pieces_departs_with_its_last_piece() {
        let mut chains = TxChains::new(4);
        assert_eq!(chains.departed(0), 0);
        // Packets of 1, 3, 2 and 3 pieces: 9 pieces, the ring (4 slots) remembers all four.
        for pieces in [1, 3, 2, 3] {
            chains.push(pieces);
        }
        let departed: Vec<u64> = (0..=9)
            .rev()
            .map(|in_ring| chains.departed(in_ring))
            .collect();
        // Consumed 0..=9 pieces: packets end after pieces 1, 4, 6 and 9.
        assert_eq!(departed, [0, 1, 1, 1, 2, 2, 3, 3, 3, 4]);
        // A fifth packet overwrites the first's slot; in-flight ones are still counted right.
        chains.push(1);
        assert_eq!(chains.departed(1), 4);
        assert_eq!(chains.departed(0), 5);
        assert_eq!(chains.departed(4), 3);
    }
}
