//! In-memory ports: two ends of a virtual cable inside one process.
//!
//! [`link`] returns a pair of [`MemoryPort`]s; what one end transmits on queue *q* the other
//! receives on queue *q*. Each direction of each queue is a bounded single-producer,
//! single-consumer ring of descriptors (`rtrb`; no frame data is copied) read and written a whole
//! batch at a time, so a batch costs one atomic update, and a full ring refuses frames exactly as
//! a NIC ring would. Both
//! ends must use the same [`FramePool`]; that is the case for a worker and a test harness in one
//! thread, and for the pipeline benchmarks that measure the data plane without the kernel.
//!
//! A frame sitting in a ring belongs to the receiving end: [`Port::frames_held`] counts only a
//! port's incoming rings, so adding up all ports counts every frame once.

use rtrb::{Consumer, Producer, RingBuffer};
use wirespeed_packet::{Batch, Desc, FramePool};

use crate::port::{Backend, Port, PortInfo, PortStats, QueueId};

/// Default number of descriptors per ring: the size of a typical NIC or veth ring.
pub const DEFAULT_RING_SIZE: usize = 1024;

/// One end of an in-memory link.
pub struct MemoryPort {
    info: PortInfo,
    /// Rings this end receives from, one per queue.
    incoming: Vec<Consumer<Desc>>,
    /// Rings this end transmits into (the peer's incoming), one per queue.
    outgoing: Vec<Producer<Desc>>,
    stats: PortStats,
}

/// Geometry of an in-memory link.
#[derive(Clone, Debug)]
pub struct LinkConfig {
    pub queues: u16,
    pub ring_size: usize,
    pub mtu: u16,
}

impl Default for LinkConfig {
    fn default() -> Self {
        Self {
            queues: 1,
            ring_size: DEFAULT_RING_SIZE,
            mtu: 1500,
        }
    }
}

/// Creates two connected ports named `a` and `b` (MACs 02:00:00:00:00:01 and ..:02 unless set
/// later with [`MemoryPort::set_mac`]).
pub fn link(a: &str, b: &str, config: &LinkConfig) -> (MemoryPort, MemoryPort) {
    let queues = config.queues.max(1);
    let ring_size = config.ring_size.max(1);
    let (mut a_out, mut b_in, mut b_out, mut a_in) = (vec![], vec![], vec![], vec![]);
    for _ in 0..queues {
        let (producer, consumer) = RingBuffer::new(ring_size);
        a_out.push(producer);
        b_in.push(consumer);
        let (producer, consumer) = RingBuffer::new(ring_size);
        b_out.push(producer);
        a_in.push(consumer);
    }
    let port = |name: &str, last: u8, incoming, outgoing| MemoryPort {
        info: PortInfo {
            name: name.to_string(),
            backend: Backend::Memory,
            mac: [0x02, 0, 0, 0, 0, last],
            mtu: config.mtu,
            queues,
            link_up: true,
            mode: format!("ring {ring_size}"),
        },
        incoming,
        outgoing,
        stats: PortStats::default(),
    };
    (port(a, 1, a_in, a_out), port(b, 2, b_in, b_out))
}

impl MemoryPort {
    /// Sets the MAC address the port reports.
    pub fn set_mac(&mut self, mac: [u8; 6]) {
        self.info.mac = mac;
    }
}

impl Port for MemoryPort {
    fn info(&self) -> &PortInfo {
        &self.info
    }

    fn rx(&mut self, queue: QueueId, _pool: &mut FramePool, batch: &mut Batch) -> usize {
        let Some(ring) = self.incoming.get_mut(queue as usize) else {
            return 0;
        };
        let count = batch.room().min(ring.slots());
        let Ok(chunk) = ring.read_chunk(count) else {
            return 0;
        };
        let (first, second) = chunk.as_slices();
        let start = batch.len();
        batch.extend_from_slice(first);
        batch.extend_from_slice(second);
        let mut bytes = 0;
        for desc in batch.descs_mut().get_mut(start..).unwrap_or_default() {
            desc.queue = queue;
            bytes += u64::from(desc.len);
        }
        self.stats.rx_bytes += bytes;
        chunk.commit_all();
        self.stats.rx_packets += count as u64;
        count
    }

    fn tx(&mut self, queue: QueueId, _pool: &mut FramePool, batch: &mut Batch) -> usize {
        let Some(ring) = self.outgoing.get_mut(queue as usize) else {
            return 0;
        };
        let count = batch.len().min(ring.slots());
        let Ok(mut chunk) = ring.write_chunk(count) else {
            return 0;
        };
        let (first, second) = chunk.as_mut_slices();
        let descs = batch.descs();
        first.copy_from_slice(&descs[..first.len()]);
        second.copy_from_slice(&descs[first.len()..count]);
        chunk.commit_all();
        self.stats.tx_bytes += descs[..count]
            .iter()
            .map(|desc| u64::from(desc.len))
            .sum::<u64>();
        self.stats.tx_packets += count as u64;
        self.stats.tx_refused += (batch.len() - count) as u64;
        batch.consume_front(count);
        count
    }

