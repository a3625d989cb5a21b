//! The agent against a stand-in for the dispatcher that applies requests to a real openflow
//! app (one worker's worth), spoken to over TCP with the codec as a controller would.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use wirespeed_dataplane::app::openflow::packet_in::{self, Origin, Reason};
use wirespeed_dataplane::app::openflow::removed;
use wirespeed_dataplane::app::openflow::{OpenFlow, OpenFlowConfig};
use wirespeed_dataplane::app::{App, CommandContext};
use wirespeed_dataplane::command::{AppReply, Injection, Output};
use wirespeed_io::Port;
use wirespeed_io::memory::{LinkConfig, link};
use wirespeed_openflow::action::{group, port};
use wirespeed_openflow::message::{FlowMod, FlowModCommand, NO_BUFFER};
use wirespeed_openflow::multipart::{FlowStatsRequest, MultipartRequest, ReplyBody, RequestBody};
use wirespeed_openflow::oxm::{ETH_TYPE_IPV4, OFPVID_PRESENT};
use wirespeed_openflow::{Action, Header, Instruction, Match, Message, OfError, Oxm};

use super::connection::Timers;
use super::{Agent, AgentConfig, Rings, SwitchInfo};
use crate::dispatch::Handler;
use crate::protocol::{Request, Response, Show};

/// One openflow app behind the control socket's requests, as a one-worker dispatcher would
/// answer them.
pub(super) struct OneWorker {
    worker: Mutex<(OpenFlow, Vec<Box<dyn Port>>)>,
    /// The frames PACKET_OUTs sent, as the worker would have got them.
    pub(super) injected: Mutex<Vec<Injection>>,
    /// The length of every run of flow edits, in order.
    pub(super) runs: Mutex<Vec<usize>>,
}

impl Handler for OneWorker {
    fn handle(&self, request: Request, _body: &mut dyn Read) -> Response {
        if let Request::PacketOut(injection) = request {
            self.injected.lock().unwrap().push(injection);
            return Response::Ok(json!({ "sent": 1 }));
        }
        if request == Request::Show(Show::Ports) {
            let rows: Vec<_> = ["p0", "p1", "p2"]
                .iter()
                .map(|name| json!(["0", name, "memory", "-", "5", "6", "0", "0", "0", "-"]))
                .collect();
            return Response::Ok(json!({ "columns": [], "rows": rows }));
        }
        if let Request::FlowEdits(edits) = &request {
            self.runs.lock().unwrap().push(edits.len());
        }
        let Some(command) = request.app_command() else {
            return Response::error("unsupported", "-");
        };
        let mut worker = self.worker.lock().unwrap();
        let (app, ports) = &mut *worker;
        let ctx = CommandContext { ports, now: 0 };
        match app.command(command, &ctx) {
            AppReply::Done => Response::Ok(json!({ "applied": 1 })),
            AppReply::Table(table) => {
                let rows: Vec<_> = table
                    .rows
                    .into_iter()
                    .map(|row| {
                        let mut all = vec!["0".to_string()];
                        all.extend(row);
                        all
                    })
                    .collect();
                Response::Ok(json!({ "columns": table.columns, "rows": rows }))
            }
            AppReply::Refused(why) => Response::error(why, "-"),
            AppReply::Edits(results) => {
                let refused: Vec<_> = results
                    .into_iter()
                    .enumerate()
                    .filter_map(|(at, why)| Some(json!([at, why?])))
                    .collect();
                Response::Ok(json!({ "applied": 1, "refused": refused }))
            }
            other => Response::error(format!("{other:?}"), "-"),
        }
    }
}

fn start(timers: Timers) -> Agent {
    start_listening(timers).0
}

/// [`start_switch`] listening on a free port of 127.0.0.1.
pub(super) fn start_listening(
    timers: Timers,
) -> (
    Agent,
    Arc<OneWorker>,
    packet_in::Sender,
    Vec<removed::Sender>,
) {
    start_switch(
        timers,
        AgentConfig {
            listen: Some("127.0.0.1:0".parse().unwrap()),
            ..AgentConfig::default()
        },
    )
}

fn start_with(timers: Timers, config: AgentConfig) -> Agent {
    start_switch(timers, config).0
}

/// The agent, its stand-in dispatcher, the worker's end of the ring of frames for the
/// controller, and the ends of two workers' rings of flows removed by timeout.
pub(super) fn start_switch(
    timers: Timers,
    config: AgentConfig,
) -> (
    Agent,
    Arc<OneWorker>,
    packet_in::Sender,
    Vec<removed::Sender>,
) {
    start_sized(timers, config, OpenFlowConfig::default().flows_per_table)
}

