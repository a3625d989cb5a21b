//! The OpenFlow app's group table (OpenFlow 1.3 §5.6): groups a flow's `group:N` action sends
//! its packets to, each a list of buckets of actions.
//!
//! - **all**: every bucket gets its own copy of the packet (flooding, multicast); the copies
//!   come from the worker's frame pool as the app's other copies do, the last bucket takes
//!   the packet itself.
//! - **select**: one bucket, chosen by the hash of the packet's flow key in proportion to the
//!   buckets' weights, so a flow always takes the same bucket while the group is unchanged; a
//!   bucket of weight 0 is never chosen.
//! - **indirect**: exactly one bucket (a next hop many flows share).
//!
//! A bucket may send to another group (chaining, as Open vSwitch allows): a chain is at most
//! [`MAX_GROUP_DEPTH`] groups long and never comes back to a group it passed, both checked
//! when a group is added or changed, so running a group always ends. Every worker keeps its
//! own copy of the table, changed by the same commands as the flows (between batches). The
//! counts are `Cell`s: a packet's actions read the table shared while the app's other state
//! is borrowed for the copies they make, and a worker is one thread. Packet work only reads
//! the table and adds to its counts: nothing is allocated, locked or called per packet.

use std::cell::Cell;
use std::collections::HashMap;

use super::Action;

/// Groups a chain may pass through, the first included: a packet's actions never recurse
/// deeper than this.
pub const MAX_GROUP_DEPTH: usize = 4;
/// Buckets one group may have.
pub const MAX_BUCKETS: usize = 32;
/// The highest group number a group may have (OpenFlow's OFPG_MAX); those above are reserved.
pub const MAX_GROUP_ID: u32 = 0xffff_ff00;

/// How a group uses its buckets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupKind {
    All,
    Select,
    Indirect,
}

impl GroupKind {
    /// The name `show groups` and group rules use.
    pub fn name(self) -> &'static str {
        match self {
            GroupKind::All => "all",
            GroupKind::Select => "select",
            GroupKind::Indirect => "indirect",
        }
    }

    /// The kind named `name`.
    pub fn parse(name: &str) -> Option<GroupKind> {
        Some(match name {
            "all" => GroupKind::All,
            "select" => GroupKind::Select,
            "indirect" => GroupKind::Indirect,
            _ => return None,
        })
    }
}

/// One bucket as the control plane writes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BucketSpec {
    /// Select groups: the bucket's share; other kinds ignore it.
    pub weight: u16,
    pub actions: Vec<Action>,
}

/// A group as the control plane writes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupSpec {
    pub id: u32,
    pub kind: GroupKind,
    pub buckets: Vec<BucketSpec>,
}

/// Why a group change was refused. The texts carry the words the OpenFlow agent maps to its
/// errors (`exists`, `no group`, `reserved`, `full`, `buckets`, `loop`, `chain`, `forwards`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GroupError {
    #[error("group {0} exists: modify it, or delete it first")]
    Exists(u32),
    #[error("no group {0}; `show groups` lists them")]
    Unknown(u32),
    #[error("group {0} is reserved: group numbers go up to {MAX_GROUP_ID:#x}")]
    Reserved(u32),
    #[error("the group table is full ({0} groups): delete groups or raise [openflow] groups")]
    Full(usize),
    #[error("{count} buckets: a group has at most {MAX_BUCKETS}")]
    TooManyBuckets { count: usize },
    #[error("an indirect group has exactly one bucket, not {0} buckets")]
    IndirectBuckets(usize),
    #[error("bucket {bucket}: {problem}")]
    BadBucket { bucket: usize, problem: String },
    #[error("group {0} would reach itself again through its buckets (a loop)")]
    Loop(u32),
    #[error("group {id}: a chain of groups is at most {MAX_GROUP_DEPTH} long")]
    ChainTooLong { id: u32 },
    #[error("group {id} is in use: group {by} forwards to it; delete or change that one first")]
    Chained { id: u32, by: u32 },
}

/// A bucket in the table, with its counts.
#[derive(Debug)]
pub struct Bucket {
    pub weight: u16,
    pub actions: Vec<Action>,
    pub packets: Cell<u64>,
    pub bytes: Cell<u64>,
}

/// A group in the table, with its counts.
#[derive(Debug)]
pub struct Group {
    pub kind: GroupKind,
    pub buckets: Vec<Bucket>,
    /// The sum of the buckets' weights (select groups).
    total_weight: u32,
    pub packets: Cell<u64>,
    pub bytes: Cell<u64>,
    /// TSC when the group was added (a modify keeps it and the group's counts).
    pub installed: u64,
}

impl Group {
    /// Counts a packet of `len` bytes through the group.
    #[inline]
    pub fn count(&self, len: u16) {
        self.packets.set(self.packets.get() + 1);
        self.bytes.set(self.bytes.get() + u64::from(len));
    }

