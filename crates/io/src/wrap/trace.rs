//! [`Traced`]: a tap that writes every frame passing through a port to capture files.
//!
//! Received frames go to the RX trace, transmitted ones to the TX trace; give the same path for
//! both to get one file with both directions interleaved in the order they passed (one writer
//! then serves both). Only frames that really passed are written: the RX trace gets what the
//! inner port's `rx` appended, the TX trace what its `tx` took (the descriptors offered are
//! saved first, and the bytes of the frames taken are written when `tx` returns, before anything
//! else can reuse them). So with [`super::Faulty`] on TX, put the tap inside it
//! (`Faulty<Traced<P>>`) to see the frames as they left.
//!
//! Timestamps are the wall clock when the frames passed the tap, read once per call: `rx_time`
//! is not used because other backends fill it from the TSC, not the epoch. A failed trace write
//! stops that trace and keeps the error ([`Traced::error`]); the port itself carries on, as a tap
//! must never break the path it watches. Tracing costs a copy per frame into a `BufWriter`: a
//! debugging tool, not for benchmarks.

use std::fs::File;
use std::io::BufWriter;
use std::os::fd::RawFd;
use std::path::Path;

use wirespeed_packet::{Batch, Desc, FramePool, MAX_BATCH};

use crate::pcap::{PcapError, PcapWriter};
use crate::port::{Port, PortInfo, PortStats, QueueId};

type TraceWriter = PcapWriter<BufWriter<File>>;

/// A port whose traffic is copied to capture files.
pub struct Traced<P> {
    inner: P,
    rx_trace: Option<TraceWriter>,
    tx_trace: Option<TraceWriter>,
    /// The TX trace is the RX trace's writer (one file for both directions).
    shared: bool,
    /// Descriptors offered to `tx`, kept so the ones taken can be traced afterwards.
    offered: Vec<Desc>,
    error: Option<PcapError>,
}

impl<P: Port> Traced<P> {
    /// Wraps `inner`, tracing received frames to `rx` and transmitted ones to `tx` (either may be
    /// absent; the same path for both gives one file). The files are created or truncated.
    pub fn new(inner: P, rx: Option<&Path>, tx: Option<&Path>) -> Result<Self, PcapError> {
        let shared = rx.is_some() && rx == tx;
        let rx_trace = rx.map(PcapWriter::create).transpose()?;
        let tx_trace = if shared {
            None
        } else {
            tx.map(PcapWriter::create).transpose()?
        };
        Ok(Self {
            inner,
            rx_trace,
            tx_trace,
            shared,
            offered: Vec::with_capacity(MAX_BATCH),
            error: None,
        })
    }

    /// The wrapped port.
    pub fn inner(&self) -> &P {
        &self.inner
    }

    /// The wrapped port, mutably.
    pub fn inner_mut(&mut self) -> &mut P {
        &mut self.inner
    }

    /// The first trace write error, after which that trace stopped.
    pub fn error(&self) -> Option<&PcapError> {
        self.error.as_ref()
    }

    /// Writes buffered trace records to their files.
    pub fn flush(&mut self) -> Result<(), PcapError> {
        for writer in [&mut self.rx_trace, &mut self.tx_trace]
            .into_iter()
            .flatten()
        {
            writer.flush()?;
        }
        Ok(())
    }

    /// Unwraps the inner port, flushing the traces.
    pub fn into_inner(mut self) -> Result<P, PcapError> {
        self.flush()?;
        Ok(self.inner)
    }
}

/// Writes the packet bytes of `descs` to `trace`; on failure keeps the error and stops tracing.
fn trace(
    trace: &mut Option<TraceWriter>,
    error: &mut Option<PcapError>,
    pool: &FramePool,
    descs: &[Desc],
) {
    let Some(writer) = trace else { return };
    if descs.is_empty() {
        return;
    }
    let now = crate::pcap::now_ns();
    for desc in descs {
        let frame = pool.frame(desc.frame);
        let start = (desc.offset as usize).min(frame.len());
        let end = (start + desc.len as usize).min(frame.len());
        let data = frame.get(start..end).unwrap_or(&[]);
        if let Err(failure) = writer.write_record(now, data, desc.len as u32) {
            error.get_or_insert(failure);
            *trace = None;
            return;
        }
    }
}

impl<P: Port> Port for Traced<P> {
    fn info(&self) -> &PortInfo {
        self.inner.info()
    }

    fn rx(&mut self, queue: QueueId, pool: &mut FramePool, batch: &mut Batch) -> usize {
        let start = batch.len();
        let received = self.inner.rx(queue, pool, batch);
        let arrived = batch.descs().get(start..).unwrap_or(&[]);
        trace(&mut self.rx_trace, &mut self.error, pool, arrived);
        received
    }

    fn tx(&mut self, queue: QueueId, pool: &mut FramePool, batch: &mut Batch) -> usize {
        self.offered.clear();
        self.offered.extend_from_slice(batch.descs());
        let taken = self.inner.tx(queue, pool, batch);
        let passed = self.offered.get(..taken).unwrap_or(&self.offered);
        let writer = if self.shared {
            &mut self.rx_trace
        } else {
            &mut self.tx_trace
        };
        trace(writer, &mut self.error, pool, passed);
        taken
    }

    fn tx_room(&mut self, queue: QueueId, pool: &mut FramePool, want: usize) -> usize {
        self.inner.tx_room(queue, pool, want)
    }

    fn poll(&mut self, pool: &mut FramePool) {
        self.inner.poll(pool);
    }

    fn tx_departed(&self) -> u64 {
        self.inner.tx_departed()
    }

    fn tx_backlog(&mut self) -> bool {
        self.inner.tx_backlog()
    }

    fn rx_fd(&self, queue: QueueId) -> Option<RawFd> {
        self.inner.rx_fd(queue)
    }

    fn at_end(&self) -> bool {
        self.inner.at_end()
    }

    /// The inner port's fault; a failed trace does not stop the port (see [`Traced::error`]).
    fn fault(&self) -> Option<String> {
        self.inner.fault()
    }

    fn descriptor_failed(&mut self, queue: QueueId) {
        self.inner.descriptor_failed(queue)
    }

    fn frames_held(&self) -> usize {
        self.inner.frames_held()
    }

    fn release_all(&mut self, pool: &mut FramePool) {
        self.inner.release_all(pool);
        if let Err(failure) = self.flush() {
            self.error.get_or_insert(failure);
        }
    }

    fn stats(&self) -> PortStats {
        self.inner.stats()
    }
}