/// [`start_switch`] with an app of `flows_per_table` flows per table.
pub(super) fn start_sized(
    timers: Timers,
    config: AgentConfig,
    flows_per_table: usize,
) -> (
    Agent,
    Arc<OneWorker>,
    packet_in::Sender,
    Vec<removed::Sender>,
) {
    let (p0, p1) = link("p0", "p1", &LinkConfig::default());
    let (p2, _p3) = link("p2", "p3", &LinkConfig::default());
    let ports: Vec<Box<dyn Port>> = vec![Box::new(p0), Box::new(p1), Box::new(p2)];
    let app = OpenFlow::new(OpenFlowConfig {
        tables: 2,
        ports: 3,
        tsc_hz: Some(1_000_000_000),
        flows_per_table,
        ..OpenFlowConfig::default()
    });
    let handler = Arc::new(OneWorker {
        worker: Mutex::new((app, ports)),
        injected: Mutex::new(Vec::new()),
        runs: Mutex::new(Vec::new()),
    });
    let (sender, receiver) = packet_in::ring();
    let ((removed_0, expired_0), (removed_1, expired_1)) = (removed::ring(), removed::ring());
    let info = SwitchInfo {
        handler: handler.clone(),
        ports: vec!["p0".into(), "p1".into(), "p2".into()],
        interfaces: vec![None; 3],
        tables: 2,
        flows_per_table: 1000,
        rings: Rings {
            packet_ins: vec![receiver],
            removed: vec![expired_0, expired_1],
        },
    };
    let agent = Agent::start(config, info, timers, || Ok(())).unwrap();
    (agent, handler, sender, vec![removed_0, removed_1])
}

/// A controller's end of a connection.
pub(super) struct Peer {
    stream: TcpStream,
    xid: u32,
}

impl Peer {
    fn connect(addr: SocketAddr) -> Peer {
        let stream = TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        Peer { stream, xid: 100 }
    }

    /// Connects and exchanges HELLOs.
    pub(super) fn hello(addr: SocketAddr) -> Peer {
        let mut peer = Peer::connect(addr);
        let (header, hello) = peer.receive();
        assert_eq!(header.version, 4);
        assert_eq!(
            hello,
            Message::Hello {
                bitmap: Some(vec![0x10])
            }
        );
        peer.send(&Message::Hello {
            bitmap: Some(vec![0x12]),
        });
        peer
    }

    /// The socket, to write several messages at once.
    pub(super) fn stream(&mut self) -> &mut TcpStream {
        &mut self.stream
    }

    pub(super) fn send(&mut self, message: &Message) -> u32 {
        self.xid += 1;
        self.stream
            .write_all(&message.encode(self.xid).unwrap())
            .unwrap();
        self.xid
    }

    pub(super) fn receive(&mut self) -> (Header, Message) {
        let mut head = [0u8; 8];
        self.stream.read_exact(&mut head).unwrap();
        let header = Header::peek(&head).unwrap();
        let mut bytes = head.to_vec();
        bytes.resize(usize::from(header.length), 0);
        self.stream.read_exact(&mut bytes[8..]).unwrap();
        Message::decode(&bytes).unwrap()
    }

    /// Sends `message` and a barrier; the replies before the barrier's.
    pub(super) fn ask(&mut self, message: &Message) -> Vec<Message> {
        self.send(message);
        let barrier = self.send(&Message::BarrierRequest);
        let mut replies = Vec::new();
        loop {
            let (header, reply) = self.receive();
            if header.xid == barrier && reply == Message::BarrierReply {
                return replies;
            }
            replies.push(reply);
        }
    }

    pub(super) fn flows(&mut self) -> Vec<wirespeed_openflow::multipart::FlowStats> {
        let request = Message::MultipartRequest(MultipartRequest {
            flags: 0,
            body: RequestBody::Flow(FlowStatsRequest {
                table_id: 0xff,
                out_port: port::ANY,
                out_group: group::ANY,
                cookie: 0,
                cookie_mask: 0,
                matcher: Match::default(),
            }),
        });
        let mut flows = Vec::new();
        for reply in self.ask(&request) {
            let Message::MultipartReply(reply) = reply else {
                panic!("{reply:?}");
            };
            let ReplyBody::Flow(part) = reply.body else {
                panic!("{reply:?}");
            };
            flows.extend(part);
        }
        flows
    }
}

pub(super) fn flow_mod(
    command: FlowModCommand,
    priority: u16,
    fields: Vec<Oxm>,
    actions: Vec<Action>,
) -> Message {
    Message::FlowMod(FlowMod {
        cookie: 0,
        cookie_mask: 0,
        table_id: 0,
        command,
        idle_timeout: 0,
        hard_timeout: 0,
        priority,
        buffer_id: NO_BUFFER,
        out_port: port::ANY,
        out_group: group::ANY,
        flags: 0,
        matcher: Match::new(fields),
        instructions: vec![Instruction::ApplyActions(actions)],
    })
}