    /// The bucket a select or indirect group gives a packet whose flow key hashes to
    /// `hash`: the point `hash` scaled to the total weight falls into one bucket's share.
    #[inline]
    pub fn pick(&self, hash: u32) -> Option<&Bucket> {
        if self.kind == GroupKind::Indirect {
            return self.buckets.first();
        }
        let mut point = ((u64::from(hash) * u64::from(self.total_weight)) >> 32) as u32;
        for bucket in &self.buckets {
            let weight = u32::from(bucket.weight);
            if point < weight {
                return Some(bucket);
            }
            point -= weight;
        }
        None
    }

    fn groups_called(&self) -> impl Iterator<Item = u32> + '_ {
        called(self.buckets.iter().flat_map(|b| &b.actions))
    }
}

impl Bucket {
    #[inline]
    pub fn count(&self, len: u16) {
        self.packets.set(self.packets.get() + 1);
        self.bytes.set(self.bytes.get() + u64::from(len));
    }
}

/// The groups `actions` send to.
fn called<'a>(actions: impl Iterator<Item = &'a Action> + 'a) -> impl Iterator<Item = u32> + 'a {
    actions.filter_map(|action| match *action {
        Action::Group(id) => Some(id),
        _ => None,
    })
}

/// The groups of one worker.
#[derive(Debug, Default)]
pub struct GroupTable {
    groups: HashMap<u32, Group>,
    capacity: usize,
}

impl GroupTable {
    /// A table of at most `capacity` groups.
    pub fn new(capacity: usize) -> GroupTable {
        GroupTable {
            groups: HashMap::with_capacity(capacity.min(4096)),
            capacity,
        }
    }

    #[inline]
    pub fn get(&self, id: u32) -> Option<&Group> {
        self.groups.get(&id)
    }

    pub fn len(&self) -> usize {
        self.groups.len()
    }

    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Every group, by number.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &Group)> {
        let mut ids: Vec<u32> = self.groups.keys().copied().collect();
        ids.sort_unstable();
        ids.into_iter()
            .filter_map(|id| Some((id, self.groups.get(&id)?)))
    }

    /// Adds `spec` (`modify`: replaces the group of its number, keeping its counts and
    /// age; the buckets' counts start again) at TSC `now`. `check_bucket` refuses what a
    /// bucket's actions may not do (ports the switch lacks).
    pub fn insert(
        &mut self,
        spec: GroupSpec,
        modify: bool,
        now: u64,
        check_bucket: impl Fn(&Action) -> Result<(), String>,
    ) -> Result<(), GroupError> {
        let id = spec.id;
        if id > MAX_GROUP_ID {
            return Err(GroupError::Reserved(id));
        }
        let old = self.groups.get(&id);
        match (modify, old) {
            (false, Some(_)) => return Err(GroupError::Exists(id)),
            (true, None) => return Err(GroupError::Unknown(id)),
            (false, None) if self.groups.len() >= self.capacity => {
                return Err(GroupError::Full(self.capacity));
            }
            _ => {}
        }
        if spec.buckets.len() > MAX_BUCKETS {
            return Err(GroupError::TooManyBuckets {
                count: spec.buckets.len(),
            });
        }
        if spec.kind == GroupKind::Indirect && spec.buckets.len() != 1 {
            return Err(GroupError::IndirectBuckets(spec.buckets.len()));
        }
        for (index, bucket) in spec.buckets.iter().enumerate() {
            let bad = |problem: String| GroupError::BadBucket {
                bucket: index,
                problem,
            };
            if bucket.actions.len() > super::MAX_FLOW_ACTIONS {
                return Err(bad(format!(
                    "{} actions: at most {}",
                    bucket.actions.len(),
                    super::MAX_FLOW_ACTIONS
                )));
            }
            for action in &bucket.actions {
                check_bucket(action).map_err(&bad)?;
                if let Action::Group(to) = *action
                    && to != id
                    && !self.groups.contains_key(&to)
                {
                    return Err(bad(format!("no group {to}; add it first")));
                }
            }
        }
        let (packets, bytes, installed) = old.map_or((0, 0, now), |g| {
            (g.packets.get(), g.bytes.get(), g.installed)
        });
        let group = Group {
            kind: spec.kind,
            total_weight: spec.buckets.iter().map(|b| u32::from(b.weight)).sum(),
            buckets: spec
                .buckets
                .into_iter()
                .map(|b| Bucket {
                    weight: b.weight,
                    actions: b.actions,
                    packets: Cell::new(0),
                    bytes: Cell::new(0),
                })
                .collect(),
            packets: Cell::new(packets),
            bytes: Cell::new(bytes),
            installed,
        };
        let previous = self.groups.insert(id, group);
        if let Err(error) = self.check_chains(id) {
            match previous {
                Some(previous) => self.groups.insert(id, previous),
                None => self.groups.remove(&id),
            };
            return Err(error);
        }
        Ok(())
    }

    /// Refuses a table in which a chain loops or is longer than [`MAX_GROUP_DEPTH`] (`changed`,
    /// the group just put in, is the one named). Each group's longest chain is found once
    /// and remembered, so the check costs one visit of every group and bucket action whatever
    /// the fan-out (a walk of every path could take 512^3 steps a group).
    fn check_chains(&self, changed: u32) -> Result<(), GroupError> {
        let mut longest = HashMap::with_capacity(self.groups.len());
        let mut path = Vec::with_capacity(MAX_GROUP_DEPTH);
        for &start in self.groups.keys() {
            self.chain(start, &mut longest, &mut path, changed)?;
        }
        Ok(())
    }

    /// The longest chain from `id` (itself included), `path` the groups that led to it.
    fn chain(
        &self,
        id: u32,
        longest: &mut HashMap<u32, usize>,
        path: &mut Vec<u32>,
        changed: u32,
    ) -> Result<usize, GroupError> {
        if let Some(&known) = longest.get(&id) {
            return Ok(known);
        }
        if path.contains(&id) {
            return Err(GroupError::Loop(changed));
        }
        let Some(group) = self.groups.get(&id) else {
            return Ok(0);
        };
        if path.len() >= MAX_GROUP_DEPTH {
            return Err(GroupError::ChainTooLong { id: changed });
        }
        path.push(id);
        let mut below = 0;
        for next in group.groups_called() {
            below = below.max(self.chain(next, longest, path, changed)?);
        }
        path.pop();
        if below + 1 > MAX_GROUP_DEPTH {
            return Err(GroupError::ChainTooLong { id: changed });
        }
        longest.insert(id, below + 1);
        Ok(below + 1)
    }

    /// Removes group `id`; refused while another group forwards to it (OpenFlow's
    /// CHAINED_GROUP). The flows that forward to it are the caller's to remove.
    pub fn remove(&mut self, id: u32) -> Result<Group, GroupError> {
        if !self.groups.contains_key(&id) {
            return Err(GroupError::Unknown(id));
        }
        if let Some((&by, _)) = self
            .groups
            .iter()
            .find(|&(&other, g)| other != id && g.groups_called().any(|to| to == id))
        {
            return Err(GroupError::Chained { id, by });
        }
        self.groups.remove(&id).ok_or(GroupError::Unknown(id))
    }

    /// Removes every group.
    pub fn clear(&mut self) {
        self.groups.clear();
    }
}

