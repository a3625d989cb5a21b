//! OpenFlow 1.3 messages (§7.1, §7.3, §7.4, §7.5): the header, then one typed body per message
//! type, parsed once from a whole message's bytes and emitted back.
//!
//! [`Message::decode`] checks the header first (a version other than 0x04 on anything but
//! HELLO is BAD_REQUEST/BAD_VERSION, a length that disagrees with the bytes BAD_REQUEST/BAD_LEN,
//! an unknown type BAD_REQUEST/BAD_TYPE), then the body, whose defects answer the error of the
//! part that has them (BAD_MATCH, BAD_INSTRUCTION, BAD_ACTION, FLOW_MOD_FAILED, ...). The error
//! carries the message's xid so that the ERROR reply can name it.

use crate::OfError;
use crate::action::{
    Action, Instruction, emit_actions, emit_instructions, read_actions, read_instructions,
};
use crate::bundle::{
    BUNDLE_ADD_MESSAGE, BUNDLE_CONTROL, BundleAdd, BundleControl, ONF_EXPERIMENTER,
};
use crate::bytes::{Reader, Writer, len_since};
use crate::multipart::{MultipartReply, MultipartRequest};
use crate::oxm::Match;

/// The wire version of OpenFlow 1.3.
pub const VERSION: u8 = 0x04;
/// Bytes of `ofp_header`.
pub const HEADER_LEN: usize = 8;
/// `buffer_id` of a packet the switch did not buffer (OFP_NO_BUFFER).
pub const NO_BUFFER: u32 = 0xffff_ffff;
/// `table_id` meaning every table (OFPTT_ALL), in deletes and statistics requests.
pub const ALL_TABLES: u8 = 0xff;

/// The `ofp_header` of a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub version: u8,
    pub kind: u8,
    pub length: u16,
    pub xid: u32,
}

impl Header {
    /// The header at the front of `bytes`, once its eight bytes are there: how a stream is cut
    /// into messages (`length` bytes each, at least [`HEADER_LEN`]).
    pub fn peek(bytes: &[u8]) -> Option<Header> {
        let head = bytes.get(..HEADER_LEN)?;
        Some(Header {
            version: head[0],
            kind: head[1],
            length: u16::from_be_bytes([head[2], head[3]]),
            xid: u32::from_be_bytes([head[4], head[5], head[6], head[7]]),
        })
    }
}

/// Why a message was refused: the error to send back and the xid to send it with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecodeError {
    pub xid: u32,
    pub error: OfError,
}

/// FEATURES_REPLY's body (§7.3.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Features {
    pub datapath_id: u64,
    pub n_buffers: u32,
    pub n_tables: u8,
    pub auxiliary_id: u8,
    pub capabilities: u32,
}

/// GET_CONFIG_REPLY's and SET_CONFIG's body (§7.3.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SwitchConfig {
    pub flags: u16,
    pub miss_send_len: u16,
}

/// ROLE_REQUEST's and ROLE_REPLY's body (§7.3.9).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Role {
    pub role: u32,
    pub generation_id: u64,
}

/// GET_ASYNC_REPLY's and SET_ASYNC's body (§7.3.10): which asynchronous messages a connection
/// wants, as bit masks of their reasons (bit *n* for reason *n*); element 0 of each pair
/// applies while the connection is master or equal, element 1 while it is slave.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AsyncConfig {
    pub packet_in: [u32; 2],
    pub port_status: [u32; 2],
    pub flow_removed: [u32; 2],
}

impl Default for AsyncConfig {
    /// The configuration a connection starts with (§6.1.1): a master or equal gets every
    /// PACKET_IN (NO_MATCH, ACTION; INVALID_TTL is off by default), PORT_STATUS and
    /// FLOW_REMOVED; a slave only PORT_STATUS. These are Open vSwitch's defaults too.
    fn default() -> Self {
        AsyncConfig {
            packet_in: [0b011, 0],
            port_status: [0b111, 0b111],
            flow_removed: [0b1111, 0],
        }
    }
}