/// The FLOW_REMOVED of the priority-5 flow to `ipv4_dst(1)` that never forwarded, with this
/// cookie, reason and idle timeout.
pub(super) fn removed_flow(cookie: u64, reason: u8, idle_timeout: u16) -> Message {
    Message::FlowRemoved(wirespeed_openflow::message::FlowRemoved {
        cookie,
        priority: 5,
        reason,
        table_id: 0,
        duration_sec: 0,
        duration_nsec: 0,
        idle_timeout,
        hard_timeout: 0,
        packet_count: 0,
        byte_count: 0,
        matcher: Match::new(ipv4_dst(1)),
    })
}

pub(super) fn ipv4_dst(a: u8) -> Vec<Oxm> {
    vec![
        Oxm::EthType(ETH_TYPE_IPV4),
        Oxm::Ipv4Dst([10, a, 0, 0].into(), Some([255, 255, 0, 0].into())),
    ]
}

#[test]
fn features_and_descriptions() {
    let agent = start(Timers::default());
    let mut peer = Peer::hello(agent.local_addr().unwrap());
    let replies = peer.ask(&Message::FeaturesRequest);
    let [Message::FeaturesReply(features)] = replies.as_slice() else {
        panic!("{replies:?}");
    };
    assert_eq!((features.datapath_id, features.n_tables), (1, 2));
    let ports = peer.ask(&Message::MultipartRequest(MultipartRequest {
        flags: 0,
        body: RequestBody::PortDesc,
    }));
    let [Message::MultipartReply(reply)] = ports.as_slice() else {
        panic!("{ports:?}");
    };
    let ReplyBody::PortDesc(ports) = &reply.body else {
        panic!("{reply:?}");
    };
    let names: Vec<_> = ports.iter().map(|p| (p.port_no, p.name.as_str())).collect();
    assert_eq!(names, [(1, "p0"), (2, "p1"), (3, "p2")]);
    let tables = peer.ask(&Message::MultipartRequest(MultipartRequest {
        flags: 0,
        body: RequestBody::TableFeatures(Vec::new()),
    }));
    assert!(matches!(&tables[..], [Message::MultipartReply(r)]
        if matches!(&r.body, ReplyBody::TableFeatures(t) if t.len() == 2)));
    let status = agent.status();
    assert_eq!(status.len(), 1);
    assert_eq!(status[0].state, "connected");
    // What `show openflow` lists: peer, kind, state, role, received, sent, refused, flow mods.
    let rows = agent.view().rows();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0][1..4], ["passive", "connected", "equal"]);
    assert_eq!(rows[0][4], status[0].counts.received.to_string());
}

#[test]
fn flow_mods_reach_the_app_and_dump_back() {
    let agent = start(Timers::default());
    let mut peer = Peer::hello(agent.local_addr().unwrap());
    for (priority, a, out) in [(10, 1, 2), (20, 2, 3), (30, 3, 3)] {
        let add = flow_mod(
            FlowModCommand::Add,
            priority,
            ipv4_dst(a),
            vec![Action::output(out)],
        );
        assert_eq!(peer.ask(&add), vec![]);
    }
    let flows = peer.flows();
    assert_eq!(flows.len(), 3);
    assert_eq!(flows[0].priority, 30);
    assert_eq!(flows[0].matcher, Match::new(ipv4_dst(3)));
    assert_eq!(
        flows[0].instructions,
        vec![Instruction::ApplyActions(vec![Action::output(3)])]
    );
    // Strict delete takes the one flow; non-strict with out_port 3 the one left on port 3.
    let strict = flow_mod(FlowModCommand::DeleteStrict, 10, ipv4_dst(1), vec![]);
    assert_eq!(peer.ask(&strict), vec![]);
    assert_eq!(peer.flows().len(), 2);
    let Message::FlowMod(mut by_port) = flow_mod(FlowModCommand::Delete, 0, vec![], vec![]) else {
        unreachable!()
    };
    by_port.out_port = 3;
    by_port.table_id = 0xff;
    assert_eq!(peer.ask(&Message::FlowMod(by_port.clone())), vec![]);
    assert!(peer.flows().is_empty());
    // Modify changes the actions of the flows it selects.
    let add = flow_mod(FlowModCommand::Add, 5, ipv4_dst(9), vec![Action::output(1)]);
    assert_eq!(peer.ask(&add), vec![]);
    let modify = flow_mod(
        FlowModCommand::Modify,
        0,
        vec![],
        vec![Action::output(port::FLOOD)],
    );
    assert_eq!(peer.ask(&modify), vec![]);
    let flows = peer.flows();
    assert_eq!(
        flows[0].instructions,
        vec![Instruction::ApplyActions(vec![Action::output(port::FLOOD)])]
    );
    assert_eq!(agent.status()[0].counts.flow_mods, 7);
}

