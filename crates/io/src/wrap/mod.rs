//! Wrapper ports: a [`Port`](crate::Port) around another port that adds one behaviour and is
//! itself a port, so it can stand anywhere a port stands (smoltcp's tracer and fault injector,
//! for batches).
//!
//! * [`Traced`]: a tap that writes a copy of every frame received and transmitted to capture
//!   files, for debugging a pipeline on real ports.
//! * [`Faulty`]: deterministic fault injection (drop, truncate, corrupt, duplicate, reorder) for
//!   tests of everything above the port.
//!
//! They compose: `Faulty<Traced<P>>` traces what reaches the real port after the faults,
//! `Traced<Faulty<P>>` traces what the pipeline saw.

#![deny(unsafe_code)]

mod fault;
mod trace;

pub use fault::{FaultConfig, FaultStats, Faulty};
pub use trace::Traced;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::{LinkConfig, MemoryPort, link};
    use crate::{Port, PortInfo, PortStats, QueueId};
    use wirespeed_packet::{Batch, FramePool};

    /// A memory port that always has frames waiting for the kernel to transmit.
    struct Backlogged(MemoryPort);

    impl Port for Backlogged {
        fn info(&self) -> &PortInfo {
            self.0.info()
        }
        fn rx(&mut self, queue: QueueId, pool: &mut FramePool, batch: &mut Batch) -> usize {
            self.0.rx(queue, pool, batch)
        }
        fn tx(&mut self, queue: QueueId, pool: &mut FramePool, batch: &mut Batch) -> usize {
            self.0.tx(queue, pool, batch)
        }
        fn tx_backlog(&mut self) -> bool {
            true
        }
        fn frames_held(&self) -> usize {
            self.0.frames_held()
        }
        fn release_all(&mut self, pool: &mut FramePool) {
            self.0.release_all(pool)
        }
        fn stats(&self) -> PortStats {
            self.0.stats()
        }
    }

    /// A worker asks its ports whether they still hold frames to transmit before it sleeps; a
    /// wrapper that answered for itself would let it sleep on them.
    #[test]
    fn wrappers_pass_the_inner_ports_tx_backlog_through() {
        let (a, _peer) = link("a", "b", &LinkConfig::default());
        let mut traced = Traced::new(Backlogged(a), None, None).unwrap();
        assert!(traced.tx_backlog());
        let (a, _peer) = link("a", "b", &LinkConfig::default());
        let mut faulty = Faulty::new(Backlogged(a), FaultConfig::default());
        assert!(faulty.tx_backlog());
        let (a, _peer) = link("a", "b", &LinkConfig::default());
        assert!(!Faulty::new(a, FaultConfig::default()).tx_backlog());
    }
}