/// Controller roles (`ofp_controller_role`).
pub mod role {
    pub const NOCHANGE: u32 = 0;
    pub const EQUAL: u32 = 1;
    pub const MASTER: u32 = 2;
    pub const SLAVE: u32 = 3;
}

/// FLOW_MOD commands (`ofp_flow_mod_command`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlowModCommand {
    Add,
    Modify,
    ModifyStrict,
    Delete,
    DeleteStrict,
}

/// FLOW_MOD flags (`ofp_flow_mod_flags`).
pub mod flow_flags {
    pub const SEND_FLOW_REM: u16 = 1;
    pub const CHECK_OVERLAP: u16 = 2;
    pub const RESET_COUNTS: u16 = 4;
    pub const NO_PKT_COUNTS: u16 = 8;
    pub const NO_BYT_COUNTS: u16 = 16;
    pub const ALL: u16 = 31;
}

/// FLOW_MOD's body (§7.3.4.1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowMod {
    pub cookie: u64,
    pub cookie_mask: u64,
    pub table_id: u8,
    pub command: FlowModCommand,
    pub idle_timeout: u16,
    pub hard_timeout: u16,
    pub priority: u16,
    pub buffer_id: u32,
    pub out_port: u32,
    pub out_group: u32,
    pub flags: u16,
    pub matcher: Match,
    pub instructions: Vec<Instruction>,
}

/// A bucket of a group (§7.3.4.2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bucket {
    pub weight: u16,
    pub watch_port: u32,
    pub watch_group: u32,
    pub actions: Vec<Action>,
}

/// GROUP_MOD commands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupModCommand {
    Add,
    Modify,
    Delete,
}

/// Group types (`ofp_group_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupType {
    All,
    Select,
    Indirect,
    FastFailover,
}

impl GroupType {
    pub(crate) fn from_wire(value: u8) -> Result<GroupType, OfError> {
        Ok(match value {
            0 => GroupType::All,
            1 => GroupType::Select,
            2 => GroupType::Indirect,
            3 => GroupType::FastFailover,
            _ => return Err(OfError::GROUP_MOD_BAD_TYPE),
        })
    }

    pub(crate) fn to_wire(self) -> u8 {
        match self {
            GroupType::All => 0,
            GroupType::Select => 1,
            GroupType::Indirect => 2,
            GroupType::FastFailover => 3,
        }
    }
}

/// GROUP_MOD's body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupMod {
    pub command: GroupModCommand,
    pub group_type: GroupType,
    pub group_id: u32,
    pub buckets: Vec<Bucket>,
}

/// PACKET_IN's body (§7.4.1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PacketIn {
    pub buffer_id: u32,
    pub total_len: u16,
    /// 0 no matching flow (table miss), 1 output to the controller, 2 invalid TTL.
    pub reason: u8,
    pub table_id: u8,
    pub cookie: u64,
    pub matcher: Match,
    pub data: Vec<u8>,
}

/// PACKET_OUT's body (§7.3.7).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PacketOut {
    pub buffer_id: u32,
    pub in_port: u32,
    pub actions: Vec<Action>,
    pub data: Vec<u8>,
}

/// FLOW_REMOVED's body (§7.4.2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowRemoved {
    pub cookie: u64,
    pub priority: u16,
    /// 0 idle timeout, 1 hard timeout, 2 deleted, 3 group deleted.
    pub reason: u8,
    pub table_id: u8,
    pub duration_sec: u32,
    pub duration_nsec: u32,
    pub idle_timeout: u16,
    pub hard_timeout: u16,
    pub packet_count: u64,
    pub byte_count: u64,
    pub matcher: Match,
}

