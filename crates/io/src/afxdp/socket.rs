//! One AF_XDP socket: bound to one queue of one interface, with its four rings mapped.
//!
//! Opening follows the kernel's order (Documentation/networking/af_xdp.rst): create the socket;
//! register the UMEM or prepare to share one; size the fill, completion, RX and TX rings; map them
//! at the offsets `XDP_MMAP_OFFSETS` reports; bind. Binding is where modes are decided, and where
//! they can fail, so [`XskSocket::open`] retries there with a fresh socket (a socket whose bind
//! failed is not reused: the kernel may have consumed its rings):
//!
//! * zero-copy refused (EOPNOTSUPP on veth and drivers without AF_XDP zero-copy) -> copy mode,
//!   reported in [`Opened::notes`];
//! * sharing the worker's UMEM refused (e.g. the first socket is zero-copy on a NIC and this one
//!   is on a veth that can only copy: shared sockets inherit the first one's mode) -> the same
//!   region registered again for this socket alone, also reported. Frames still move between the
//!   ports without a copy in user space, since both registrations are the same memory.
//!
//! Every socket binds with `XDP_USE_NEED_WAKEUP`, so the kernel says in the rings' flags when a
//! `sendto`/`recvfrom` is needed instead of the application making one per batch.

use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};

use super::memlock::MemlockLimit;
use super::ring::{ConsumerRing, ProducerRing};
use super::umem::Umem;

/// How long a bind refused with EBUSY is retried (see [`XskSocket::open`]).
const BUSY_QUEUE_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// Sizes of the four rings (each a power of two).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RingSizes {
    pub(crate) fill: u32,
    pub(crate) completion: u32,
    pub(crate) rx: u32,
    pub(crate) tx: u32,
    /// `SO_SNDBUFFORCE` bytes, if any ([`super::AfXdpConfig::send_buffer`]).
    pub(crate) send_buffer: Option<u32>,
}

/// A system call of opening a socket failed.
#[derive(Debug)]
pub(crate) struct SocketError {
    /// What was being done, e.g. "bind".
    pub(crate) step: &'static str,
    pub(crate) source: std::io::Error,
}

/// The step that registers the UMEM, whose ENOBUFS means RLIMIT_MEMLOCK (see `memlock`).
pub(crate) const REGISTER_UMEM: &str = "register the UMEM (XDP_UMEM_REG)";

fn step(step: &'static str) -> impl FnOnce(std::io::Error) -> SocketError {
    move |source| SocketError { step, source }
}

/// How to bind.
#[derive(Clone, Copy, Debug)]
enum Bind {
    /// Share the UMEM of this bound socket (inheriting its copy/zero-copy mode).
    Shared(RawFd),
    /// Register the UMEM on this socket; force zero-copy or copy.
    Own { zero_copy: bool },
}

/// A bound AF_XDP socket and its rings.
pub(crate) struct XskSocket {
    /// Closed in `Drop`, under the UMEM's lock.
    fd: Option<OwnedFd>,
    raw_fd: RawFd,
    umem: Umem,
    /// Whether this socket is listed in the UMEM as one others may share.
    listed: bool,
    pub(crate) fill: ProducerRing<u64>,
    pub(crate) completion: ConsumerRing<u64>,
    pub(crate) rx: ConsumerRing<libc::xdp_desc>,
    pub(crate) tx: ProducerRing<libc::xdp_desc>,
    /// Whether the kernel runs this socket in zero-copy mode (read back after bind).
    zero_copy: bool,
}

/// A socket and what happened while opening it.
pub(crate) struct Opened {
    pub(crate) socket: XskSocket,
    /// Fallbacks taken, in words (empty when everything went as asked).
    pub(crate) notes: Vec<String>,
}

