//! ECMP groups: a FIB entry may name a group of next hops instead of one; the router picks the
//! member from the packet's flow hash so that every packet of a flow takes the same path.
//!
//! The pick multiplies the 32-bit hash by the member count and keeps the high half (Lemire's
//! range reduction): one multiply instead of a division, and no bias worth mentioning for groups of
//! a few dozen members. Groups are boxed slices indexed by group id: two reads per pick, no
//! allocation. Removed ids are reused by later inserts.

use super::{FibError, NextHop, Target};

/// ECMP group id -> member next-hop ids.
#[derive(Debug, Clone, Default)]
pub struct EcmpGroups {
    groups: Vec<Box<[u32]>>,
    free: Vec<u32>,
}

impl EcmpGroups {
    /// The most members one group may hold.
    pub const MAX_MEMBERS: usize = 1 << 16;

    /// No groups.
    pub fn new() -> Self {
        Self::default()
    }

    fn check(members: &[u32]) -> Result<Box<[u32]>, FibError> {
        if members.is_empty() || members.len() > Self::MAX_MEMBERS {
            return Err(FibError::EcmpMembers {
                members: members.len(),
                max: Self::MAX_MEMBERS,
            });
        }
        Ok(members.into())
    }

    /// Creates a group of `members` (next-hop ids) and returns the [`NextHop`] that names it,
    /// ready to be inserted into a FIB.
    pub fn insert(&mut self, members: &[u32]) -> Result<NextHop, FibError> {
        let members = Self::check(members)?;
        let id = match self.free.pop() {
            Some(id) => id,
            None => u32::try_from(self.groups.len()).unwrap_or(u32::MAX),
        };
        let hop = NextHop::ecmp(id).ok_or(FibError::EcmpGroupsFull {
            count: self.groups.len(),
            max: NextHop::MAX_ID,
        })?;
        match self.groups.get_mut(id as usize) {
            Some(slot) => *slot = members,
            None => self.groups.push(members),
        }
        Ok(hop)
    }

    /// Replaces the members of `group`.
    pub fn set(&mut self, group: u32, members: &[u32]) -> Result<(), FibError> {
        let members = Self::check(members)?;
        match self.groups.get_mut(group as usize) {
            Some(slot) if !slot.is_empty() => {
                *slot = members;
                Ok(())
            }
            _ => Err(FibError::UnknownEcmpGroup { group }),
        }
    }

    /// Deletes `group`; its id may be handed out again. Returns its members.
    pub fn remove(&mut self, group: u32) -> Option<Box<[u32]>> {
        let slot = self.groups.get_mut(group as usize)?;
        if slot.is_empty() {
            return None;
        }
        self.free.push(group);
        Some(core::mem::take(slot))
    }

    /// The members of `group`, empty if there is no such group.
    pub fn members(&self, group: u32) -> &[u32] {
        self.groups.get(group as usize).map_or(&[], |m| m)
    }

    /// Picks the member of `group` for a flow with hash `flow_hash`; `None` if the group does not
    /// exist.
    #[inline]
    pub fn select(&self, group: u32, flow_hash: u32) -> Option<u32> {
        let members = self.groups.get(group as usize)?;
        let pick = ((u64::from(flow_hash) * members.len() as u64) >> 32) as usize;
        members.get(pick).copied()
    }

    /// The next-hop id to use for `next_hop`: itself for a single hop, the member picked by
    /// `flow_hash` for a group.
    #[inline]
    pub fn resolve(&self, next_hop: NextHop, flow_hash: u32) -> Option<u32> {
        match next_hop.target() {
            Target::Hop(id) => Some(id),
            Target::Ecmp(group) => self.select(group, flow_hash),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn select_spreads_and_is_stable() {
        let mut groups = EcmpGroups::new();
        let g = groups.insert(&[10, 11, 12, 13]).unwrap();
        assert!(g.is_ecmp());
        let mut seen = [0usize; 4];
        for h in 0..4096u32 {
            let hash = h.wrapping_mul(0x9e37_79b9);
            let m = groups.resolve(g, hash).unwrap();
            assert_eq!(groups.resolve(g, hash), Some(m), "same flow, same member");
            seen[(m - 10) as usize] += 1;
        }
        assert!(
            seen.iter().all(|&n| n > 900),
            "members used evenly: {seen:?}"
        );
        assert_eq!(groups.select(g.id(), 0), Some(10));
        assert_eq!(groups.select(g.id(), u32::MAX), Some(13));
        assert_eq!(groups.resolve(NextHop::hop(7).unwrap(), 1234), Some(7));
    }

    #[test]
    fn groups_are_checked_removed_and_reused() {
        let mut groups = EcmpGroups::new();
        assert_eq!(
            groups.insert(&[]),
            Err(FibError::EcmpMembers {
                members: 0,
                max: 1 << 16
            })
        );
        let a = groups.insert(&[1]).unwrap();
        let b = groups.insert(&[2, 3]).unwrap();
        assert_eq!((a.id(), b.id()), (0, 1));
        groups.set(b.id(), &[4, 5, 6]).unwrap();
        assert_eq!(groups.members(b.id()), &[4, 5, 6]);
        assert_eq!(groups.remove(a.id()).as_deref(), Some(&[1][..]));
        assert_eq!(groups.remove(a.id()), None);
        assert_eq!(groups.select(a.id(), 0), None);
        assert_eq!(
            groups.set(a.id(), &[1]),
            Err(FibError::UnknownEcmpGroup { group: 0 })
        );
        assert_eq!(groups.insert(&[9]).unwrap().id(), 0, "freed id reused");
        assert_eq!(groups.members(99), &[] as &[u32]);
    }
}