/// A port's description (`ofp_port`, §7.2.1).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PortDesc {
    pub port_no: u32,
    pub hw_addr: [u8; 6],
    pub name: String,
    pub config: u32,
    pub state: u32,
    pub curr: u32,
    pub advertised: u32,
    pub supported: u32,
    pub peer: u32,
    pub curr_speed: u32,
    pub max_speed: u32,
}

/// Bytes of `ofp_port`.
pub(crate) const PORT_DESC_LEN: usize = 64;

impl PortDesc {
    pub(crate) fn read(r: &mut Reader<'_>) -> Result<PortDesc, OfError> {
        let port_no = r.u32()?;
        r.skip(4)?;
        let hw_addr = r.array()?;
        r.skip(2)?;
        Ok(PortDesc {
            port_no,
            hw_addr,
            name: r.string(16)?,
            config: r.u32()?,
            state: r.u32()?,
            curr: r.u32()?,
            advertised: r.u32()?,
            supported: r.u32()?,
            peer: r.u32()?,
            curr_speed: r.u32()?,
            max_speed: r.u32()?,
        })
    }

    pub(crate) fn emit(&self, out: &mut Vec<u8>) {
        out.u32(self.port_no);
        out.zeros(4);
        out.extend_from_slice(&self.hw_addr);
        out.zeros(2);
        out.string(&self.name, 16);
        for value in [
            self.config,
            self.state,
            self.curr,
            self.advertised,
            self.supported,
            self.peer,
            self.curr_speed,
            self.max_speed,
        ] {
            out.u32(value);
        }
    }
}

/// A message body, by type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    /// The versions the sender speaks, when it sent a bitmap (bit *n* of word *n/32*).
    Hello {
        bitmap: Option<Vec<u32>>,
    },
    Error {
        error: OfError,
        data: Vec<u8>,
    },
    EchoRequest(Vec<u8>),
    EchoReply(Vec<u8>),
    FeaturesRequest,
    FeaturesReply(Features),
    GetConfigRequest,
    GetConfigReply(SwitchConfig),
    SetConfig(SwitchConfig),
    PacketIn(PacketIn),
    FlowRemoved(FlowRemoved),
    PortStatus {
        reason: u8,
        port: PortDesc,
    },
    PacketOut(PacketOut),
    FlowMod(FlowMod),
    GroupMod(GroupMod),
    MultipartRequest(MultipartRequest),
    MultipartReply(MultipartReply),
    BarrierRequest,
    BarrierReply,
    RoleRequest(Role),
    RoleReply(Role),
    GetAsyncRequest,
    GetAsyncReply(AsyncConfig),
    SetAsync(AsyncConfig),
    /// ONF extension 230's BUNDLE_CONTROL ([`crate::bundle`]).
    BundleControl(BundleControl),
    /// ONF extension 230's BUNDLE_ADD_MESSAGE ([`crate::bundle`]).
    BundleAdd(BundleAdd),
}

/// Message types (`ofp_type`).
mod kind {
    pub const HELLO: u8 = 0;
    pub const ERROR: u8 = 1;
    pub const ECHO_REQUEST: u8 = 2;
    pub const ECHO_REPLY: u8 = 3;
    pub const EXPERIMENTER: u8 = 4;
    pub const FEATURES_REQUEST: u8 = 5;
    pub const FEATURES_REPLY: u8 = 6;
    pub const GET_CONFIG_REQUEST: u8 = 7;
    pub const GET_CONFIG_REPLY: u8 = 8;
    pub const SET_CONFIG: u8 = 9;
    pub const PACKET_IN: u8 = 10;
    pub const FLOW_REMOVED: u8 = 11;
    pub const PORT_STATUS: u8 = 12;
    pub const PACKET_OUT: u8 = 13;
    pub const FLOW_MOD: u8 = 14;
    pub const GROUP_MOD: u8 = 15;
    pub const MULTIPART_REQUEST: u8 = 18;
    pub const MULTIPART_REPLY: u8 = 19;
    pub const BARRIER_REQUEST: u8 = 20;
    pub const BARRIER_REPLY: u8 = 21;
    pub const ROLE_REQUEST: u8 = 24;
    pub const ROLE_REPLY: u8 = 25;
    pub const GET_ASYNC_REQUEST: u8 = 26;
    pub const GET_ASYNC_REPLY: u8 = 27;
    pub const SET_ASYNC: u8 = 28;
}

