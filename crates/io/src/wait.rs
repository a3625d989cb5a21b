//! Sleeping until a port has work, so an idle worker does not burn its core.
//!
//! On a 2-core machine the kernel's veth/XDP work for a port runs on the same core as the worker
//! that drains it: a worker that spins on an empty ring steals the very time the kernel needs to
//! fill it. Waiting in `poll(2)` on the ports' descriptors yields the core until frames arrive.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// An eventfd a control thread rings to wake a worker asleep in [`wait`] on it, so that a
/// command is answered at once instead of when the sleep's timeout ends (up to 10 ms: a
/// controller's FLOW_MOD and BARRIER round trip took that long with an idle switch).
pub struct Doorbell(OwnedFd);

impl Doorbell {
    pub fn new() -> std::io::Result<Doorbell> {
        // SAFETY: eventfd(2) with constant arguments; the result is checked before use.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `fd` was just opened and is owned by nothing else.
        Ok(Doorbell(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// Makes the descriptor readable (a failure, the counter full, only means no wake-up).
    pub fn ring(&self) {
        let one = 1u64.to_ne_bytes();
        // SAFETY: writes 8 bytes from a live array to our own eventfd.
        let _ = unsafe { libc::write(self.0.as_raw_fd(), one.as_ptr().cast(), one.len()) };
    }

    /// Makes the descriptor unreadable again (does nothing when it was not rung).
    pub fn answer(&self) {
        let mut count = [0u8; 8];
        // SAFETY: reads at most 8 bytes into a live array from our own non-blocking eventfd.
        let _ = unsafe { libc::read(self.0.as_raw_fd(), count.as_mut_ptr().cast(), count.len()) };
    }

    /// The descriptor to [`wait`] on.
    pub fn fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

/// What one wait found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Readiness {
    /// Descriptors readable or in error.
    pub ready: usize,
    /// Bit `i` set: `fds[i]` is in error (POLLERR, POLLHUP, POLLNVAL), e.g. a socket whose
    /// interface was deleted. Such a descriptor ends every wait at once until its owner deals
    /// with it.
    pub failed: u64,
}

/// Blocks until one of `fds` is readable or `timeout` passes; returns how many are readable
/// (0 on timeout or when interrupted by a signal). At most 64 descriptors are watched.
pub fn wait_readable(fds: &[RawFd], timeout: Duration) -> std::io::Result<usize> {
    wait(fds, timeout).map(|readiness| readiness.ready)
}

/// [`wait_readable`], saying also which descriptors are in error.
pub fn wait(fds: &[RawFd], timeout: Duration) -> std::io::Result<Readiness> {
    const MAX: usize = 64;
    let mut pollfds = [libc::pollfd {
        fd: -1,
        events: 0,
        revents: 0,
    }; MAX];
    let count = fds.len().min(MAX);
    for (slot, &fd) in pollfds.iter_mut().zip(&fds[..count]) {
        *slot = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
    }
    let millis = timeout.as_millis().min(i32::MAX as u128) as i32;
    // SAFETY: `pollfds[..count]` is a valid, initialised array of `count` pollfd structs that
    // lives across the call; poll only writes their `revents`.
    let rc = unsafe { libc::poll(pollfds.as_mut_ptr(), count as libc::nfds_t, millis) };
    if rc < 0 {
        let error = std::io::Error::last_os_error();
        if error.kind() == std::io::ErrorKind::Interrupted {
            return Ok(Readiness::default());
        }
        return Err(error);
    }
    let failed = pollfds[..count]
        .iter()
        .enumerate()
        .filter(|(_, slot)| slot.revents & (libc::POLLERR | libc::POLLHUP | libc::POLLNVAL) != 0)
        .fold(0u64, |mask, (index, _)| mask | 1 << index);
    Ok(Readiness {
        ready: rc as usize,
        failed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rung_doorbell_ends_a_wait_until_it_is_answered() {
        let bell = Doorbell::new().unwrap();
        assert_eq!(wait_readable(&[bell.fd()], Duration::ZERO).unwrap(), 0);
        bell.ring();
        bell.ring();
        assert_eq!(
            wait_readable(&[bell.fd()], Duration::from_secs(5)).unwrap(),
            1
        );
        bell.answer();
        assert_eq!(wait_readable(&[bell.fd()], Duration::ZERO).unwrap(), 0);
        bell.answer();
    }
    use std::io::Write;
    use std::os::fd::AsRawFd;

    #[test]
    fn wakes_on_data_and_times_out_without() {
        let (reader, mut writer) = std::io::pipe().unwrap();
        let fd = reader.as_raw_fd();
        assert_eq!(wait_readable(&[fd], Duration::from_millis(1)).unwrap(), 0);
        writer.write_all(b"x").unwrap();
        assert_eq!(wait_readable(&[fd], Duration::from_secs(5)).unwrap(), 1);
    }

    #[test]
    fn a_descriptor_in_error_is_named_by_its_place() {
        let (reader, writer) = std::io::pipe().unwrap();
        let (quiet, _open) = std::io::pipe().unwrap();
        // A pipe whose writer closed polls POLLHUP: a descriptor that will never be readable
        // again, as a socket whose interface is gone.
        drop(writer);
        let fds = [quiet.as_raw_fd(), reader.as_raw_fd()];
        assert_eq!(
            wait(&fds, Duration::from_secs(5)).unwrap(),
            Readiness {
                ready: 1,
                failed: 0b10
            }
        );
    }
}