impl XskSocket {
    /// Opens a socket on queue `queue` of interface `ifindex` using `umem`; zero-copy first when
    /// `zero_copy` is asked for.
    ///
    /// A queue whose previous socket just closed stays registered to that socket's UMEM until a
    /// deferred kernel work item releases it (`xp_put_pool` -> `xp_release_deferred`); a bind
    /// meanwhile fails with EBUSY. So a bind refused with EBUSY is tried again, with a fresh
    /// socket, for up to [`BUSY_QUEUE_WAIT`]; a queue that stays busy (another program's socket)
    /// is reported after that.
    pub(crate) fn open(
        umem: &Umem,
        ifindex: u32,
        queue: u32,
        sizes: RingSizes,
        zero_copy: bool,
    ) -> Result<Opened, SocketError> {
        let deadline = std::time::Instant::now() + BUSY_QUEUE_WAIT;
        loop {
            match Self::open_once(umem, ifindex, queue, sizes, zero_copy) {
                Err(error)
                    if error.source.raw_os_error() == Some(libc::EBUSY)
                        && std::time::Instant::now() < deadline =>
                {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
                result => return result,
            }
        }
    }

    fn open_once(
        umem: &Umem,
        ifindex: u32,
        queue: u32,
        sizes: RingSizes,
        zero_copy: bool,
    ) -> Result<Opened, SocketError> {
        // Held for the whole open: the socket we share cannot close meanwhile.
        let mut listed = umem.sockets();
        let mut notes = Vec::new();
        if let Some(&anchor) = listed.first() {
            match Self::try_open(umem, ifindex, queue, sizes, Bind::Shared(anchor)) {
                Ok(mut socket) => {
                    socket.listed = true;
                    listed.push(socket.raw_fd);
                    return Ok(Opened { socket, notes });
                }
                Err(error) => notes.push(format!(
                    "sharing the worker's UMEM refused ({}: {}), registered it again for this socket",
                    error.step, error.source
                )),
            }
        }
        let socket = if zero_copy {
            match Self::try_open(umem, ifindex, queue, sizes, Bind::Own { zero_copy: true }) {
                Ok(socket) => socket,
                Err(error) => {
                    notes.push(format!("zero-copy refused: {}", error.source));
                    Self::try_open(umem, ifindex, queue, sizes, Bind::Own { zero_copy: false })?
                }
            }
        } else {
            Self::try_open(umem, ifindex, queue, sizes, Bind::Own { zero_copy: false })?
        };
        let mut socket = socket;
        if listed.is_empty() {
            socket.listed = true;
            listed.push(socket.raw_fd);
        }
        Ok(Opened { socket, notes })
    }

    fn try_open(
        umem: &Umem,
        ifindex: u32,
        queue: u32,
        sizes: RingSizes,
        bind: Bind,
    ) -> Result<Self, SocketError> {
        // SAFETY: socket(2) has no memory preconditions; the result is checked before use.
        let raw = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if raw < 0 {
            return Err(step("socket(AF_XDP)")(std::io::Error::last_os_error()));
        }
        // SAFETY: `raw` is a fresh descriptor nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        if let Bind::Own { .. } = bind {
            let register = || set_option(&fd, libc::XDP_UMEM_REG, &umem.registration());
            // ENOBUFS: the pages exceed RLIMIT_MEMLOCK; a soft limit below the hard one may
            // be raised, and is, once, before the port reports the limit (`memlock`).
            register()
                .or_else(|error| match error.raw_os_error() {
                    Some(libc::ENOBUFS) if MemlockLimit::raise_to_hard().unwrap_or(false) => {
                        register()
                    }
                    _ => Err(error),
                })
                .map_err(step(REGISTER_UMEM))?;
        }
        set_option(&fd, libc::XDP_UMEM_FILL_RING, &sizes.fill)
            .map_err(step("size the fill ring"))?;
        set_option(&fd, libc::XDP_UMEM_COMPLETION_RING, &sizes.completion)
            .map_err(step("size the completion ring"))?;
        set_option(&fd, libc::XDP_RX_RING, &sizes.rx).map_err(step("size the RX ring"))?;
        set_option(&fd, libc::XDP_TX_RING, &sizes.tx).map_err(step("size the TX ring"))?;
        if let Some(bytes) = sizes.send_buffer {
            let bytes = bytes.min(i32::MAX as u32 / 2) as libc::c_int;
            set_option_at(&fd, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, &bytes).map_err(step(
                "size the send buffer (SO_SNDBUFFORCE, needs CAP_NET_ADMIN)",
            ))?;
        }
        let offsets: libc::xdp_mmap_offsets =
            option(&fd, libc::XDP_MMAP_OFFSETS).map_err(step("read the ring offsets"))?;
        let fill = ProducerRing::map(
            fd.as_fd(),
            libc::XDP_UMEM_PGOFF_FILL_RING,
            sizes.fill,
            &offsets.fr,
        )
        .map_err(step("map the fill ring"))?;
        let completion = ConsumerRing::map(
            fd.as_fd(),
            libc::XDP_UMEM_PGOFF_COMPLETION_RING,
            sizes.completion,
            &offsets.cr,
        )
        .map_err(step("map the completion ring"))?;
        let rx = ConsumerRing::map(
            fd.as_fd(),
            libc::XDP_PGOFF_RX_RING as u64,
            sizes.rx,
            &offsets.rx,
        )
        .map_err(step("map the RX ring"))?;
        let tx = ProducerRing::map(
            fd.as_fd(),
            libc::XDP_PGOFF_TX_RING as u64,
            sizes.tx,
            &offsets.tx,
        )
        .map_err(step("map the TX ring"))?;

        let (flags, shared_fd) = match bind {
            Bind::Shared(anchor) => (libc::XDP_SHARED_UMEM, anchor as u32),
            Bind::Own { zero_copy } => {
                let mode = if zero_copy {
                    libc::XDP_ZEROCOPY
                } else {
                    libc::XDP_COPY
                };
                let sg = if umem.is_multi_buffer() {
                    libc::XDP_USE_SG
                } else {
                    0
                };
                (mode | libc::XDP_USE_NEED_WAKEUP | sg, 0)
            }
        };
        let address = libc::sockaddr_xdp {
            sxdp_family: libc::AF_XDP as u16,
            sxdp_flags: flags,
            sxdp_ifindex: ifindex,
            sxdp_queue_id: queue,
            sxdp_shared_umem_fd: shared_fd,
        };
        // SAFETY: `address` is a valid sockaddr_xdp and its exact size is passed.
        let rc = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&address as *const libc::sockaddr_xdp).cast(),
                std::mem::size_of::<libc::sockaddr_xdp>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(step("bind")(std::io::Error::last_os_error()));
        }
        let options: libc::xdp_options =
            option(&fd, libc::XDP_OPTIONS).map_err(step("read the socket options"))?;
        Ok(Self {
            raw_fd: fd.as_raw_fd(),
            fd: Some(fd),
            umem: umem.clone(),
            listed: false,
            fill,
            completion,
            rx,
            tx,
            zero_copy: options.flags & libc::XDP_OPTIONS_ZEROCOPY != 0,
        })
    }

    /// The socket's descriptor (for poll(2) and the XSKMAP).
    pub(crate) fn raw_fd(&self) -> RawFd {
        self.raw_fd
    }

    /// Whether the kernel moves frames of this socket without copying them.
    pub(crate) fn zero_copy(&self) -> bool {
        self.zero_copy
    }

    /// Whether the socket is on the worker's one UMEM registration (it made it or joined it),
    /// rather than on a registration of its own after joining was refused.
    pub(crate) fn on_worker_umem(&self) -> bool {
        self.listed
    }

    /// Asks the kernel to process the TX ring (copy mode transmits only inside this call, at
    /// most 32 frames per call). EAGAIN (more work than one call does, or a full completion
    /// ring), EBUSY and ENOBUFS are transient, and frames a down interface does not take stay
    /// in the ring, counted as held, until the next kick; so only ENXIO is returned: the socket
    /// is no longer bound, which happens when its interface is unregistered (deleted or moved
    /// to another network namespace).
    #[inline]
    pub(crate) fn kick_tx(&self) -> Option<std::io::Error> {
        // SAFETY: a zero-length send with no buffer and no address touches no user memory.
        let rc = unsafe {
            libc::sendto(
                self.raw_fd,
                std::ptr::null(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null(),
                0,
            )
        };
        if rc >= 0 {
            return None;
        }
        let error = std::io::Error::last_os_error();
        (error.raw_os_error() == Some(libc::ENXIO)).then_some(error)
    }

    /// Wakes the driver to refill from the fill ring (zero-copy drivers that asked for it).
    #[inline]
    pub(crate) fn kick_rx(&self) {
        // SAFETY: a zero-length receive with no buffer and no address touches no user memory.
        unsafe {
            libc::recvfrom(
                self.raw_fd,
                std::ptr::null_mut(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            );
        }
    }

    /// The kernel's counters for this socket (`XDP_STATISTICS`); zeros if it cannot be read.
    pub(crate) fn statistics(&self) -> libc::xdp_statistics {
        let empty = libc::xdp_statistics {
            rx_dropped: 0,
            rx_invalid_descs: 0,
            tx_invalid_descs: 0,
            rx_ring_full: 0,
            rx_fill_ring_empty_descs: 0,
            tx_ring_empty_descs: 0,
        };
        match &self.fd {
            Some(fd) => option(fd, libc::XDP_STATISTICS).unwrap_or(empty),
            None => empty,
        }
    }
}

impl Drop for XskSocket {
    fn drop(&mut self) {
        // Close under the lock, so no socket being opened names this descriptor in
        // `sxdp_shared_umem_fd` after it was closed (or reused for something else).
        let mut listed = self.umem.sockets();
        if self.listed {
            listed.retain(|&fd| fd != self.raw_fd);
        }
        drop(self.fd.take());
    }
}

/// Sets socket option `name` of level SOL_XDP to `value`.
fn set_option<T>(fd: &OwnedFd, name: libc::c_int, value: &T) -> std::io::Result<()> {
    set_option_at(fd, libc::SOL_XDP, name, value)
}

/// Sets socket option `name` of level `level` to `value`.
fn set_option_at<T>(
    fd: &OwnedFd,
    level: libc::c_int,
    name: libc::c_int,
    value: &T,
) -> std::io::Result<()> {
    // SAFETY: `value` points at a live, initialised `T` and its exact size is passed; the
    // kernel only reads it.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (value as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Reads socket option `name` of level SOL_XDP as a `T` (a plain C struct of integers).
fn option<T: Copy>(fd: &OwnedFd, name: libc::c_int) -> std::io::Result<T> {
    let mut value = std::mem::MaybeUninit::<T>::zeroed();
    let mut len = std::mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: the buffer is `len` writable bytes; the kernel writes at most `len` of them and
    // reports how many in `len`.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_XDP,
            name,
            value.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: the buffer was zero-initialised and T is a C struct of integers, for which all-zero
    // (and any bytes the kernel wrote) is a valid value.
    Ok(unsafe { value.assume_init() })
}