const HELLO_ELEM_VERSIONBITMAP: u16 = 1;

impl Message {
    /// The message's `ofp_type`.
    pub fn kind(&self) -> u8 {
        match self {
            Message::Hello { .. } => kind::HELLO,
            Message::Error { .. } => kind::ERROR,
            Message::EchoRequest(_) => kind::ECHO_REQUEST,
            Message::EchoReply(_) => kind::ECHO_REPLY,
            Message::FeaturesRequest => kind::FEATURES_REQUEST,
            Message::FeaturesReply(_) => kind::FEATURES_REPLY,
            Message::GetConfigRequest => kind::GET_CONFIG_REQUEST,
            Message::GetConfigReply(_) => kind::GET_CONFIG_REPLY,
            Message::SetConfig(_) => kind::SET_CONFIG,
            Message::PacketIn(_) => kind::PACKET_IN,
            Message::FlowRemoved(_) => kind::FLOW_REMOVED,
            Message::PortStatus { .. } => kind::PORT_STATUS,
            Message::PacketOut(_) => kind::PACKET_OUT,
            Message::FlowMod(_) => kind::FLOW_MOD,
            Message::GroupMod(_) => kind::GROUP_MOD,
            Message::MultipartRequest(_) => kind::MULTIPART_REQUEST,
            Message::MultipartReply(_) => kind::MULTIPART_REPLY,
            Message::BarrierRequest => kind::BARRIER_REQUEST,
            Message::BarrierReply => kind::BARRIER_REPLY,
            Message::RoleRequest(_) => kind::ROLE_REQUEST,
            Message::RoleReply(_) => kind::ROLE_REPLY,
            Message::GetAsyncRequest => kind::GET_ASYNC_REQUEST,
            Message::GetAsyncReply(_) => kind::GET_ASYNC_REPLY,
            Message::SetAsync(_) => kind::SET_ASYNC,
            Message::BundleControl(_) | Message::BundleAdd(_) => kind::EXPERIMENTER,
        }
    }

    /// Parses one whole message (`bytes` is exactly its header's `length`).
    pub fn decode(bytes: &[u8]) -> Result<(Header, Message), DecodeError> {
        let Some(header) = Header::peek(bytes) else {
            return Err(DecodeError {
                xid: 0,
                error: OfError::BAD_REQUEST_LEN,
            });
        };
        let fail = |error| DecodeError {
            xid: header.xid,
            error,
        };
        if usize::from(header.length) != bytes.len() {
            return Err(fail(OfError::BAD_REQUEST_LEN));
        }
        if header.version != VERSION && header.kind != kind::HELLO {
            return Err(fail(OfError::BAD_REQUEST_VERSION));
        }
        let mut r = Reader::new(&bytes[HEADER_LEN..], OfError::BAD_REQUEST_LEN);
        let message = Self::body(header.kind, &mut r).map_err(fail)?;
        Ok((header, message))
    }