#[test]
fn masked_fields_and_the_action_set_instructions_dump_back() {
    let agent = start(Timers::default());
    let mut peer = Peer::hello(agent.local_addr().unwrap());
    let fields = vec![
        Oxm::Metadata(0x10, Some(0xf0)),
        Oxm::EthDst([1, 0, 0, 0, 0, 0], Some([1, 0, 0, 0, 0, 0])),
        Oxm::EthType(ETH_TYPE_IPV4),
        Oxm::VlanVid(OFPVID_PRESENT, Some(OFPVID_PRESENT)),
        Oxm::VlanPcp(6),
        Oxm::IpProto(1),
        Oxm::Ipv4Dst([10, 0, 0, 2].into(), Some([255, 0, 255, 255].into())),
        Oxm::Icmpv4Type(8),
    ];
    let Message::FlowMod(mut add) = flow_mod(FlowModCommand::Add, 9, fields.clone(), vec![]) else {
        unreachable!()
    };
    let instructions = vec![
        Instruction::ApplyActions(vec![Action::DecNwTtl]),
        Instruction::ClearActions,
        Instruction::WriteActions(vec![Action::output(2)]),
        Instruction::WriteMetadata {
            metadata: 1,
            mask: 1,
        },
    ];
    add.instructions = instructions.clone();
    assert_eq!(peer.ask(&Message::FlowMod(add)), vec![]);
    let flows = peer.flows();
    assert_eq!(flows.len(), 1);
    assert_eq!(flows[0].matcher, Match::new(fields));
    assert_eq!(flows[0].instructions, instructions);
    // A delete by out_port finds the output in the action set.
    let Message::FlowMod(mut by_port) = flow_mod(FlowModCommand::Delete, 0, vec![], vec![]) else {
        unreachable!()
    };
    by_port.out_port = 2;
    assert_eq!(peer.ask(&Message::FlowMod(by_port)), vec![]);
    assert!(peer.flows().is_empty());
}

#[test]
fn what_the_app_cannot_do_is_refused_with_the_specs_error() {
    let agent = start(Timers::default());
    let mut peer = Peer::hello(agent.local_addr().unwrap());
    let refused = |peer: &mut Peer, message: Message| -> OfError {
        let replies = peer.ask(&message);
        let [Message::Error { error, .. }] = replies.as_slice() else {
            panic!("{replies:?}");
        };
        *error
    };
    let add = flow_mod(FlowModCommand::Add, 1, vec![], vec![Action::output(9)]);
    assert_eq!(refused(&mut peer, add), OfError::BAD_ACTION_OUT_PORT);
    let add = flow_mod(
        FlowModCommand::Add,
        1,
        vec![],
        vec![Action::output(port::LOCAL)],
    );
    assert_eq!(refused(&mut peer, add), OfError::BAD_ACTION_OUT_PORT);
    // The key keeps an ARP operation's low byte only.
    let arp = vec![Oxm::EthType(0x0806), Oxm::ArpOp(0x0101)];
    let add = flow_mod(FlowModCommand::Add, 1, arp, vec![]);
    assert_eq!(refused(&mut peer, add), OfError::BAD_MATCH_VALUE);
    let Message::FlowMod(mut meter) = flow_mod(FlowModCommand::Add, 1, vec![], vec![]) else {
        unreachable!()
    };
    meter.instructions = vec![Instruction::Meter(1)];
    assert_eq!(
        refused(&mut peer, Message::FlowMod(meter)),
        OfError::BAD_INSTRUCTION_UNSUPPORTED
    );
    let Message::FlowMod(mut far) = flow_mod(FlowModCommand::Add, 1, vec![], vec![]) else {
        unreachable!()
    };
    far.table_id = 5;
    assert_eq!(
        refused(&mut peer, Message::FlowMod(far)),
        OfError::FLOW_MOD_BAD_TABLE_ID
    );
    // A malformed message is answered, and the connection goes on.
    peer.stream.write_all(&[4, 77, 0, 8, 0, 0, 0, 1]).unwrap();
    let (header, reply) = peer.receive();
    assert_eq!(header.xid, 1);
    assert!(matches!(
        reply,
        Message::Error {
            error: OfError::BAD_REQUEST_TYPE,
            ..
        }
    ));
    assert_eq!(
        peer.ask(&Message::EchoRequest(vec![1, 2])),
        vec![Message::EchoReply(vec![1, 2])]
    );
}