/// Whether `actions` send to group `id`.
pub fn sends_to(actions: &[Action], id: u32) -> bool {
    called(actions.iter()).any(|to| to == id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(id: u32, kind: GroupKind, buckets: &[(u16, &[Action])]) -> GroupSpec {
        GroupSpec {
            id,
            kind,
            buckets: buckets
                .iter()
                .map(|&(weight, actions)| BucketSpec {
                    weight,
                    actions: actions.to_vec(),
                })
                .collect(),
        }
    }

    fn any(_: &Action) -> Result<(), String> {
        Ok(())
    }

    #[test]
    fn adds_modifies_and_removes_with_the_errors_of_each() {
        let mut table = GroupTable::new(2);
        let out = [Action::Output(0)];
        let one = spec(1, GroupKind::All, &[(0, &out)]);
        assert_eq!(table.insert(one.clone(), false, 5, any), Ok(()));
        assert_eq!(
            table.insert(one.clone(), false, 5, any),
            Err(GroupError::Exists(1))
        );
        let two = spec(2, GroupKind::Indirect, &[(0, &out)]);
        assert_eq!(
            table.insert(two.clone(), true, 5, any),
            Err(GroupError::Unknown(2))
        );
        let reserved = spec(MAX_GROUP_ID + 1, GroupKind::All, &[]);
        assert_eq!(
            table.insert(reserved, false, 5, any),
            Err(GroupError::Reserved(MAX_GROUP_ID + 1))
        );
        let two_buckets = spec(2, GroupKind::Indirect, &[(0, &out), (0, &out)]);
        assert_eq!(
            table.insert(two_buckets, false, 5, any),
            Err(GroupError::IndirectBuckets(2))
        );
        assert_eq!(table.insert(two, false, 5, any), Ok(()));
        let three = spec(3, GroupKind::All, &[]);
        assert_eq!(table.insert(three, false, 5, any), Err(GroupError::Full(2)));
        // A modify keeps the group's counts and age.
        table.get(1).unwrap().count(60);
        let changed = spec(1, GroupKind::Select, &[(1, &out), (2, &out)]);
        assert_eq!(table.insert(changed, true, 9, any), Ok(()));
        let group = table.get(1).unwrap();
        assert_eq!((group.packets.get(), group.installed), (1, 5));
        assert_eq!(group.kind, GroupKind::Select);
        assert!(table.remove(1).is_ok());
        assert!(matches!(table.remove(1), Err(GroupError::Unknown(1))));
    }

    #[test]
    fn chains_are_bounded_and_never_loop() {
        let mut table = GroupTable::new(16);
        let out = [Action::Output(0)];
        table
            .insert(spec(1, GroupKind::Indirect, &[(0, &out)]), false, 0, any)
            .unwrap();
        let to_one = [Action::Group(1)];
        table
            .insert(spec(2, GroupKind::All, &[(0, &to_one)]), false, 0, any)
            .unwrap();
        // A group that does not exist yet, or itself, is refused.
        let to_nine = [Action::Group(9)];
        assert!(matches!(
            table.insert(spec(3, GroupKind::All, &[(0, &to_nine)]), false, 0, any),
            Err(GroupError::BadBucket { bucket: 0, .. })
        ));
        let to_two = [Action::Group(2)];
        assert_eq!(
            table.insert(spec(1, GroupKind::Indirect, &[(0, &to_two)]), true, 0, any),
            Err(GroupError::Loop(1))
        );
        // The refused modify left group 1 as it was.
        assert_eq!(table.get(1).unwrap().buckets[0].actions, out);
        let to_self = [Action::Group(4)];
        assert_eq!(
            table.insert(spec(4, GroupKind::All, &[(0, &to_self)]), false, 0, any),
            Err(GroupError::Loop(4))
        );
        // 2 -> 1 is two long; 3 -> 2 -> 1 three, 4 -> 3 -> 2 -> 1 four, 5 -> ... five.
        let to_three = [Action::Group(3)];
        let to_four = [Action::Group(4)];
        table
            .insert(spec(3, GroupKind::All, &[(0, &to_two)]), false, 0, any)
            .unwrap();
        table
            .insert(spec(4, GroupKind::All, &[(0, &to_three)]), false, 0, any)
            .unwrap();
        assert_eq!(
            table.insert(spec(5, GroupKind::All, &[(0, &to_four)]), false, 0, any),
            Err(GroupError::ChainTooLong { id: 5 })
        );
        assert!(table.get(5).is_none());
        // Group 1 is in use by group 2.
        assert!(matches!(
            table.remove(1),
            Err(GroupError::Chained { id: 1, by: 2 })
        ));
    }

    /// Four groups, each of 32 buckets of 16 actions sending to the one below: every path
    /// walked would be 512^3 steps for the top group; each group is visited once.
    #[test]
    fn a_wide_chain_is_checked_group_by_group() {
        let mut table = GroupTable::new(8);
        let out = [Action::Output(0)];
        table
            .insert(spec(1, GroupKind::Indirect, &[(0, &out)]), false, 0, any)
            .unwrap();
        for id in 2..=4 {
            let wide = [Action::Group(id - 1); 16];
            let buckets: Vec<(u16, &[Action])> = (0..MAX_BUCKETS).map(|_| (1, &wide[..])).collect();
            table
                .insert(spec(id, GroupKind::All, &buckets), false, 0, any)
                .unwrap();
        }
        let wide = [Action::Group(4); 16];
        let buckets: Vec<(u16, &[Action])> = (0..MAX_BUCKETS).map(|_| (1, &wide[..])).collect();
        assert_eq!(
            table.insert(spec(5, GroupKind::All, &buckets), false, 0, any),
            Err(GroupError::ChainTooLong { id: 5 })
        );
    }

    #[test]
    fn select_honours_weights_and_never_picks_weight_zero() {
        let mut table = GroupTable::new(4);
        let (a, b, c) = (
            [Action::Output(0)],
            [Action::Output(1)],
            [Action::Output(2)],
        );
        table
            .insert(
                spec(1, GroupKind::Select, &[(1, &a), (0, &b), (3, &c)]),
                false,
                0,
                any,
            )
            .unwrap();
        let group = table.get(1).unwrap();
        let mut picked = [0u32; 3];
        for i in 0..4000u32 {
            let hash = i.wrapping_mul(0x9e37_79b9);
            let bucket = group.pick(hash).unwrap();
            let at = group
                .buckets
                .iter()
                .position(|b| std::ptr::eq(b, bucket))
                .unwrap();
            picked[at] += 1;
            // The same hash, the same bucket.
            assert!(std::ptr::eq(group.pick(hash).unwrap(), bucket));
        }
        assert_eq!(picked[1], 0);
        assert!((900..1100).contains(&picked[0]), "{picked:?}");
        assert!((2900..3100).contains(&picked[2]), "{picked:?}");
    }
}