    fn body(kind: u8, r: &mut Reader<'_>) -> Result<Message, OfError> {
        let empty = |r: &Reader<'_>, message| {
            if r.is_empty() {
                Ok(message)
            } else {
                Err(OfError::BAD_REQUEST_LEN)
            }
        };
        let message = match kind {
            kind::HELLO => Message::Hello {
                bitmap: read_hello(r)?,
            },
            kind::ERROR => {
                let error = OfError {
                    kind: r.u16()?,
                    code: r.u16()?,
                };
                if error.kind == OfError::EXPERIMENTER {
                    r.skip(4)?;
                }
                Message::Error {
                    error,
                    data: r.rest().to_vec(),
                }
            }
            kind::ECHO_REQUEST => Message::EchoRequest(r.rest().to_vec()),
            kind::ECHO_REPLY => Message::EchoReply(r.rest().to_vec()),
            kind::FEATURES_REQUEST => return empty(r, Message::FeaturesRequest),
            kind::FEATURES_REPLY => {
                let datapath_id = r.u64()?;
                let n_buffers = r.u32()?;
                let n_tables = r.u8()?;
                let auxiliary_id = r.u8()?;
                r.skip(2)?;
                let capabilities = r.u32()?;
                r.skip(4)?;
                Message::FeaturesReply(Features {
                    datapath_id,
                    n_buffers,
                    n_tables,
                    auxiliary_id,
                    capabilities,
                })
            }
            kind::GET_CONFIG_REQUEST => return empty(r, Message::GetConfigRequest),
            kind::GET_CONFIG_REPLY | kind::SET_CONFIG => {
                let config = SwitchConfig {
                    flags: r.u16()?,
                    miss_send_len: r.u16()?,
                };
                if kind == kind::SET_CONFIG {
                    if !r.is_empty() {
                        return Err(OfError::SWITCH_CONFIG_BAD_LEN);
                    }
                    if config.flags > 3 {
                        return Err(OfError::SWITCH_CONFIG_BAD_FLAGS);
                    }
                    Message::SetConfig(config)
                } else {
                    Message::GetConfigReply(config)
                }
            }
            kind::PACKET_IN => {
                let buffer_id = r.u32()?;
                let total_len = r.u16()?;
                let reason = r.u8()?;
                let table_id = r.u8()?;
                let cookie = r.u64()?;
                let matcher = Match::read(r)?;
                r.skip(2)?;
                Message::PacketIn(PacketIn {
                    buffer_id,
                    total_len,
                    reason,
                    table_id,
                    cookie,
                    matcher,
                    data: r.rest().to_vec(),
                })
            }
            kind::FLOW_REMOVED => Message::FlowRemoved(FlowRemoved {
                cookie: r.u64()?,
                priority: r.u16()?,
                reason: r.u8()?,
                table_id: r.u8()?,
                duration_sec: r.u32()?,
                duration_nsec: r.u32()?,
                idle_timeout: r.u16()?,
                hard_timeout: r.u16()?,
                packet_count: r.u64()?,
                byte_count: r.u64()?,
                matcher: Match::read(r)?,
            }),
            kind::PORT_STATUS => {
                let reason = r.u8()?;
                r.skip(7)?;
                let port = PortDesc::read(r)?;
                Message::PortStatus { reason, port }
            }
            kind::PACKET_OUT => {
                let buffer_id = r.u32()?;
                let in_port = r.u32()?;
                let actions_len = usize::from(r.u16()?);
                r.skip(6)?;
                let mut list = r.sub(actions_len, OfError::BAD_ACTION_LEN)?;
                let actions = read_actions(&mut list)?;
                Message::PacketOut(PacketOut {
                    buffer_id,
                    in_port,
                    actions,
                    data: r.rest().to_vec(),
                })
            }
            kind::FLOW_MOD => Message::FlowMod(read_flow_mod(r)?),
            kind::GROUP_MOD => Message::GroupMod(read_group_mod(r)?),
            kind::MULTIPART_REQUEST => Message::MultipartRequest(MultipartRequest::read(r)?),
            kind::MULTIPART_REPLY => Message::MultipartReply(MultipartReply::read(r)?),
            kind::BARRIER_REQUEST => return empty(r, Message::BarrierRequest),
            kind::BARRIER_REPLY => return empty(r, Message::BarrierReply),
            kind::ROLE_REQUEST | kind::ROLE_REPLY => {
                let role = r.u32()?;
                r.skip(4)?;
                let role = Role {
                    role,
                    generation_id: r.u64()?,
                };
                if role.role > role::SLAVE {
                    return Err(OfError::ROLE_BAD_ROLE);
                }
                if kind == kind::ROLE_REQUEST {
                    Message::RoleRequest(role)
                } else {
                    Message::RoleReply(role)
                }
            }
            kind::GET_ASYNC_REQUEST => return empty(r, Message::GetAsyncRequest),
            kind::GET_ASYNC_REPLY | kind::SET_ASYNC => {
                let mut pair = || -> Result<[u32; 2], OfError> { Ok([r.u32()?, r.u32()?]) };
                let config = AsyncConfig {
                    packet_in: pair()?,
                    port_status: pair()?,
                    flow_removed: pair()?,
                };
                if kind == kind::SET_ASYNC {
                    Message::SetAsync(config)
                } else {
                    Message::GetAsyncReply(config)
                }
            }
            kind::EXPERIMENTER => {
                if r.u32()? != ONF_EXPERIMENTER {
                    return Err(OfError::BAD_REQUEST_EXPERIMENTER);
                }
                match r.u32()? {
                    BUNDLE_CONTROL => Message::BundleControl(BundleControl::read(r)?),
                    BUNDLE_ADD_MESSAGE => Message::BundleAdd(BundleAdd::read(r)?),
                    _ => return Err(OfError::BAD_REQUEST_EXP_TYPE),
                }
            }
            _ => return Err(OfError::BAD_REQUEST_TYPE),
        };
        if r.is_empty() {
            Ok(message)
        } else {
            Err(OfError::BAD_REQUEST_LEN)
        }
    }

    /// The whole message with header `xid`, or `None` when it would not fit in the 16-bit
    /// length (a multipart reply that large must be split by the sender first).
    pub fn encode(&self, xid: u32) -> Option<Vec<u8>> {
        let mut out = Vec::with_capacity(64);
        out.u8(VERSION);
        out.u8(self.kind());
        out.u16(0);
        out.u32(xid);
        self.emit_body(&mut out);
        let len = u16::try_from(out.len()).ok()?;
        out.patch_u16(2, len);
        Some(out)
    }

    fn emit_body(&self, out: &mut Vec<u8>) {
        match self {
            Message::Hello { bitmap } => {
                if let Some(bitmap) = bitmap {
                    let start = out.len();
                    out.u16(HELLO_ELEM_VERSIONBITMAP);
                    out.u16((4 + 4 * bitmap.len()) as u16);
                    for word in bitmap {
                        out.u32(*word);
                    }
                    out.pad8(start);
                }
            }
            Message::Error { error, data } => {
                out.u16(error.kind);
                out.u16(error.code);
                if error.kind == OfError::EXPERIMENTER {
                    out.u32(ONF_EXPERIMENTER);
                }
                out.extend_from_slice(data);
            }
            Message::BundleControl(control) => {
                out.u32(ONF_EXPERIMENTER);
                out.u32(BUNDLE_CONTROL);
                control.emit(out);
            }
            Message::BundleAdd(add) => {
                out.u32(ONF_EXPERIMENTER);
                out.u32(BUNDLE_ADD_MESSAGE);
                add.emit(out);
            }
            Message::EchoRequest(data) | Message::EchoReply(data) => out.extend_from_slice(data),
            Message::FeaturesRequest
            | Message::GetConfigRequest
            | Message::BarrierRequest
            | Message::BarrierReply
            | Message::GetAsyncRequest => {}
            Message::FeaturesReply(f) => {
                out.u64(f.datapath_id);
                out.u32(f.n_buffers);
                out.u8(f.n_tables);
                out.u8(f.auxiliary_id);
                out.zeros(2);
                out.u32(f.capabilities);
                out.zeros(4);
            }
            Message::GetConfigReply(c) | Message::SetConfig(c) => {
                out.u16(c.flags);
                out.u16(c.miss_send_len);
            }
            Message::PacketIn(p) => {
                out.u32(p.buffer_id);
                out.u16(p.total_len);
                out.u8(p.reason);
                out.u8(p.table_id);
                out.u64(p.cookie);
                p.matcher.emit(out);
                out.zeros(2);
                out.extend_from_slice(&p.data);
            }
            Message::FlowRemoved(f) => {
                out.u64(f.cookie);
                out.u16(f.priority);
                out.u8(f.reason);
                out.u8(f.table_id);
                out.u32(f.duration_sec);
                out.u32(f.duration_nsec);
                out.u16(f.idle_timeout);
                out.u16(f.hard_timeout);
                out.u64(f.packet_count);
                out.u64(f.byte_count);
                f.matcher.emit(out);
            }
            Message::PortStatus { reason, port } => {
                out.u8(*reason);
                out.zeros(7);
                port.emit(out);
            }
            Message::PacketOut(p) => {
                out.u32(p.buffer_id);
                out.u32(p.in_port);
                let at = out.len();
                out.u16(0);
                out.zeros(6);
                let start = out.len();
                emit_actions(&p.actions, out);
                let len = len_since(out, start);
                out.patch_u16(at, len);
                out.extend_from_slice(&p.data);
            }
            Message::FlowMod(f) => emit_flow_mod(f, out),
            Message::GroupMod(g) => {
                out.u16(match g.command {
                    GroupModCommand::Add => 0,
                    GroupModCommand::Modify => 1,
                    GroupModCommand::Delete => 2,
                });
                out.u8(g.group_type.to_wire());
                out.u8(0);
                out.u32(g.group_id);
                emit_buckets(&g.buckets, out);
            }
            Message::MultipartRequest(m) => m.emit(out),
            Message::MultipartReply(m) => m.emit(out),
            Message::RoleRequest(r) | Message::RoleReply(r) => {
                out.u32(r.role);
                out.zeros(4);
                out.u64(r.generation_id);
            }
            Message::GetAsyncReply(c) | Message::SetAsync(c) => {
                for value in [c.packet_in, c.port_status, c.flow_removed].concat() {
                    out.u32(value);
                }
            }
        }
    }
}