#[test]
fn silent_and_garbage_peers_are_cut_off_without_disturbing_others() {
    let timers = Timers {
        handshake: Duration::from_millis(300),
        echo_idle: Duration::from_millis(300),
        echo_timeout: Duration::from_millis(300),
    };
    let agent = start(timers);
    let addr = agent.local_addr().unwrap();
    let mut good = Peer::hello(addr);
    let mut silent = Peer::connect(addr);
    let _ = silent.receive();
    let mut garbage = Peer::connect(addr);
    let _ = garbage.receive();
    garbage.stream.write_all(&[0xde; 64]).unwrap();
    // A peer that finished its HELLO, then trickles a message that never ends.
    let mut trickle = Peer::hello(addr);
    trickle.stream.write_all(&[4, 2, 0xff, 0xff]).unwrap();
    // The good peer answers the echo requests and keeps its connection.
    let started = std::time::Instant::now();
    while started.elapsed() < Duration::from_millis(1500) {
        let (header, message) = good.receive();
        // One more byte of the trickler's endless message, which must not keep it alive.
        let _ = trickle.stream.write_all(&[0]);
        if let Message::EchoRequest(data) = message {
            good.stream
                .write_all(&Message::EchoReply(data).encode(header.xid).unwrap())
                .unwrap();
        }
    }
    let mut rest = Vec::new();
    assert_eq!(
        silent.stream.read_to_end(&mut rest).unwrap(),
        0,
        "silent peer closed"
    );
    let _ = garbage.stream.read_to_end(&mut rest);
    assert_eq!(peer_count(&agent), 1);
    assert_eq!(
        good.ask(&Message::BarrierRequest),
        vec![Message::BarrierReply]
    );
}

fn peer_count(agent: &Agent) -> usize {
    agent.status().len()
}

#[test]
fn a_peer_without_openflow_13_is_refused() {
    let agent = start(Timers::default());
    let mut peer = Peer::connect(agent.local_addr().unwrap());
    let _ = peer.receive();
    // OpenFlow 1.0's HELLO, no bitmap.
    peer.stream.write_all(&[1, 0, 0, 8, 0, 0, 0, 5]).unwrap();
    let (_, reply) = peer.receive();
    assert!(matches!(
        reply,
        Message::Error {
            error: OfError::HELLO_INCOMPATIBLE,
            ..
        }
    ));
}

#[test]
fn listen_and_controller_targets_parse() {
    use super::{parse_controller, parse_listen};
    assert_eq!(
        parse_listen("ptcp:6653"),
        Some(Some("127.0.0.1:6653".parse().unwrap()))
    );
    assert_eq!(
        parse_listen("ptcp:6633:0.0.0.0"),
        Some(Some("0.0.0.0:6633".parse().unwrap()))
    );
    assert_eq!(parse_listen("none"), Some(None));
    assert_eq!(parse_listen("tcp:1"), None);
    assert_eq!(
        parse_controller("tcp:192.0.2.1:6653"),
        Some("192.0.2.1:6653".parse().unwrap())
    );
    assert_eq!(
        parse_controller("tcp:[2001:db8::1]:6633"),
        Some("[2001:db8::1]:6633".parse().unwrap())
    );
    assert_eq!(
        parse_controller("tcp:192.0.2.1"),
        Some("192.0.2.1:6653".parse().unwrap())
    );
    assert_eq!(parse_controller("ssl:192.0.2.1:6653"), None);
}

#[test]
fn an_active_connection_is_made_again_after_its_controller_drops_it() {
    let controller = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = controller.local_addr().unwrap();
    let agent = start_with(
        Timers::default(),
        AgentConfig {
            listen: None,
            controllers: vec![addr],
            ..AgentConfig::default()
        },
    );
    let accept = |controller: &std::net::TcpListener| {
        let (stream, _) = controller.accept().unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let mut peer = Peer { stream, xid: 1 };
        assert!(matches!(peer.receive().1, Message::Hello { .. }));
        peer.send(&Message::Hello {
            bitmap: Some(vec![0x10]),
        });
        peer
    };
    let mut peer = accept(&controller);
    assert_eq!(
        peer.ask(&Message::BarrierRequest),
        vec![Message::BarrierReply]
    );
    let status = agent.status();
    assert_eq!(
        (status[0].kind.as_str(), status[0].state.as_str()),
        ("active", "connected")
    );
    drop(peer);
    let started = std::time::Instant::now();
    let mut again = accept(&controller);
    // The first retry waits the first back-off, 1 s.
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(900) && waited < Duration::from_secs(4),
        "{waited:?}"
    );
    assert_eq!(
        again.ask(&Message::BarrierRequest),
        vec![Message::BarrierReply]
    );
}

