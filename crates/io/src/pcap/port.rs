//! [`PcapPort`]: a port whose RX side replays a capture file and whose TX side records into one.
//!
//! It lets the whole data plane run offline and deterministically: `wirespeed switch` over pcap
//! ports forwards a capture into another capture, keeping the input's timing because `tx` stamps
//! each record with the frame's `Meta::rx_time` (the input record's timestamp) when it has one.
//!
//! * `rx` reads records straight into frames of the pool at [`HEADROOM`]; a record longer than
//!   `frame_size - HEADROOM` is skipped and counted in `rx_errors`, never truncated. At the end
//!   of the file `rx` returns 0 and [`Port::at_end`] is true. A corrupt record stops the RX
//!   side; the error stays available from [`PcapPort::error`] (and [`Port::fault`]). Only Ethernet captures (link
//!   type 1) are accepted: other link types fail [`PcapPort::open`], or stop RX when a pcapng
//!   file declares one later.
//! * `tx` takes the whole batch, writes each frame, and releases it to the pool at once (the
//!   write is the completed transmission), so the port never holds frames. A port without a TX
//!   file, or whose writer failed, refuses everything (`tx_refused`) and leaves it in the batch.
//!   Records are buffered: `release_all` (or [`PcapPort::flush`]) writes them out and reports a
//!   failure; dropping the port flushes too, but silently.
//!
//! Port info: no MAC (all zero), one queue, link always up, mode "file". A capture has no MTU; the
//! port reports 9000 (jumbo frames) and the real limit is the pool's frame size minus
//! [`HEADROOM`], enforced per record.

use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use wirespeed_packet::{Batch, Desc, FramePool, HEADROOM, Meta};

use super::LINKTYPE_ETHERNET;
use super::error::PcapError;
use super::reader::PcapReader;
use super::writer::PcapWriter;
use crate::port::{Backend, Port, PortInfo, PortStats, QueueId};

/// The MTU a pcap port reports (see the module documentation).
pub const PCAP_PORT_MTU: u16 = 9000;

/// A port backed by capture files.
pub struct PcapPort {
    info: PortInfo,
    reader: Option<PcapReader<BufReader<File>>>,
    writer: Option<PcapWriter<BufWriter<File>>>,
    stats: PortStats,
    at_end: bool,
    rx_error: Option<PcapError>,
    tx_error: Option<PcapError>,
}

/// Nanoseconds since the Unix epoch now (0 if the clock is before 1970).
pub(crate) fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_nanos().min(u64::MAX as u128) as u64)
}

impl PcapPort {
    /// Opens a port named `name` that receives the records of `rx` (pcap or pcapng, Ethernet)
    /// and writes what it transmits to `tx` (created or truncated; nanosecond pcap). Either may
    /// be absent: without `rx` the port receives nothing, without `tx` it refuses to transmit.
    pub fn open(name: &str, rx: Option<&Path>, tx: Option<&Path>) -> Result<Self, PcapError> {
        let reader = rx.map(PcapReader::open).transpose()?;
        if let Some(reader) = &reader
            && let Some((link_type, offset)) = reader
                .link_types()
                .find(|(link_type, _)| *link_type != LINKTYPE_ETHERNET)
        {
            return Err(PcapError::LinkType {
                file: reader.file().to_string(),
                offset,
                link_type,
            });
        }
        let writer = tx.map(PcapWriter::create).transpose()?;
        Ok(Self {
            info: PortInfo {
                name: name.to_string(),
                backend: Backend::Pcap,
                mac: [0; 6],
                mtu: PCAP_PORT_MTU,
                queues: 1,
                link_up: true,
                mode: "file".to_string(),
            },
            at_end: reader.is_none(),
            reader,
            writer,
            stats: PortStats::default(),
            rx_error: None,
            tx_error: None,
        })
    }

    /// The error that stopped RX, else the one that stopped TX, if any.
    pub fn error(&self) -> Option<&PcapError> {
        self.rx_error.as_ref().or(self.tx_error.as_ref())
    }

    /// Writes buffered TX records to the file.
    pub fn flush(&mut self) -> Result<(), PcapError> {
        match &mut self.writer {
            Some(writer) => writer.flush(),
            None => Ok(()),
        }
    }
}