/// HELLO's elements: the version bitmap if there is one; other element types are skipped
/// (§7.5.1: a switch must ignore those it does not know).
fn read_hello(r: &mut Reader<'_>) -> Result<Option<Vec<u32>>, OfError> {
    let mut bitmap = None;
    while r.remaining() >= 4 {
        let kind = r.u16()?;
        let len = usize::from(r.u16()?);
        if len < 4 {
            return Err(OfError::BAD_REQUEST_LEN);
        }
        let mut body = r.sub(len - 4, OfError::BAD_REQUEST_LEN)?;
        r.skip((len.next_multiple_of(8) - len).min(r.remaining()))?;
        if kind == HELLO_ELEM_VERSIONBITMAP {
            let mut words = Vec::new();
            while body.remaining() >= 4 {
                words.push(body.u32()?);
            }
            bitmap = Some(words);
        }
    }
    // A peer may pad its last element short of 8; what is left is no element.
    r.rest();
    Ok(bitmap)
}

fn read_flow_mod(r: &mut Reader<'_>) -> Result<FlowMod, OfError> {
    let cookie = r.u64()?;
    let cookie_mask = r.u64()?;
    let table_id = r.u8()?;
    let command = match r.u8()? {
        0 => FlowModCommand::Add,
        1 => FlowModCommand::Modify,
        2 => FlowModCommand::ModifyStrict,
        3 => FlowModCommand::Delete,
        4 => FlowModCommand::DeleteStrict,
        _ => return Err(OfError::FLOW_MOD_BAD_COMMAND),
    };
    let idle_timeout = r.u16()?;
    let hard_timeout = r.u16()?;
    let priority = r.u16()?;
    let buffer_id = r.u32()?;
    let out_port = r.u32()?;
    let out_group = r.u32()?;
    let flags = r.u16()?;
    r.skip(2)?;
    if flags & !flow_flags::ALL != 0 {
        return Err(OfError::FLOW_MOD_BAD_FLAGS);
    }
    let deletes = matches!(
        command,
        FlowModCommand::Delete | FlowModCommand::DeleteStrict
    );
    if table_id == ALL_TABLES && !deletes {
        return Err(OfError::FLOW_MOD_BAD_TABLE_ID);
    }
    let matcher = Match::read(r)?;
    let mut rest = Reader::new(r.rest(), OfError::BAD_INSTRUCTION_LEN);
    let instructions = read_instructions(&mut rest)?;
    Ok(FlowMod {
        cookie,
        cookie_mask,
        table_id,
        command,
        idle_timeout,
        hard_timeout,
        priority,
        buffer_id,
        out_port,
        out_group,
        flags,
        matcher,
        instructions,
    })
}

