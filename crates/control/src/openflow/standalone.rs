//! `fail_mode = "standalone"`: while no controller takes the switch's PACKET_INs, the agent
//! switches the frames they carry itself, as a learning switch.
//!
//! Open vSwitch in fail-standalone keeps the controller's flows and switches what they do not
//! match with its NORMAL action. Here the flows stay too, and a frame that reaches the
//! controller path (the table-miss flow entry a controller installs, or any CONTROLLER action)
//! while no connection takes it is forwarded by the agent: its source MAC address is learned
//! on its in_port, and it goes out through PACKET_OUT's path to the port its destination was
//! learned on, or is flooded (every port but in_port) when the destination is unknown, a
//! group address or learned on in_port itself. Misses without a table-miss flow entry still
//! do what `[openflow] miss` says (`flood` is the closest a switch without a controller gets).
//! A frame cut short for the controller (max_len below its length) cannot be forwarded whole
//! and is dropped. As soon as a controller takes PACKET_INs again, the agent stops switching
//! and forgets what it learned; its flows are the controller's to change.
//!
//! This is the slow path: every frame is one injection through the first worker's command
//! channel, thousands per second, not millions. It keeps a switch whose controller is gone
//! connected, not fast.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use wirespeed_dataplane::app::openflow::packet_in::PacketIn as Record;
use wirespeed_openflow::Action;
use wirespeed_openflow::action::port;
use wirespeed_openflow::message::{NO_BUFFER, PacketOut};

use super::switch::Switch;
use super::translate::Ports;

/// Addresses learned at most; a full table learns no new ones until old ones age out
/// (Open vSwitch's default mac-table-size is 2048).
const MAX_ADDRESSES: usize = 8192;
/// How long an address stays learned without a frame from it (Open vSwitch's default).
const AGING: Duration = Duration::from_secs(300);

/// The learning switch's table: MAC address -> port index and when it was last seen.
#[derive(Default)]
pub struct Standalone {
    addresses: HashMap<[u8; 6], (u16, Instant)>,
}

impl Standalone {
    /// Learns `record`'s source and forwards its frame; whether it went out.
    pub fn forward(&mut self, record: &Record, switch: &Switch<'_>, now: Instant) -> bool {
        let frame = record.frame();
        if frame.len() < 14 || frame.len() < usize::from(record.total_len) {
            return false;
        }
        let in_port = record.in_port;
        if usize::from(in_port) >= switch.ports.names.len() {
            return false;
        }
        let (mut destination, mut source) = ([0u8; 6], [0u8; 6]);
        destination.copy_from_slice(&frame[..6]);
        source.copy_from_slice(&frame[6..12]);
        if source[0] & 1 == 0 {
            if self.addresses.len() >= MAX_ADDRESSES && !self.addresses.contains_key(&source) {
                self.addresses
                    .retain(|_, (_, seen)| now.duration_since(*seen) < AGING);
            }
            if self.addresses.len() < MAX_ADDRESSES || self.addresses.contains_key(&source) {
                self.addresses.insert(source, (in_port, now));
            }
        }
        let learned = self
            .addresses
            .get(&destination)
            .filter(|(_, seen)| now.duration_since(*seen) < AGING)
            .map(|&(port, _)| port);
        let out = match learned {
            // Its destination is where it came from: nowhere to go.
            Some(port) if port == in_port => return false,
            Some(port) => Ports::number(port),
            None => port::FLOOD,
        };
        let request = PacketOut {
            buffer_id: NO_BUFFER,
            in_port: Ports::number(in_port),
            actions: vec![Action::output(out)],
            data: frame.to_vec(),
        };
        switch.packet_out(&request).is_ok()
    }

    /// Forgets every address: a controller is back.
    pub fn forget(&mut self) {
        self.addresses.clear();
    }
}
