//! [`XdpAttachment`]: one interface's XDP program and XSKMAP, shared by the AF_XDP ports that
//! several workers open on that interface.
//!
//! An interface takes one XDP program, and the program's XSKMAP has one slot per queue, so
//! workers that serve different queues of one interface must share one attachment: it is made
//! once (by whoever builds the workers), and each worker's [`AfXdpPort`] claims its queues,
//! puts its sockets into their slots, and empties the slots again when it is released or
//! dropped. Every worker keeps its own pool and [`Umem`].
//!
//! A queue belongs to one worker. The kernel registers one UMEM per queue of an interface and
//! refuses (EBUSY) a socket on a queue that already has a socket of another UMEM, and two
//! threads cannot share one socket's rings without a lock; a worker that owns no queue of a port
//! therefore cannot transmit on it either. Claims are checked here before any socket is made,
//! so a configuration that gives one queue to two workers fails with the port and the queue
//! named ([`AfXdpError::QueueTaken`]) rather than with a bare EBUSY from `bind`.
//!
//! The attachment is reference-counted: the caller's [`Arc`] and every port opened on it hold
//! one, and the program detaches when the last goes (or when the process dies: the link is a
//! descriptor).
//!
//! [`AfXdpPort`]: super::AfXdpPort
//! [`Umem`]: super::Umem

use std::os::fd::{BorrowedFd, OwnedFd, RawFd};
use std::sync::{Arc, Mutex, MutexGuard};

use super::config::{AfXdpError, XdpMode};
use super::interface::Interface;
use super::port::{program_error, query_interface};
use super::program::{ProgramError, XdpProgram};
use crate::port::QueueId;

/// The XDP program and XSKMAP of one interface, attached once and shared by the ports of
/// several workers (see [`AfXdpPort::open_shared`](super::AfXdpPort::open_shared)).
#[derive(Debug)]
pub struct XdpAttachment {
    program: XdpProgram,
    interface: String,
    ifindex: u32,
    /// The interface's queue count when attached: the XSKMAP's size.
    queues: u16,
    /// Index = queue; whether a port holds the queue's slot.
    claimed: Mutex<Vec<bool>>,
}

impl XdpAttachment {
    /// Attaches the AF_XDP redirect program and an empty XSKMAP (one slot per queue the
    /// interface has now) to `interface` of the calling thread's network namespace, in `mode`.
    /// Frames of queues without a socket go to the kernel stack until a port claims them.
    pub fn attach(interface: &str, mode: XdpMode) -> Result<XdpAttachment, AfXdpError> {
        let described = query_interface(interface)?;
        Self::attach_described(interface, &described, mode)
    }

    /// [`XdpAttachment::attach`] for an interface already described.
    pub(crate) fn attach_described(
        name: &str,
        interface: &Interface,
        mode: XdpMode,
    ) -> Result<XdpAttachment, AfXdpError> {
        let program = XdpProgram::attach(interface.ifindex, interface.queues as u32, mode)
            .map_err(|error| program_error(name, error))?;
        Ok(Self::with_program(name, interface, program))
    }

    /// [`XdpAttachment::attach`] with a program loaded elsewhere (the XDP fast path, which hands
    /// the frames it does not forward to the sockets): `program` is attached to `interface`,
    /// and the interface's queue *q* has slot `base + q` of the XSKMAP `xskmap`, which must
    /// have room for every queue. The descriptors are duplicated; the caller keeps its own.
    pub fn attach_loaded(
        interface: &str,
        program: BorrowedFd<'_>,
        xskmap: BorrowedFd<'_>,
        base: u32,
        mode: XdpMode,
    ) -> Result<XdpAttachment, AfXdpError> {
        let duplicate = |fd: BorrowedFd<'_>| {
            fd.try_clone_to_owned()
                .map_err(|error| program_error(interface, ProgramError::Map(error)))
        };
        Self::attach_owned(
            interface,
            duplicate(program)?,
            duplicate(xskmap)?,
            base,
            mode,
        )
    }

    /// [`XdpAttachment::attach_loaded`] with descriptors of its own (the probe counter's
    /// sampling program, which redirects only its samples to the sockets, gives its own).
    pub(crate) fn attach_owned(
        interface: &str,
        program: OwnedFd,
        xskmap: OwnedFd,
        base: u32,
        mode: XdpMode,
    ) -> Result<XdpAttachment, AfXdpError> {
        let described = query_interface(interface)?;
        let program = XdpProgram::attach_loaded(program, xskmap, base, described.ifindex, mode)
            .map_err(|error| program_error(interface, error))?;
        Ok(Self::with_program(interface, &described, program))
    }

    fn with_program(name: &str, interface: &Interface, program: XdpProgram) -> XdpAttachment {
        XdpAttachment {
            program,
            interface: name.to_string(),
            ifindex: interface.ifindex,
            queues: interface.queues,
            claimed: Mutex::new(vec![false; interface.queues as usize]),
        }
    }

    /// The interface's name.
    pub fn interface(&self) -> &str {
        &self.interface
    }

    /// How many queues the interface had when the program was attached (the XSKMAP's slots).
    pub fn queues(&self) -> u16 {
        self.queues
    }

    /// How the program is attached: "native" or "generic".
    pub fn mode(&self) -> &str {
        self.program.mode()
    }

    /// Why `XdpMode::Auto` fell back to generic mode, if it did.
    pub fn fallback(&self) -> Option<&str> {
        self.program.fallback()
    }

    /// The interface's index in the namespace it was attached in.
    pub(crate) fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// Claims `queues` (each below [`XdpAttachment::queues`]) for one port; all or none. On
    /// failure returns the first queue another port holds.
    pub(crate) fn claim(self: &Arc<Self>, queues: &[QueueId]) -> Result<Claim, QueueId> {
        let mut claimed = self.claimed();
        if let Some(&taken) = queues
            .iter()
            .find(|&&queue| claimed.get(queue as usize).copied().unwrap_or(true))
        {
            return Err(taken);
        }
        for &queue in queues {
            if let Some(slot) = claimed.get_mut(queue as usize) {
                *slot = true;
            }
        }
        Ok(Claim {
            attachment: Arc::clone(self),
            queues: queues.to_vec(),
        })
    }

    fn claimed(&self) -> MutexGuard<'_, Vec<bool>> {
        // Each change is one flag per queue, so a panic while the lock was held cannot leave the
        // list inconsistent; a poisoned lock is used as is.
        self.claimed
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The queues of an [`XdpAttachment`] one port holds. Dropping it empties their XSKMAP slots
/// (the queues' frames go to the kernel stack again) and frees them for another port.
#[derive(Debug)]
pub(crate) struct Claim {
    attachment: Arc<XdpAttachment>,
    queues: Vec<QueueId>,
}

impl Claim {
    /// The attachment the queues belong to.
    pub(crate) fn attachment(&self) -> &XdpAttachment {
        &self.attachment
    }

    /// Points claimed queue `queue`'s slot at bound socket `socket`.
    pub(crate) fn insert(&self, queue: QueueId, socket: RawFd) -> Result<(), ProgramError> {
        debug_assert!(self.queues.contains(&queue));
        self.attachment.program.insert(queue as u32, socket)
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        let mut claimed = self.attachment.claimed();
        for &queue in &self.queues {
            // A failure leaves a slot naming a socket that is about to close; closing an AF_XDP
            // socket removes it from every map, so the slot empties anyway.
            let _ = self.attachment.program.remove(queue as u32);
            if let Some(slot) = claimed.get_mut(queue as usize) {
                *slot = false;
            }
        }
    }
}