fn emit_flow_mod(f: &FlowMod, out: &mut Vec<u8>) {
    out.u64(f.cookie);
    out.u64(f.cookie_mask);
    out.u8(f.table_id);
    out.u8(match f.command {
        FlowModCommand::Add => 0,
        FlowModCommand::Modify => 1,
        FlowModCommand::ModifyStrict => 2,
        FlowModCommand::Delete => 3,
        FlowModCommand::DeleteStrict => 4,
    });
    out.u16(f.idle_timeout);
    out.u16(f.hard_timeout);
    out.u16(f.priority);
    out.u32(f.buffer_id);
    out.u32(f.out_port);
    out.u32(f.out_group);
    out.u16(f.flags);
    out.zeros(2);
    f.matcher.emit(out);
    emit_instructions(&f.instructions, out);
}

fn read_group_mod(r: &mut Reader<'_>) -> Result<GroupMod, OfError> {
    let command = match r.u16()? {
        0 => GroupModCommand::Add,
        1 => GroupModCommand::Modify,
        2 => GroupModCommand::Delete,
        _ => return Err(OfError::GROUP_MOD_BAD_COMMAND),
    };
    let group_type = GroupType::from_wire(r.u8()?)?;
    r.skip(1)?;
    let group_id = r.u32()?;
    let mut rest = Reader::new(r.rest(), OfError::GROUP_MOD_BAD_BUCKET);
    Ok(GroupMod {
        command,
        group_type,
        group_id,
        buckets: read_buckets(&mut rest)?,
    })
}

