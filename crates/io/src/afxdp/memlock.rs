//! RLIMIT_MEMLOCK, which the kernel charges a UMEM's pinned pages to: a process without
//! CAP_IPC_LOCK under a low limit (`ulimit -l 64`, the default of many distributions and of
//! systemd units) cannot register a frame pool, and the kernel says only ENOBUFS.
//!
//! The registration raises the soft limit to the hard one and tries again when that is
//! higher (an unprivileged process may do so), and only when that does not suffice reports the
//! limits and how to raise them, instead of letting ENOBUFS read like a missing kernel feature.

use std::fmt;

/// The soft and hard RLIMIT_MEMLOCK of this process, in bytes (`u64::MAX`: unlimited).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemlockLimit {
    pub soft: u64,
    pub hard: u64,
}

impl MemlockLimit {
    /// This process's limits.
    pub(crate) fn read() -> std::io::Result<MemlockLimit> {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: `limit` is a valid rlimit the kernel writes, and it outlives the call.
        if unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut limit) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(MemlockLimit {
            soft: limit.rlim_cur,
            hard: limit.rlim_max,
        })
    }

    /// Raises the soft limit to the hard one; whether it was lower.
    pub(crate) fn raise_to_hard() -> std::io::Result<bool> {
        let limit = MemlockLimit::read()?;
        if limit.soft >= limit.hard {
            return Ok(false);
        }
        let raised = libc::rlimit {
            rlim_cur: limit.hard,
            rlim_max: limit.hard,
        };
        // SAFETY: `raised` is a valid rlimit that outlives the call; the kernel only reads it.
        if unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &raised) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(true)
    }
}

impl fmt::Display for MemlockLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bytes = |value: u64| match value {
            u64::MAX => "unlimited".to_string(),
            value => format!("{} KiB", value / 1024),
        };
        write!(f, "{} (hard limit {})", bytes(self.soft), bytes(self.hard))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_read_as_ulimit_shows_them() {
        let limit = MemlockLimit {
            soft: 64 * 1024,
            hard: u64::MAX,
        };
        assert_eq!(limit.to_string(), "64 KiB (hard limit unlimited)");
        let own = MemlockLimit::read().unwrap();
        assert!(own.soft <= own.hard, "{own}");
    }

    fn set(limit: MemlockLimit) {
        let limit = libc::rlimit {
            rlim_cur: limit.soft,
            rlim_max: limit.hard,
        };
        // SAFETY: `limit` is a valid rlimit that outlives the call.
        assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &limit) }, 0);
    }

    #[test]
    fn a_soft_limit_below_the_hard_one_is_raised_to_it_once() {
        let before = MemlockLimit::read().unwrap();
        if before.hard <= 64 * 1024 {
            return;
        }
        set(MemlockLimit {
            soft: 64 * 1024,
            hard: before.hard,
        });
        assert!(MemlockLimit::raise_to_hard().unwrap());
        assert_eq!(MemlockLimit::read().unwrap().soft, before.hard);
        assert!(!MemlockLimit::raise_to_hard().unwrap());
        set(before);
    }
}
