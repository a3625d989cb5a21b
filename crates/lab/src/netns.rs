//! Moving the calling thread into a named network namespace and back.
//!
//! Sockets belong to the namespace of the thread that created them and stay there, so a process
//! in the root namespace can open AF_XDP or AF_PACKET sockets on a lab's interfaces by entering
//! the namespace for the duration of the open. `setns` affects only the calling thread.

use std::fs::File;
use std::os::fd::AsRawFd;

/// While alive, the calling thread is in another network namespace; dropping it returns the
/// thread to the namespace it was in.
pub struct NetnsGuard {
    /// `None` when the thread stayed where it was ([`crate::HERE`]).
    original: Option<File>,
}

/// Moves the calling thread into network namespace `name` (as created by `ip netns add`);
/// [`crate::HERE`] leaves it in its own.
pub fn enter(name: &str) -> std::io::Result<NetnsGuard> {
    if name == crate::HERE {
        return Ok(NetnsGuard { original: None });
    }
    let original = File::open("/proc/thread-self/ns/net")?;
    let target = File::open(format!("/run/netns/{name}")).map_err(|error| {
        std::io::Error::new(
            error.kind(),
            format!(
                "network namespace {name} not found ({error}); create it with `wirespeed lab up`"
            ),
        )
    })?;
    set_netns(&target)?;
    Ok(NetnsGuard {
        original: Some(original),
    })
}

fn set_netns(file: &File) -> std::io::Result<()> {
    // SAFETY: the descriptor is a valid open namespace file for the duration of the call; setns
    // changes only the calling thread's namespace and reports failure through its return value.
    let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

impl Drop for NetnsGuard {
    fn drop(&mut self) {
        let Some(original) = &self.original else {
            return;
        };
        if let Err(error) = set_netns(original) {
            // A thread left in the wrong namespace would create its next sockets there.
            panic!("could not return the thread to its network namespace: {error}");
        }
    }
}