/// Reads `ofp_bucket`s until `r` is empty; a bucket shorter than its header or not a multiple
/// of 8 is GROUP_MOD_FAILED/BAD_BUCKET.
pub(crate) fn read_buckets(r: &mut Reader<'_>) -> Result<Vec<Bucket>, OfError> {
    let mut buckets = Vec::new();
    while !r.is_empty() {
        let len = usize::from(r.u16()?);
        if len < 16 || len % 8 != 0 {
            return Err(OfError::GROUP_MOD_BAD_BUCKET);
        }
        let mut body = r.sub(len - 2, OfError::GROUP_MOD_BAD_BUCKET)?;
        let weight = body.u16()?;
        let watch_port = body.u32()?;
        let watch_group = body.u32()?;
        body.skip(4)?;
        let mut list = Reader::new(body.rest(), OfError::BAD_ACTION_LEN);
        buckets.push(Bucket {
            weight,
            watch_port,
            watch_group,
            actions: read_actions(&mut list)?,
        });
    }
    Ok(buckets)
}

pub(crate) fn emit_buckets(buckets: &[Bucket], out: &mut Vec<u8>) {
    for bucket in buckets {
        let start = out.len();
        out.u16(0);
        out.u16(bucket.weight);
        out.u32(bucket.watch_port);
        out.u32(bucket.watch_group);
        out.zeros(4);
        emit_actions(&bucket.actions, out);
        let len = len_since(out, start);
        out.patch_u16(start, len);
    }
}