    /// Free slots of `queue`'s outgoing ring, at most `want`.
    fn tx_room(&mut self, queue: QueueId, _pool: &mut FramePool, want: usize) -> usize {
        self.outgoing
            .get(queue as usize)
            .map_or(0, |ring| ring.slots().min(want))
    }

    fn frames_held(&self) -> usize {
        self.incoming.iter().map(|ring| ring.slots()).sum()
    }

    fn release_all(&mut self, pool: &mut FramePool) {
        for ring in &mut self.incoming {
            while let Ok(desc) = ring.pop() {
                pool.release(desc.frame);
            }
        }
    }

    fn stats(&self) -> PortStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(pool: &mut FramePool, byte: u8, len: u16) -> Desc {
        let frame = pool.alloc().unwrap();
        pool.frame_mut(frame)[..len as usize].fill(byte);
        Desc {
            frame,
            len,
            ..Desc::default()
        }
    }

    #[test]
    fn what_a_sends_b_receives() {
        let mut pool = FramePool::new(64, 2048).unwrap();
        let (mut a, mut b) = link("a", "b", &LinkConfig::default());
        let mut batch = Batch::new(8);
        for i in 0..3 {
            batch.push(frame(&mut pool, i, 60));
        }
        assert_eq!(a.tx(0, &mut pool, &mut batch), 3);
        assert!(batch.is_empty());
        assert_eq!(b.frames_held(), 3);
        assert_eq!(a.frames_held(), 0);
        let mut got = Batch::new(8);
        assert_eq!(b.rx(0, &mut pool, &mut got), 3);
        let firsts: Vec<u8> = got.descs().iter().map(|d| pool.frame(d.frame)[0]).collect();
        assert_eq!(firsts, [0, 1, 2]);
        assert_eq!(b.stats().rx_bytes, 180);
    }

    #[test]
    fn full_ring_refuses_and_leaves_the_rest_in_the_batch() {
        let mut pool = FramePool::new(64, 2048).unwrap();
        let config = LinkConfig {
            ring_size: 2,
            ..LinkConfig::default()
        };
        let (mut a, mut b) = link("a", "b", &config);
        let mut batch = Batch::new(8);
        for i in 0..5 {
            batch.push(frame(&mut pool, i, 60));
        }
        assert_eq!(a.tx(0, &mut pool, &mut batch), 2);
        assert_eq!(batch.len(), 3);
        assert_eq!(a.stats().tx_refused, 3);
        for desc in batch.descs() {
            pool.release(desc.frame);
        }
        b.release_all(&mut pool);
        assert_eq!(pool.free_count(), pool.total());
    }

    #[test]
    fn tx_room_is_what_tx_takes_and_grows_as_the_peer_receives() {
        let mut pool = FramePool::new(64, 2048).unwrap();
        let config = LinkConfig {
            ring_size: 4,
            ..LinkConfig::default()
        };
        let (mut a, mut b) = link("a", "b", &config);
        assert_eq!(a.tx_room(0, &mut pool, 32), 4);
        assert_eq!(a.tx_room(0, &mut pool, 3), 3);
        assert_eq!(a.tx_room(1, &mut pool, 32), 0, "no such queue");
        let mut batch = Batch::new(8);
        for i in 0..3 {
            batch.push(frame(&mut pool, i, 60));
        }
        assert_eq!(a.tx(0, &mut pool, &mut batch), 3);
        assert_eq!(a.tx_room(0, &mut pool, 32), 1);
        for i in 0..3 {
            batch.push(frame(&mut pool, i, 60));
        }
        assert_eq!(a.tx(0, &mut pool, &mut batch), 1);
        assert_eq!(a.tx_room(0, &mut pool, 32), 0, "a full ring has no room");
        let mut got = Batch::new(3);
        assert_eq!(b.rx(0, &mut pool, &mut got), 3);
        assert_eq!(
            a.tx_room(0, &mut pool, 32),
            3,
            "what the peer took is room again"
        );
        for desc in batch.descs().iter().chain(got.descs()) {
            pool.release(desc.frame);
        }
        b.release_all(&mut pool);
        assert_eq!(pool.free_count(), pool.total());
    }

    #[test]
    fn queues_are_separate_and_unknown_queues_move_nothing() {
        let mut pool = FramePool::new(64, 2048).unwrap();
        let config = LinkConfig {
            queues: 2,
            ..LinkConfig::default()
        };
        let (mut a, mut b) = link("a", "b", &config);
        let mut batch = Batch::new(8);
        batch.push(frame(&mut pool, 7, 60));
        assert_eq!(a.tx(1, &mut pool, &mut batch), 1);
        let mut got = Batch::new(8);
        assert_eq!(b.rx(0, &mut pool, &mut got), 0);
        assert_eq!(b.rx(5, &mut pool, &mut got), 0);
        assert_eq!(b.rx(1, &mut pool, &mut got), 1);
        assert_eq!(got.descs()[0].queue, 1);
    }
}