impl Port for PcapPort {
    fn info(&self) -> &PortInfo {
        &self.info
    }

    fn rx(&mut self, queue: QueueId, pool: &mut FramePool, batch: &mut Batch) -> usize {
        let Some(reader) = &mut self.reader else {
            return 0;
        };
        if queue != 0 || self.at_end || self.rx_error.is_some() {
            return 0;
        }
        let headroom = HEADROOM as usize;
        let mut received = 0;
        // At most `room` records per call, skipped ones included, so one call's work is bounded.
        for _ in 0..batch.room() {
            let Some(frame) = pool.alloc() else { break };
            let buf = pool.frame_mut(frame).get_mut(headroom..).unwrap_or(&mut []);
            let record = match reader.next_record(buf) {
                Ok(Some(record)) => record,
                Ok(None) => {
                    pool.release(frame);
                    self.at_end = true;
                    break;
                }
                Err(error) => {
                    pool.release(frame);
                    self.stats.rx_errors += 1;
                    self.rx_error = Some(error);
                    break;
                }
            };
            if record.link_type != LINKTYPE_ETHERNET {
                pool.release(frame);
                self.stats.rx_errors += 1;
                self.rx_error = Some(PcapError::LinkType {
                    file: reader.file().to_string(),
                    offset: record.offset,
                    link_type: record.link_type,
                });
                break;
            }
            // `in_buffer` implies captured_len <= frame size - HEADROOM < 16384: fits a u16.
            let len = u16::try_from(record.captured_len)
                .ok()
                .filter(|_| record.in_buffer);
            let Some(len) = len else {
                pool.release(frame);
                self.stats.rx_errors += 1;
                continue;
            };
            let desc = Desc {
                frame,
                offset: HEADROOM,
                len,
                port: 0,
                queue,
            };
            let meta = Meta {
                rx_time: record.time_ns,
                ..Meta::EMPTY
            };
            batch.push_with_meta(desc, meta);
            self.stats.rx_bytes += len as u64;
            received += 1;
        }
        self.stats.rx_packets += received as u64;
        received
    }

    fn tx(&mut self, queue: QueueId, pool: &mut FramePool, batch: &mut Batch) -> usize {
        let writer = match &mut self.writer {
            Some(writer) if queue == 0 && self.tx_error.is_none() => writer,
            _ => {
                self.stats.tx_refused += batch.len() as u64;
                return 0;
            }
        };
        let now = now_ns();
        let mut sent = 0;
        for (desc, meta) in batch.descs().iter().zip(batch.meta()) {
            let frame = pool.frame(desc.frame);
            let start = (desc.offset as usize).min(frame.len());
            let end = (start + desc.len as usize).min(frame.len());
            let data = frame.get(start..end).unwrap_or(&[]);
            let time = if meta.rx_time != 0 { meta.rx_time } else { now };
            if let Err(error) = writer.write_record(time, data, desc.len as u32) {
                self.tx_error = Some(error);
                break;
            }
            pool.release(desc.frame);
            self.stats.tx_bytes += desc.len as u64;
            sent += 1;
        }
        self.stats.tx_packets += sent as u64;
        self.stats.tx_refused += (batch.len() - sent) as u64;
        batch.consume_front(sent);
        sent
    }

    /// Whether RX has read the whole file (or there is no RX file). A port stopped by an error
    /// is not at its end: see [`Port::fault`].
    fn at_end(&self) -> bool {
        self.at_end
    }

    /// The error that stopped RX, else the one that stopped TX ([`PcapPort::error`], as text).
    fn fault(&self) -> Option<String> {
        self.error().map(ToString::to_string)
    }

    fn frames_held(&self) -> usize {
        0
    }

    fn release_all(&mut self, _pool: &mut FramePool) {
        // The port holds no frames; this is the shutdown point, so the records reach the file.
        if let Err(error) = self.flush()
            && self.tx_error.is_none()
        {
            self.tx_error = Some(error);
        }
    }

    fn stats(&self) -> PortStats {
        self.stats
    }
}
