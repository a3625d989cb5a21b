//! The emulated task of seed 001: a known, configurable amount of work per packet.
//!
//! Seed 001 measures the cost of packet I/O (c_IO) by adding a task of known cost (c_task) per
//! packet and watching where throughput starts to fall: `T = min(r_max, f_CPU / (c_IO + c_task))`.
//! Two kinds of work, combinable:
//! * **spin**: busy-wait a fixed number of TSC cycles per packet (pure CPU cost);
//! * **walk**: follow one link of a random single-cycle linked list per packet, over a working
//!   set of a chosen size, so every step is a dependent load that hits L1, L2, L3 or DRAM
//!   depending on the size (seed 001 Figure 3: ~20/60/250 cycles out of L2/L3/memory).
//!
//! This is the one stage that reads the clock itself: spinning for N cycles *is* its work.

use wirespeed_packet::Batch;
use wirespeed_packet::cpu::rdtsc;

/// One node of the walk: a whole cache line, so that each step touches a new line.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Node {
    next: u32,
    _pad: [u32; 15],
}

/// Largest working set of the walk (seed 001 goes to 256 MiB).
pub const MAX_WALK_BYTES: u64 = 1 << 30;

/// Counters of the task stage.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TaskCounters {
    /// Packets the task ran for.
    pub packets: u64,
    /// Sum of the node indices visited, kept so the walk cannot be optimised away; also a
    /// cheap fingerprint that two runs walked the same list.
    pub checksum: u64,
}

/// Per-packet emulated work.
pub struct Task {
    spin_cycles: u64,
    nodes: Vec<Node>,
    cursor: u32,
    counters: TaskCounters,
}

impl Task {
    /// `spin_cycles` TSC cycles and one step through a list of `walk_bytes` per packet (0 turns
    /// either off). The list is built here, once, from `seed`: allocation happens at start-up,
    /// never while packets flow. `walk_bytes` is capped at [`MAX_WALK_BYTES`].
    pub fn new(spin_cycles: u64, walk_bytes: u64, seed: u64) -> Self {
        let count = (walk_bytes.min(MAX_WALK_BYTES) / 64) as usize;
        let nodes = if count >= 2 {
            single_cycle(count, seed)
        } else {
            Vec::new()
        };
        Self {
            spin_cycles,
            nodes,
            cursor: 0,
            counters: TaskCounters::default(),
        }
    }

    /// Whether the task does anything.
    pub fn is_active(&self) -> bool {
        self.spin_cycles > 0 || !self.nodes.is_empty()
    }

    /// Runs the task once for every packet of `batch` that is not already dropped.
    pub fn process(&mut self, batch: &Batch) {
        let packets = batch
            .meta()
            .iter()
            .filter(|meta| meta.drop.is_none())
            .count();
        self.run(packets as u64);
    }

    /// Runs the task for `packets` packets back to back.
    ///
    /// Spinning keeps one deadline for the whole run, advanced by `spin_cycles` per packet:
    /// a per-packet deadline would add the overshoot of the last clock read (a few tens of
    /// cycles in a VM) to every packet, which at 100 cycles asked is a 30 % error. A walk step,
    /// when configured, comes on top of the spin.
    pub fn run(&mut self, packets: u64) {
        let mut deadline = rdtsc();
        for _ in 0..packets {
            if let Some(node) = self.nodes.get(self.cursor as usize) {
                self.cursor = node.next;
                self.counters.checksum = self.counters.checksum.wrapping_add(self.cursor as u64);
                if self.spin_cycles > 0 {
                    deadline = deadline.max(rdtsc());
                }
            }
            if self.spin_cycles > 0 {
                deadline = deadline.wrapping_add(self.spin_cycles);
                while rdtsc() < deadline {
                    std::hint::spin_loop();
                }
            }
        }
        self.counters.packets += packets;
    }

    pub fn counters(&self) -> TaskCounters {
        self.counters
    }
}

/// A random permutation of `0..count` that is one cycle (Sattolo's algorithm), so a walk from
/// any node visits every node before it returns.
fn single_cycle(count: usize, seed: u64) -> Vec<Node> {
    let mut order: Vec<u32> = (0..count as u32).collect();
    let mut state = seed | 1;
    for i in (1..count).rev() {
        // xorshift64*: plenty for shuffling a test list.
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        let random = state.wrapping_mul(0x2545_f491_4f6c_dd1d);
        let j = (random % i as u64) as usize;
        order.swap(i, j);
    }
    let mut nodes = vec![
        Node {
            next: 0,
            _pad: [0; 15]
        };
        count
    ];
    for i in 0..count {
        nodes[order[i] as usize].next = order[(i + 1) % count];
    }
    nodes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_walk_visits_every_node_once_per_cycle() {
        let count = 1000;
        let mut task = Task::new(0, count * 64, 42);
        let mut seen = vec![false; count as usize];
        for _ in 0..count {
            task.run(1);
            assert!(
                !seen[task.cursor as usize],
                "node {} visited twice",
                task.cursor
            );
            seen[task.cursor as usize] = true;
        }
        assert!(seen.iter().all(|&s| s));
        assert_eq!(task.counters().packets, count);
    }

    #[test]
    fn spinning_takes_at_least_the_asked_cycles() {
        let mut task = Task::new(10_000, 0, 1);
        let start = rdtsc();
        task.run(10);
        assert!(rdtsc() - start >= 100_000);
    }

    #[test]
    fn dropped_packets_get_no_work_and_inactive_task_says_so() {
        let mut batch = Batch::new(4);
        batch.push(Default::default());
        batch.push(Default::default());
        batch.meta_mut()[0].drop = Some(wirespeed_packet::DropReason::Truncated);
        let mut task = Task::new(1, 0, 1);
        task.process(&batch);
        assert_eq!(task.counters().packets, 1);
        assert!(
            !Task::new(0, 64, 1).is_active(),
            "a one-node list is no walk"
        );
    }
}