#[test]
fn one_master_at_a_time_and_slaves_may_not_change_flows() {
    let agent = start(Timers::default());
    let addr = agent.local_addr().unwrap();
    let (mut first, mut second) = (Peer::hello(addr), Peer::hello(addr));
    let role = |peer: &mut Peer, role: u32| -> u32 {
        let replies = peer.ask(&Message::RoleRequest(wirespeed_openflow::message::Role {
            role,
            generation_id: 1,
        }));
        let [Message::RoleReply(reply)] = replies.as_slice() else {
            panic!("{replies:?}");
        };
        reply.role
    };
    use wirespeed_openflow::message::role;
    assert_eq!(role(&mut first, role::MASTER), role::MASTER);
    assert_eq!(role(&mut second, role::MASTER), role::MASTER);
    // The first is a slave now.
    assert_eq!(role(&mut first, role::NOCHANGE), role::SLAVE);
    let add = flow_mod(FlowModCommand::Add, 1, vec![], vec![Action::output(1)]);
    let replies = first.ask(&add);
    assert!(
        matches!(
            replies.as_slice(),
            [Message::Error {
                error: OfError::BAD_REQUEST_IS_SLAVE,
                ..
            }]
        ),
        "{replies:?}"
    );
    assert_eq!(second.ask(&add), vec![]);
    let mut roles: Vec<_> = agent.status().iter().map(|s| s.role).collect();
    roles.sort();
    assert_eq!(roles, ["master", "slave"]);
}

pub(super) fn role(peer: &mut Peer, role: u32) {
    let replies = peer.ask(&Message::RoleRequest(wirespeed_openflow::message::Role {
        role,
        generation_id: 1,
    }));
    assert!(
        matches!(replies.as_slice(), [Message::RoleReply(_)]),
        "{replies:?}"
    );
}

#[test]
fn frames_for_the_controller_go_to_master_and_equal_peers_not_to_slaves() {
    use wirespeed_openflow::message::{PacketIn, role};
    let (agent, _, mut worker, _) = start_listening(Timers::default());
    let addr = agent.local_addr().unwrap();
    let (mut master, mut equal, mut slave) =
        (Peer::hello(addr), Peer::hello(addr), Peer::hello(addr));
    role(&mut master, role::MASTER);
    role(&mut slave, role::SLAVE);
    let frame: Vec<u8> = (0..100).collect();
    // A flow of table 1, after table 0 wrote metadata: the match carries it.
    let origin = Origin {
        reason: Reason::Action,
        table: 1,
        cookie: 0xfeed,
        metadata: 0x42,
    };
    assert!(packet_in::send(&mut worker, origin, 2, &frame, 60));
    let table_miss = Origin::default();
    assert!(packet_in::send(
        &mut worker,
        table_miss,
        0,
        &frame,
        u16::MAX
    ));
    let expected = [
        PacketIn {
            buffer_id: NO_BUFFER,
            total_len: 100,
            reason: 1,
            table_id: 1,
            cookie: 0xfeed,
            matcher: Match::new(vec![Oxm::InPort(3), Oxm::Metadata(0x42, None)]),
            data: frame[..60].to_vec(),
        },
        PacketIn {
            buffer_id: NO_BUFFER,
            total_len: 100,
            reason: 0,
            table_id: 0,
            cookie: 0,
            matcher: Match::new(vec![Oxm::InPort(1)]),
            data: frame.clone(),
        },
    ];
    for peer in [&mut master, &mut equal] {
        for want in &expected {
            assert_eq!(peer.receive().1, Message::PacketIn(want.clone()));
        }
    }
    // Both were sent to every peer in the turn that took them: the slave's would be here,
    // before its barrier's reply.
    assert_eq!(
        slave.ask(&Message::EchoRequest(vec![7])),
        vec![Message::EchoReply(vec![7])]
    );
    // The table-miss flow entry a controller installs goes in, and dumps back the same.
    let to_controller = vec![Action::Output {
        port: port::CONTROLLER,
        max_len: 0xffff,
    }];
    let add = flow_mod(FlowModCommand::Add, 0, vec![], to_controller.clone());
    assert_eq!(master.ask(&add), vec![]);
    let flows = master.flows();
    assert_eq!(
        flows[0].instructions,
        vec![Instruction::ApplyActions(to_controller)]
    );
}

