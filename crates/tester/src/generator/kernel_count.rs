//! What the kernel says an interface transmitted and dropped: the only count of "sent" that a
//! generator can trust.
//!
//! A socket's TX ring takes every frame it has room for, and its completion ring hands every
//! one back, but that does not mean the interface sent it: a frame longer than the MTU allows
//! is dropped by AF_PACKET without a word (`PACKET_LOSS`) and by a veth after an AF_XDP
//! completion (counted in its `tx_dropped`). Reading the interface's own counters before and
//! after a run, and counting as sent only what it transmitted, keeps a generator from reporting
//! millions of frames the wire never saw.
//!
//! The counters come from `/proc/thread-self/net/dev`, which shows the calling thread's network
//! namespace (unlike `/sys/class/net`, which shows the namespace sysfs was mounted in).

use std::fmt;

/// An interface's transmit counters at one moment, or their difference over a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TxCounters {
    /// Frames the interface transmitted (`tx_packets`).
    pub transmitted: u64,
    /// Frames the interface dropped on transmit (`tx_dropped`).
    pub dropped: u64,
}

impl TxCounters {
    /// The counters of `interface` in the calling thread's network namespace.
    pub fn read(interface: &str) -> Result<TxCounters, String> {
        const PATH: &str = "/proc/thread-self/net/dev";
        let text = std::fs::read_to_string(PATH).map_err(|e| format!("reading {PATH}: {e}"))?;
        Self::parse(&text, interface).ok_or_else(|| {
            format!(
                "{PATH} has no counters for {interface:?}: no interface of that name in this \
                 network namespace (run in the namespace that holds it: `ip netns exec NS ...`)"
            )
        })
    }

    /// The counters of `interface` in the text of `/proc/net/dev` (two header lines, then
    /// `name: rx bytes packets errs drop fifo frame compressed multicast tx bytes packets errs
    /// drop ...`).
    fn parse(text: &str, interface: &str) -> Option<TxCounters> {
        text.lines().skip(2).find_map(|line| {
            let (name, numbers) = line.split_once(':')?;
            if name.trim() != interface {
                return None;
            }
            let numbers: Vec<u64> = numbers
                .split_whitespace()
                .map(str::parse)
                .collect::<Result<_, _>>()
                .ok()?;
            Some(TxCounters {
                transmitted: *numbers.get(9)?,
                dropped: *numbers.get(11)?,
            })
        })
    }

    /// What changed since `before` (zero where a counter went back, as when the interface was
    /// re-created in between).
    pub fn since(&self, before: &TxCounters) -> TxCounters {
        TxCounters {
            transmitted: self.transmitted.saturating_sub(before.transmitted),
            dropped: self.dropped.saturating_sub(before.dropped),
        }
    }
}

impl fmt::Display for TxCounters {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} transmitted, {} dropped",
            self.transmitted, self.dropped
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEV: &str = "\
Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:    1000      10    0    0    0     0          0         0     1000      10    0    0    0     0       0          0
ws-t0: 5 6 0 0 0 0 0 0 99999 1234 0 77 0 0 0 0
";

    #[test]
    fn the_transmit_counters_of_the_named_interface_are_read() {
        assert_eq!(
            TxCounters::parse(DEV, "ws-t0"),
            Some(TxCounters {
                transmitted: 1234,
                dropped: 77
            })
        );
        assert_eq!(
            TxCounters::parse(DEV, "lo").map(|c| c.transmitted),
            Some(10)
        );
        assert_eq!(TxCounters::parse(DEV, "ws-t"), None);
        assert_eq!(TxCounters::parse("a\nb\nx: 1 2 3\n", "x"), None);
    }

    #[test]
    fn a_missing_interface_is_named_and_loopback_is_found() {
        let error = TxCounters::read("wsnosuch9").unwrap_err();
        assert!(
            error.contains("\"wsnosuch9\"") && error.contains("ip netns exec"),
            "{error}"
        );
        assert!(TxCounters::read("lo").is_ok());
    }

    #[test]
    fn a_difference_never_goes_below_zero() {
        let before = TxCounters {
            transmitted: 10,
            dropped: 5,
        };
        let after = TxCounters {
            transmitted: 15,
            dropped: 2,
        };
        assert_eq!(
            after.since(&before),
            TxCounters {
                transmitted: 5,
                dropped: 0
            }
        );
    }
}
