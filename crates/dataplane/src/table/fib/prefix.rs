//! IPv4 and IPv6 prefixes as the FIB stores them: address bits in host order (the value of
//! `Ipv4Addr::to_bits`) with the host part cleared, and a length.
//!
//! Clearing the host bits once, on construction, is what lets the tables and the route set treat
//! `10.1.2.3/8` and `10.0.0.0/8` as the same key.

use core::fmt;
use core::net::{Ipv4Addr, Ipv6Addr};

use super::FibError;

/// The network mask of a `len`-bit IPv4 prefix (`len` at most 32).
pub(super) const fn mask4(len: u8) -> u32 {
    if len == 0 {
        0
    } else {
        u32::MAX << (32 - len as u32)
    }
}

/// The network mask of a `len`-bit IPv6 prefix (`len` at most 128).
pub(super) const fn mask6(len: u8) -> u128 {
    if len == 0 {
        0
    } else {
        u128::MAX << (128 - len as u32)
    }
}

/// An IPv4 prefix: network address (host bits cleared) and length 0..=32.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ipv4Prefix {
    addr: u32,
    len: u8,
}

impl Ipv4Prefix {
    /// The prefix `addr/len`; host bits of `addr` are cleared.
    pub const fn new(addr: u32, len: u8) -> Result<Self, FibError> {
        if len > 32 {
            return Err(FibError::PrefixLength { len, max: 32 });
        }
        Ok(Ipv4Prefix {
            addr: addr & mask4(len),
            len,
        })
    }

    /// The network address, host order.
    pub const fn addr(self) -> u32 {
        self.addr
    }

    /// The prefix length.
    #[allow(clippy::len_without_is_empty)]
    pub const fn len(self) -> u8 {
        self.len
    }

    /// Whether `addr` lies inside this prefix.
    pub const fn contains(self, addr: u32) -> bool {
        addr & mask4(self.len) == self.addr
    }
}

impl fmt::Display for Ipv4Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", Ipv4Addr::from_bits(self.addr), self.len)
    }
}

/// An IPv6 prefix: network address (host bits cleared) and length 0..=128.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ipv6Prefix {
    addr: u128,
    len: u8,
}

impl Ipv6Prefix {
    /// The prefix `addr/len`; host bits of `addr` are cleared.
    pub const fn new(addr: u128, len: u8) -> Result<Self, FibError> {
        if len > 128 {
            return Err(FibError::PrefixLength { len, max: 128 });
        }
        Ok(Ipv6Prefix {
            addr: addr & mask6(len),
            len,
        })
    }

    /// The network address, host order.
    pub const fn addr(self) -> u128 {
        self.addr
    }

    /// The prefix length.
    #[allow(clippy::len_without_is_empty)]
    pub const fn len(self) -> u8 {
        self.len
    }

    /// Whether `addr` lies inside this prefix.
    pub const fn contains(self, addr: u128) -> bool {
        addr & mask6(self.len) == self.addr
    }
}

impl fmt::Display for Ipv6Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", Ipv6Addr::from_bits(self.addr), self.len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_bits_are_cleared_and_lengths_checked() {
        let p = Ipv4Prefix::new(0x0a01_0203, 8).unwrap();
        assert_eq!(p.addr(), 0x0a00_0000);
        assert_eq!(p.to_string(), "10.0.0.0/8");
        assert!(p.contains(0x0aff_ffff));
        assert!(!p.contains(0x0b00_0000));
        assert_eq!(Ipv4Prefix::new(0, 0).unwrap().addr(), 0);
        assert_eq!(Ipv4Prefix::new(u32::MAX, 32).unwrap().addr(), u32::MAX);
        assert_eq!(
            Ipv4Prefix::new(0, 33),
            Err(FibError::PrefixLength { len: 33, max: 32 })
        );

        let q = Ipv6Prefix::new(0x2001_0db8_0000_0000_0000_0000_0000_0001, 32).unwrap();
        assert_eq!(q.to_string(), "2001:db8::/32");
        assert!(Ipv6Prefix::new(u128::MAX, 128).unwrap().contains(u128::MAX));
        assert_eq!(
            Ipv6Prefix::new(0, 129),
            Err(FibError::PrefixLength { len: 129, max: 128 })
        );
    }
}
