//! Packet sockets and the system calls around them: creating, configuring, binding, asking the
//! kernel about the interface, mapping a ring, kicking transmission.
//!
//! Everything here runs when a port opens, except [`kick`] (once per TX batch) and
//! [`kernel_drops`] (when stats are read). Errors come back as `std::io::Error` and the port turns
//! them into its typed error, naming what it was doing.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;

/// The system page size (ring blocks are multiples of it).
pub(crate) fn page_size() -> u32 {
    // SAFETY: sysconf has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if size > 0 { size as u32 } else { 4096 }
}

fn check(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// A new raw packet socket that receives nothing until it is bound with a protocol.
pub(crate) fn packet_socket() -> io::Result<OwnedFd> {
    // SAFETY: socket has no memory preconditions; the result is checked.
    let fd =
        check(unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: `fd` is a descriptor we just created and own exclusively.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `setsockopt(fd, level, name, &value)`.
pub(crate) fn set_option<T>(fd: &OwnedFd, level: i32, name: i32, value: &T) -> io::Result<()> {
    // SAFETY: `value` points to a live `T` of exactly the length passed; the kernel only reads it.
    check(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (value as *const T).cast(),
            size_of::<T>() as libc::socklen_t,
        )
    })
    .map(drop)
}

/// Facts about the interface a port is opened on.
#[derive(Clone, Debug)]
pub(crate) struct Interface {
    pub index: i32,
    pub mac: [u8; 6],
    pub mtu: u32,
    /// Up and running (carrier) when asked; the kernel sets "running" asynchronously, up to
    /// a second after a link comes up.
    pub up: bool,
}

fn request(name: &str) -> io::Result<libc::ifreq> {
    let bytes = name.as_bytes();
    if bytes.is_empty() || bytes.len() >= libc::IFNAMSIZ || bytes.contains(&0) {
        return Err(io::Error::from_raw_os_error(libc::ENODEV));
    }
    // SAFETY: ifreq is plain old data (a name and a union of integers and sockaddrs) for which
    // all-zero bytes are a valid value.
    let mut request: libc::ifreq = unsafe { std::mem::zeroed() };
    for (slot, &byte) in request.ifr_name.iter_mut().zip(bytes) {
        *slot = byte as libc::c_char;
    }
    Ok(request)
}

fn ioctl(fd: &OwnedFd, command: libc::c_ulong, request: &mut libc::ifreq) -> io::Result<()> {
    // SAFETY: the SIOCGIF* requests used here read the name from and write one union member of
    // the `ifreq` we pass, which lives across the call.
    check(unsafe { libc::ioctl(fd.as_raw_fd(), command, request as *mut libc::ifreq) }).map(drop)
}

/// Index, MAC, MTU and state of interface `name`, asked through `fd` (so in `fd`'s namespace).
pub(crate) fn interface(fd: &OwnedFd, name: &str) -> io::Result<Interface> {
    let mut index = request(name)?;
    ioctl(fd, libc::SIOCGIFINDEX, &mut index)?;
    let mut mtu = request(name)?;
    ioctl(fd, libc::SIOCGIFMTU, &mut mtu)?;
    let mut hwaddr = request(name)?;
    ioctl(fd, libc::SIOCGIFHWADDR, &mut hwaddr)?;
    let mut flags = request(name)?;
    ioctl(fd, libc::SIOCGIFFLAGS, &mut flags)?;
    // SAFETY: each ioctl above succeeded, so the kernel wrote the union member it answers with.
    let (index, mtu, sa_data, flags) = unsafe {
        (
            index.ifr_ifru.ifru_ifindex,
            mtu.ifr_ifru.ifru_mtu,
            hwaddr.ifr_ifru.ifru_hwaddr.sa_data,
            flags.ifr_ifru.ifru_flags,
        )
    };
    let mut mac = [0u8; 6];
    for (out, &byte) in mac.iter_mut().zip(&sa_data) {
        *out = byte as u8;
    }
    let running = (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
    Ok(Interface {
        index,
        mac,
        mtu: mtu.max(0) as u32,
        up: flags & running == running,
    })
}

/// Binds `fd` to interface `index` for `protocol` (0: transmit only, receive nothing).
pub(crate) fn bind(fd: &OwnedFd, index: i32, protocol: u16) -> io::Result<()> {
    // SAFETY: sockaddr_ll is plain old data; all-zero is valid.
    let mut address: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    address.sll_family = libc::AF_PACKET as u16;
    address.sll_protocol = protocol.to_be();
    address.sll_ifindex = index;
    // SAFETY: `address` is a valid sockaddr_ll of the length passed and lives across the call.
    check(unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&address as *const libc::sockaddr_ll).cast(),
            size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    })
    .map(drop)
}

/// Takes the socket's pending error (`SO_ERROR`, which reading clears): what a poll(2) that
/// answered POLLERR was about.
pub(crate) fn take_error(fd: &OwnedFd) -> io::Result<io::Error> {
    let mut error: libc::c_int = 0;
    let mut len = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `error` and `len` are live and describe an int-sized buffer the kernel writes.
    check(unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_ERROR,
            (&mut error as *mut libc::c_int).cast(),
            &mut len,
        )
    })?;
    Ok(io::Error::from_raw_os_error(error))
}

/// Asks the kernel to transmit every slot marked for sending, without waiting.
pub(crate) fn kick(fd: &OwnedFd) -> io::Result<()> {
    // SAFETY: a zero-length send with null buffer and address is how a TX ring is flushed; the
    // kernel reads only the ring mapping it owns.
    let rc = unsafe {
        libc::sendto(
            fd.as_raw_fd(),
            std::ptr::null(),
            0,
            libc::MSG_DONTWAIT,
            std::ptr::null(),
            0,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Packets the kernel dropped because the RX ring was full since the last call (reading the
/// statistics resets them).
pub(crate) fn kernel_drops(fd: &OwnedFd) -> u64 {
    // SAFETY: tpacket_stats_v3 is plain old data; all-zero is valid.
    let mut stats: libc::tpacket_stats_v3 = unsafe { std::mem::zeroed() };
    let mut len = size_of::<libc::tpacket_stats_v3>() as libc::socklen_t;
    // SAFETY: `stats` and `len` are live and `len` is the size of `stats`; the kernel writes at
    // most `len` bytes.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_PACKET,
            libc::PACKET_STATISTICS,
            (&mut stats as *mut libc::tpacket_stats_v3).cast(),
            &mut len,
        )
    };
    if rc < 0 { 0 } else { stats.tp_drops as u64 }
}

/// A shared mapping of a socket's ring, unmapped when dropped.
pub(crate) struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is owned by exactly one ring, which is owned by one port; moving it to
// another thread moves the sole user-space owner.
unsafe impl Send for Mapping {}

impl Mapping {
    /// Maps the ring(s) configured on `fd` (`len` bytes).
    pub(crate) fn new(fd: &OwnedFd, len: usize) -> io::Result<Mapping> {
        // SAFETY: no address hint; the kernel checks `len` against the configured ring and the
        // result is checked against MAP_FAILED.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr = NonNull::new(ptr.cast::<u8>()).ok_or(io::Error::other("mmap returned null"))?;
        Ok(Mapping { ptr, len })
    }

    pub(crate) fn ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are exactly what mmap returned; no reference into the mapping
        // outlives the ring that owns it.
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.len);
        }
    }
}