#[test]
fn packet_out_reaches_a_worker_and_what_it_cannot_do_is_refused() {
    use wirespeed_openflow::message::PacketOut;
    let (agent, handler, _worker, _) = start_listening(Timers::default());
    let mut peer = Peer::hello(agent.local_addr().unwrap());
    let frame: Vec<u8> = (0..64).collect();
    let packet_out = |in_port: u32, actions: Vec<Action>| {
        Message::PacketOut(PacketOut {
            buffer_id: NO_BUFFER,
            in_port,
            actions,
            data: frame.clone(),
        })
    };
    let outputs = vec![
        Action::output(2),
        Action::output(port::FLOOD),
        Action::output(port::ALL),
        Action::output(port::IN_PORT),
        Action::output(port::TABLE),
    ];
    assert_eq!(peer.ask(&packet_out(1, outputs)), vec![]);
    assert_eq!(
        peer.ask(&packet_out(port::CONTROLLER, vec![Action::output(3)])),
        vec![]
    );
    assert_eq!(
        *handler.injected.lock().unwrap(),
        [
            Injection {
                in_port: Some(0),
                frame: frame.clone(),
                outputs: vec![
                    Output::Port(1),
                    Output::Flood,
                    Output::All,
                    Output::InPort,
                    Output::Pipeline,
                ],
            },
            Injection {
                in_port: None,
                frame: frame.clone(),
                outputs: vec![Output::Port(2)],
            },
        ]
    );
    let buffered = Message::PacketOut(PacketOut {
        buffer_id: 7,
        in_port: 1,
        actions: vec![Action::output(2)],
        data: Vec::new(),
    });
    for (request, want) in [
        (buffered, OfError::BAD_REQUEST_BUFFER_UNKNOWN),
        (packet_out(9, vec![]), OfError::BAD_REQUEST_PORT),
        (
            packet_out(1, vec![Action::output(9)]),
            OfError::BAD_ACTION_OUT_PORT,
        ),
        // The frame has no tag to pop (its EtherType is 0x0c0d).
        (
            packet_out(1, vec![Action::PopVlan]),
            OfError::BAD_ACTION_MATCH_INCONSISTENT,
        ),
        (
            packet_out(1, vec![Action::SetNwTtl(5)]),
            OfError::BAD_ACTION_TYPE,
        ),
    ] {
        let replies = peer.ask(&request);
        assert!(
            matches!(replies.as_slice(), [Message::Error { error, .. }] if *error == want),
            "{request:?}: {replies:?}"
        );
    }
    assert_eq!(handler.injected.lock().unwrap().len(), 2);
}

#[test]
fn cookies_are_kept_and_select_flows_for_statistics_and_deletes() {
    let agent = start(Timers::default());
    let mut peer = Peer::hello(agent.local_addr().unwrap());
    let with_cookie = |a: u8, cookie: u64, command: FlowModCommand| {
        let Message::FlowMod(mut request) =
            flow_mod(command, 5, ipv4_dst(a), vec![Action::output(2)])
        else {
            unreachable!()
        };
        request.cookie = cookie;
        request.cookie_mask = if command == FlowModCommand::Add {
            0
        } else {
            0xff
        };
        Message::FlowMod(request)
    };
    for (a, cookie) in [(1, 0x1a1), (2, 0x2a2), (3, 0)] {
        assert_eq!(
            peer.ask(&with_cookie(a, cookie, FlowModCommand::Add)),
            vec![]
        );
    }
    let mut cookies: Vec<u64> = peer.flows().iter().map(|f| f.cookie).collect();
    cookies.sort();
    assert_eq!(cookies, [0, 0x1a1, 0x2a2]);
    // A statistics request with a cookie mask sees the flows whose masked cookie is equal.
    let request = |cookie: u64, mask: u64| {
        Message::MultipartRequest(MultipartRequest {
            flags: 0,
            body: RequestBody::Flow(FlowStatsRequest {
                table_id: 0xff,
                out_port: port::ANY,
                out_group: group::ANY,
                cookie,
                cookie_mask: mask,
                matcher: Match::default(),
            }),
        })
    };
    let selected = |peer: &mut Peer, cookie: u64, mask: u64| -> Vec<u64> {
        let replies = peer.ask(&request(cookie, mask));
        let [Message::MultipartReply(reply)] = replies.as_slice() else {
            panic!("{replies:?}");
        };
        let ReplyBody::Flow(flows) = &reply.body else {
            panic!("{reply:?}");
        };
        flows.iter().map(|f| f.cookie).collect()
    };
    assert_eq!(selected(&mut peer, 0xa2, 0xff), [0x2a2]);
    assert_eq!(selected(&mut peer, 0x100, 0xf00), [0x1a1]);
    // A delete takes only the flows of its masked cookie, whatever its match.
    let Message::FlowMod(mut delete) = with_cookie(0, 0xa1, FlowModCommand::Delete) else {
        unreachable!()
    };
    delete.matcher = Match::default();
    assert_eq!(peer.ask(&Message::FlowMod(delete)), vec![]);
    let mut cookies: Vec<u64> = peer.flows().iter().map(|f| f.cookie).collect();
    cookies.sort();
    assert_eq!(cookies, [0, 0x2a2]);
}

