//! PACKET_OUT: a controller's frame, its actions carried out in order, out through a worker.
//!
//! Outputs go to the worker as an [`Injection`] (a frame and where its copies go). Actions
//! that rewrite the frame (set-field, push and pop VLAN, decrement TTL) run here, on the
//! control thread, with the data plane's own parser and rewrites
//! ([`wirespeed_dataplane::app::openflow::action::rewrite`]), so a frame leaves exactly as a
//! flow with the same actions would send it: each output takes the frame as the actions
//! before it left it, and each run of outputs between two rewrites is one injection. A
//! rewrite the frame has no field for (an IPv4 address of an ARP frame, a pop of an untagged
//! one) is BAD_ACTION/MATCH_INCONSISTENT, as Open vSwitch answers; a TTL decremented to zero
//! drops the frame for every output after it.

use wirespeed_dataplane::app::fields;
use wirespeed_dataplane::app::openflow::action::rewrite;
use wirespeed_dataplane::app::openflow::{Action as AppAction, SetField};
use wirespeed_dataplane::command::{Injection, Output};
use wirespeed_openflow::action::port;
use wirespeed_openflow::message::{NO_BUFFER, PacketOut};
use wirespeed_openflow::{Action, OfError};
use wirespeed_packet::flow_key::FlowKey;
use wirespeed_packet::{Desc, DropReason, Meta};

use super::translate::{Ports, action_texts};

/// Bytes before the frame in the buffer it is rewritten in: room for VLAN tags pushed.
const HEADROOM: usize = 64;

/// The injections a PACKET_OUT makes, in order: one per run of outputs between rewrites.
pub fn injections(request: &PacketOut, ports: &Ports) -> Result<Vec<Injection>, OfError> {
    if request.buffer_id != NO_BUFFER {
        return Err(OfError::BAD_REQUEST_BUFFER_UNKNOWN);
    }
    if request.data.is_empty() {
        return Err(OfError::BAD_REQUEST_PACKET);
    }
    let index = |number: u32| ports.name(number).and_then(|name| ports.index(name));
    let in_port = match request.in_port {
        port::CONTROLLER | port::LOCAL | port::ANY => None,
        number => Some(index(number).ok_or(OfError::BAD_REQUEST_PORT)?),
    };
    let mut injections = Vec::new();
    let mut outputs = Vec::new();
    // The frame is parsed once a rewrite needs it.
    let mut frame: Option<Frame> = None;
    let mut actions = request.actions.as_slice();
    while let Some((first, rest)) = actions.split_first() {
        if let Action::Output { port: number, .. } = *first {
            outputs.push(match number {
                port::IN_PORT if in_port.is_some() => Output::InPort,
                port::FLOOD => Output::Flood,
                port::ALL => Output::All,
                // OpenFlow 1.3 §7.3.7: TABLE runs the packet through the pipeline from table 0.
                port::TABLE => Output::Pipeline,
                number => Output::Port(index(number).ok_or(OfError::BAD_ACTION_OUT_PORT)?),
            });
            actions = rest;
            continue;
        }
        // A run of rewrites, up to the next output: the app's actions for it.
        let run = actions
            .iter()
            .position(|a| matches!(a, Action::Output { .. }))
            .unwrap_or(actions.len());
        let (rewrites, rest) = actions.split_at(run);
        actions = rest;
        let port_index = |name: &str| ports.index(name);
        let app_actions = action_texts(rewrites, ports)?
            .iter()
            .map(|text| fields::flow_action(text, &port_index))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| OfError::BAD_ACTION_TYPE)?;
        let current = match frame.as_mut() {
            Some(current) => current,
            None => frame.insert(Frame::parse(&request.data, in_port)?),
        };
        if !outputs.is_empty() {
            injections.push(Injection {
                in_port,
                frame: current.bytes().to_vec(),
                outputs: std::mem::take(&mut outputs),
            });
        }
        for action in &app_actions {
            if !current.apply(action)? {
                // TTL expired: the frame goes nowhere after this.
                return Ok(injections);
            }
        }
    }
    if !outputs.is_empty() {
        let bytes = frame
            .as_ref()
            .map_or_else(|| request.data.clone(), |f| f.bytes().to_vec());
        injections.push(Injection {
            in_port,
            frame: bytes,
            outputs,
        });
    }
    Ok(injections)
}

