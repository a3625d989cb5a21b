//! Moving byte strings through ports, for tests that assert packets in, packets out.

use wirespeed_io::Port;
use wirespeed_packet::{Batch, FramePool};

/// Copies each frame into a fresh pool frame (at `HEADROOM`) and transmits them on queue 0 of
/// `port`. Returns how many the port took; frames it refused go back to the pool.
///
/// # Panics
/// If the pool runs out of frames or a frame is longer than a pool frame: a test setup error.
pub fn send(port: &mut dyn Port, pool: &mut FramePool, frames: &[Vec<u8>]) -> usize {
    let mut taken = 0;
    for chunk in frames.chunks(wirespeed_packet::MAX_BATCH) {
        let mut batch = Batch::new(chunk.len());
        push_copies(pool, &mut batch, chunk, 0);
        taken += port.tx(0, pool, &mut batch);
        for desc in batch.descs() {
            pool.release(desc.frame);
        }
    }
    taken
}

/// Copies each frame into a fresh pool frame (at `HEADROOM`) and appends it to `batch` for
/// `queue`, ready to transmit.
///
/// # Panics
/// If the pool runs out of frames, a frame is longer than a pool frame or the batch is full: a
/// test setup error.
pub fn push_copies(pool: &mut FramePool, batch: &mut Batch, frames: &[Vec<u8>], queue: u16) {
    for bytes in frames {
        let desc = pool
            .alloc_copy(bytes, queue)
            .expect("test pool has a free frame that holds the bytes");
        let pushed = batch.push(desc);
        assert!(pushed, "the batch has room for every frame");
    }
}

/// Receives everything waiting on queue 0 of `port`, copies the bytes out and releases the
/// frames.
pub fn receive(port: &mut dyn Port, pool: &mut FramePool) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut batch = Batch::new(wirespeed_packet::MAX_BATCH);
    loop {
        if port.rx(0, pool, &mut batch) == 0 {
            return out;
        }
        for desc in batch.descs() {
            let start = desc.offset as usize;
            out.push(pool.frame(desc.frame)[start..start + desc.len as usize].to_vec());
            pool.release(desc.frame);
        }
        batch.clear();
    }
}