#[test]
fn a_deleted_flow_that_asked_for_it_is_reported_to_every_controller() {
    use wirespeed_openflow::message::{flow_flags, role};
    let agent = start(Timers::default());
    let addr = agent.local_addr().unwrap();
    let (mut first, mut other, mut slave) =
        (Peer::hello(addr), Peer::hello(addr), Peer::hello(addr));
    role(&mut slave, role::SLAVE);
    let add = |a: u8, flags: u16| {
        let Message::FlowMod(mut request) =
            flow_mod(FlowModCommand::Add, 5, ipv4_dst(a), vec![Action::output(2)])
        else {
            unreachable!()
        };
        request.flags = flags;
        request.cookie = u64::from(a);
        request.idle_timeout = 30;
        Message::FlowMod(request)
    };
    assert_eq!(first.ask(&add(1, flow_flags::SEND_FLOW_REM)), vec![]);
    assert_eq!(first.ask(&add(2, 0)), vec![]);
    let flags: Vec<u16> = first.flows().iter().map(|f| f.flags).collect();
    assert!(flags.contains(&flow_flags::SEND_FLOW_REM) && flags.contains(&0));
    // Deleting both reports only the one that asked, to both controllers, not to the slave.
    let delete = flow_mod(FlowModCommand::Delete, 0, vec![], vec![]);
    let replies = first.ask(&delete);
    let expected = removed_flow(1, 2, 30);
    assert_eq!(replies, std::slice::from_ref(&expected));
    assert_eq!(other.receive().1, expected);
    assert_eq!(
        slave.ask(&Message::EchoRequest(vec![1])),
        vec![Message::EchoReply(vec![1])]
    );
    assert!(first.flows().is_empty());
}

#[test]
fn a_flow_timed_out_on_every_worker_is_reported_once_with_its_counts_summed() {
    use wirespeed_dataplane::app::openflow::{Action as AppAction, FlowEntry};
    use wirespeed_dataplane::table::classifier::FlowMatch;
    use wirespeed_openflow::message::FlowRemoved;
    let (agent, _, _, mut workers) = start_listening(Timers::default());
    let mut peer = Peer::hello(agent.local_addr().unwrap());
    let mut entry =
        FlowEntry::new(9, FlowMatch::any().in_port(1), vec![AppAction::Output(0)]).idle_timeout(10);
    entry.cookie = 0x77;
    entry.send_flow_removed = true;
    let report = |packets: u64, seconds: u64| removed::Expired {
        table: 1,
        entry: entry.clone(),
        timeout: removed::Timeout::Idle,
        packets,
        bytes: packets * 100,
        age: std::time::Duration::from_secs(seconds),
    };
    workers[0].push(report(3, 12)).unwrap();
    // One worker's copy is gone, the other's still forwards: nothing yet.
    assert_eq!(
        peer.ask(&Message::EchoRequest(vec![2])),
        vec![Message::EchoReply(vec![2])]
    );
    workers[1].push(report(4, 15)).unwrap();
    assert_eq!(
        peer.receive().1,
        Message::FlowRemoved(FlowRemoved {
            cookie: 0x77,
            priority: 9,
            reason: 0,
            table_id: 1,
            duration_sec: 15,
            duration_nsec: 0,
            idle_timeout: 10,
            hard_timeout: 0,
            packet_count: 7,
            byte_count: 700,
            matcher: Match::new(vec![Oxm::InPort(2)]),
        })
    );
}

#[test]
fn a_controller_that_reads_nothing_misses_packet_ins_but_keeps_its_connection() {
    let (agent, _, mut worker, _) = start_listening(Timers::default());
    let mut peer = Peer::hello(agent.local_addr().unwrap());
    assert_eq!(
        peer.ask(&Message::BarrierRequest),
        vec![Message::BarrierReply]
    );
    let frame = [0u8; 1500];
    let dropped = |agent: &Agent| agent.status().first().map_or(0, |s| s.counts.async_dropped);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while dropped(&agent) == 0 {
        assert!(std::time::Instant::now() < deadline, "nothing was dropped");
        if !packet_in::send(&mut worker, Origin::default(), 0, &frame, u16::MAX) {
            // The ring is full: the agent needs a turn to empty it.
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    // Still connected: everything queued before the echo's reply arrives, then the reply.
    let replies = peer.ask(&Message::EchoRequest(vec![5]));
    assert_eq!(replies.last(), Some(&Message::EchoReply(vec![5])));
    assert!(replies.len() > 1, "{}", replies.len());
    assert_eq!(agent.status().len(), 1);
}