/// A frame being rewritten: its bytes with headroom, and what the parser found in them.
struct Frame {
    buffer: Vec<u8>,
    desc: Desc,
    meta: Meta,
}

impl Frame {
    /// Parses `data` as received on `in_port`; a frame the parser refuses cannot be
    /// rewritten: BAD_REQUEST/BAD_PACKET.
    fn parse(data: &[u8], in_port: Option<u16>) -> Result<Frame, OfError> {
        let len = u16::try_from(data.len()).map_err(|_| OfError::BAD_REQUEST_PACKET)?;
        let mut buffer = vec![0; HEADROOM + data.len()];
        buffer[HEADROOM..].copy_from_slice(data);
        let port = in_port.unwrap_or(u16::MAX);
        let mut meta = Meta::EMPTY;
        let mut key = FlowKey::EMPTY;
        wirespeed_packet::parse::parse(data, port, &mut meta, &mut key)
            .map_err(|_| OfError::BAD_REQUEST_PACKET)?;
        let desc = Desc {
            frame: 0,
            offset: HEADROOM as u16,
            len,
            port,
            queue: 0,
        };
        Ok(Frame { buffer, desc, meta })
    }

    /// The frame's bytes as they are now.
    fn bytes(&self) -> &[u8] {
        let start = usize::from(self.desc.offset);
        &self.buffer[start..start + usize::from(self.desc.len)]
    }

    /// Applies one rewrite; `false` when it dropped the frame (TTL expired). A tag pushed
    /// beyond the ones a frame may carry is BAD_ACTION/BAD_ARGUMENT.
    fn apply(&mut self, action: &AppAction) -> Result<bool, OfError> {
        if let AppAction::Group(_) = action {
            // A group's buckets run on a worker, for the flows that send to it.
            return Err(OfError::BAD_ACTION_TYPE);
        }
        if !self.has_field_for(action) {
            return Err(OfError::BAD_ACTION_MATCH_INCONSISTENT);
        }
        match rewrite(action, &mut self.buffer, &mut self.desc, &mut self.meta) {
            Ok(()) => Ok(true),
            Err(DropReason::TtlExpired) => Ok(false),
            Err(_) => Err(OfError::BAD_ACTION_ARGUMENT),
        }
    }

