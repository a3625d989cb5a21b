//! Fuzz target for the capture reader (classic pcap and pcapng): any file must read to its end
//! or to one error, never panic, hang or allocate from a length it read. And the reader must not
//! depend on how the file reaches it: a 64-byte buffer and a reader that hands out one byte per
//! `read` call must give the same records, in the same order, and the same error as a buffer of
//! the largest record over the whole file, and a record in the buffer holds the file's bytes.
//! What the reader read, written again by the capture writer, reads back the same.
#![no_main]

use std::io::Read;

use libfuzzer_sys::fuzz_target;
use wirespeed_fuzz::OneByte;
use wirespeed_io::pcap::{FileFormat, MAX_RECORD, PcapError, PcapReader, PcapWriter, Record};

/// A packet as the writer takes it: time, length on the wire, captured bytes.
type Packet = (u64, u32, Vec<u8>);

/// Every record of `data` read with a buffer of `buf_len` bytes (`in_buffer` cleared, since it
/// depends on the buffer), and how the reading ended: `None` at the clean end, else the error.
/// The records whose bytes were in the buffer are added to `packets`.
fn read_all(
    data: &[u8],
    reader: impl Read,
    buf_len: usize,
    packets: &mut Vec<Packet>,
) -> (Vec<Record>, Option<(Option<u64>, String)>) {
    let mut reader = match PcapReader::new(reader, "fuzz.pcap") {
        Ok(reader) => reader,
        Err(error) => return (Vec::new(), Some((error.offset(), error.to_string()))),
    };
    let mut buf = vec![0u8; buf_len];
    let mut records = Vec::new();
    // Every record or block takes at least 12 bytes, so a reader that is not done after
    // `data.len()` records is looping.
    for _ in 0..=data.len() {
        match reader.next_record(&mut buf) {
            Ok(Some(record)) => {
                check_record(data, reader.format(), &record, &buf);
                if let Some(bytes) = buf.get(..record.captured_len as usize)
                    && record.in_buffer
                {
                    packets.push((record.time_ns, record.original_len, bytes.to_vec()));
                }
                assert!(reader.offset() <= data.len() as u64);
                records.push(Record {
                    in_buffer: false,
                    ..record
                });
            }
            Ok(None) => {
                assert_eq!(
                    reader.offset(),
                    data.len() as u64,
                    "a clean end reads everything"
                );
                return (records, None);
            }
            Err(error) => {
                // A failed reader stays failed, at the same place.
                let again = reader
                    .next_record(&mut buf)
                    .expect_err("a failed reader stopped");
                assert_eq!(again.offset(), error.offset().or(Some(reader.offset())));
                return (records, Some((error.offset(), error.to_string())));
            }
        }
    }
    panic!("{} records from {} bytes", records.len(), data.len());
}

fn check_record(data: &[u8], format: FileFormat, record: &Record, buf: &[u8]) {
    assert!(record.captured_len <= MAX_RECORD);
    assert!(record.offset < data.len() as u64);
    if !record.in_buffer {
        assert!(record.captured_len as usize > buf.len());
        return;
    }
    let captured = record.captured_len as usize;
    let start = record.offset as usize;
    // Where the packet bytes start: after the classic record header, or after a pcapng block's
    // fixed part (12 bytes for a simple packet block, 28 for an enhanced or obsolete one).
    let header = match format {
        FileFormat::Pcap => 16,
        FileFormat::PcapNg => match data.get(start..start + 4) {
            Some([3, 0, 0, 0] | [0, 0, 0, 3]) => 12,
            _ => 28,
        },
    };
    assert_eq!(
        data.get(start + header..start + header + captured),
        buf.get(..captured),
        "the record's bytes are the file's"
    );
}

/// Writes `packets` with the capture writer; returns the file and what reading it must give:
/// the packets whose time the format can hold (seconds in 32 bits), each on the wire at least
/// as long as captured.
fn write_all(packets: &[Packet]) -> (Vec<u8>, Vec<Packet>) {
    let mut writer = PcapWriter::new(Vec::new(), "fuzz-out.pcap").expect("a Vec takes a header");
    let mut expected = Vec::new();
    for (time_ns, original_len, bytes) in packets {
        match writer.write_record(*time_ns, bytes, *original_len) {
            Ok(()) => {
                let on_wire = (*original_len).max(bytes.len() as u32);
                expected.push((*time_ns, on_wire, bytes.clone()));
            }
            Err(PcapError::WriteTime { .. }) => assert!(*time_ns / 1_000_000_000 > u32::MAX as u64),
            Err(error) => panic!("writing {} bytes: {error}", bytes.len()),
        }
    }
    (
        writer.into_inner().expect("a Vec takes every record"),
        expected,
    )
}

fuzz_target!(|data: &[u8]| {
    let mut packets = Vec::new();
    let whole = read_all(data, data, MAX_RECORD as usize, &mut packets);
    let trickled = read_all(data, OneByte(data), 64, &mut Vec::new());
    assert_eq!(whole, trickled);

    let (written, expected) = write_all(&packets);
    let mut again = Vec::new();
    let (_, end) = read_all(
        &written,
        written.as_slice(),
        MAX_RECORD as usize,
        &mut again,
    );
    assert_eq!(end, None, "what the writer wrote reads to its end");
    assert_eq!(again, expected);
});