    /// Whether the frame has the header `action` changes.
    fn has_field_for(&self, action: &AppAction) -> bool {
        let meta = &self.meta;
        let ip = meta.flags & (Meta::FLAG_IPV4 | Meta::FLAG_IPV6) != 0;
        let transport = meta.l4_offset != 0 && matches!(meta.ip_proto, 6 | 17);
        match action {
            AppAction::SetField(field) => match field {
                SetField::EthSrc(_) | SetField::EthDst(_) => true,
                SetField::Ipv4Src(_) | SetField::Ipv4Dst(_) => meta.flags & Meta::FLAG_IPV4 != 0,
                SetField::Ipv6Src(_) | SetField::Ipv6Dst(_) => meta.flags & Meta::FLAG_IPV6 != 0,
                SetField::L4Src(_) | SetField::L4Dst(_) => transport,
                SetField::VlanVid(_) => meta.vlan_depth > 0,
            },
            AppAction::PushVlan(_) => true,
            AppAction::PopVlan => meta.vlan_depth > 0,
            AppAction::DecTtl => ip,
            AppAction::Output(_)
            | AppAction::Flood
            | AppAction::All
            | AppAction::InPort
            | AppAction::Drop
            | AppAction::Controller(_)
            | AppAction::Group(_) => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use wirespeed_openflow::Oxm;
    use wirespeed_packet::wire::EthernetAddress;
    use wirespeed_testkit::frames::{FrameBuilder, L3, SRC_MAC};

    use super::*;

    fn ports() -> Ports {
        Ports {
            names: vec!["p0".into(), "p1".into(), "p2".into()],
        }
    }

    fn request(data: Vec<u8>, actions: Vec<Action>) -> PacketOut {
        PacketOut {
            buffer_id: NO_BUFFER,
            in_port: 1,
            actions,
            data,
        }
    }

    /// The test's frame: IPv4/UDP, 100 bytes untagged.
    fn udp() -> FrameBuilder {
        FrameBuilder::ipv4_udp().payload_len(58)
    }

    #[test]
    fn each_output_takes_the_frame_as_the_actions_before_it_left_it() {
        let frame = udp().build();
        assert_eq!(frame.len(), 100);
        let mac = EthernetAddress([2, 0, 0, 0, 0, 0x77]);
        let dst = Ipv4Addr::new(10, 9, 8, 7);
        let actions = vec![
            Action::output(2),
            Action::SetField(Oxm::EthDst(mac.0, None)),
            Action::SetField(Oxm::Ipv4Dst(dst, None)),
            Action::output(3),
            Action::output(port::TABLE),
            Action::PushVlan(0x8100),
            Action::SetField(Oxm::VlanVid(0x1000 | 42, None)),
            Action::DecNwTtl,
            Action::output(2),
        ];
        let made = injections(&request(frame.clone(), actions), &ports()).unwrap();
        assert_eq!(made.len(), 3);
        assert_eq!(made[0].in_port, Some(0));
        assert_eq!(made[0].outputs, [Output::Port(1)]);
        assert_eq!(made[0].frame, frame);
        // The rewrites' bytes are those of a frame built with the new fields: addresses,
        // checksums, tag and TTL.
        let rewritten = udp().macs(SRC_MAC, mac).with_l3(L3::Ipv4 {
            src: Ipv4Addr::new(10, 0, 0, 1),
            dst,
        });
        assert_eq!(made[1].frame, rewritten.build());
        assert_eq!(made[1].outputs, [Output::Port(2), Output::Pipeline]);
        assert_eq!(made[2].frame, rewritten.vlan(42).ttl(63).build());
        assert_eq!(made[2].outputs, [Output::Port(1)]);
    }

    #[test]
    fn rewrites_a_frame_cannot_take_are_refused_and_an_expired_ttl_sends_nothing_more() {
        let frame = udp().build();
        let refused = |actions: Vec<Action>| injections(&request(frame.clone(), actions), &ports());
        assert_eq!(
            refused(vec![Action::PopVlan, Action::output(2)]),
            Err(OfError::BAD_ACTION_MATCH_INCONSISTENT)
        );
        let v6 = Oxm::Ipv6Dst("2001:db8::1".parse().unwrap(), None);
        assert_eq!(
            refused(vec![Action::SetField(v6)]),
            Err(OfError::BAD_ACTION_MATCH_INCONSISTENT)
        );
        // A group's buckets run on a worker only.
        assert_eq!(
            refused(vec![Action::Group(1), Action::output(2)]),
            Err(OfError::BAD_ACTION_TYPE)
        );
        assert_eq!(
            injections(&request(vec![1, 2, 3], vec![Action::DecNwTtl]), &ports()),
            Err(OfError::BAD_REQUEST_PACKET)
        );
        let dying = udp().ttl(1).build();
        let sent = injections(
            &request(
                dying.clone(),
                vec![Action::output(2), Action::DecNwTtl, Action::output(3)],
            ),
            &ports(),
        )
        .unwrap();
        assert_eq!(sent.len(), 1);
        assert_eq!(sent[0].frame, dying);
    }
}
