//! MULTIPART_REQUEST and MULTIPART_REPLY (OpenFlow 1.3.5 §7.3.5): statistics and descriptions,
//! one body type per multipart type.
//!
//! A request type we do not serve is BAD_REQUEST/BAD_MULTIPART; a request whose body has the
//! wrong size for its type is BAD_REQUEST/BAD_LEN. Replies carry lists; splitting a long list
//! over several replies (flag REPLY_MORE) is the sender's business ([`MORE`]).

use crate::OfError;
use crate::action::{Instruction, emit_instructions, read_instructions};
use crate::bytes::{Reader, Writer, len_since};
use crate::message::{Bucket, GroupType, PORT_DESC_LEN, PortDesc, emit_buckets, read_buckets};
use crate::oxm::Match;

/// Flag of a request or reply that more parts follow (OFPMPF_REQ_MORE / OFPMPF_REPLY_MORE).
pub const MORE: u16 = 1;

const DESC: u16 = 0;
const FLOW: u16 = 1;
const AGGREGATE: u16 = 2;
const TABLE: u16 = 3;
const PORT_STATS: u16 = 4;
const GROUP: u16 = 6;
const GROUP_DESC: u16 = 7;
const GROUP_FEATURES: u16 = 8;
const TABLE_FEATURES: u16 = 12;
const PORT_DESC: u16 = 13;

/// The selection of a FLOW or AGGREGATE request (`ofp_flow_stats_request`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowStatsRequest {
    pub table_id: u8,
    pub out_port: u32,
    pub out_group: u32,
    pub cookie: u64,
    pub cookie_mask: u64,
    pub matcher: Match,
}

/// A request's body, by multipart type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RequestBody {
    Desc,
    Flow(FlowStatsRequest),
    Aggregate(FlowStatsRequest),
    Table,
    /// A port number or `port::ANY`.
    PortStats(u32),
    /// A group number or `group::ALL`.
    Group(u32),
    GroupDesc,
    GroupFeatures,
    /// Empty: "what are your tables' features"; otherwise a request to change them.
    TableFeatures(Vec<TableFeatures>),
    PortDesc,
}

/// MULTIPART_REQUEST.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MultipartRequest {
    pub flags: u16,
    pub body: RequestBody,
}

/// DESC reply (`ofp_desc`): NUL-padded strings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Desc {
    pub manufacturer: String,
    pub hardware: String,
    pub software: String,
    pub serial: String,
    pub datapath: String,
}

/// One flow entry of a FLOW reply (`ofp_flow_stats`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowStats {
    pub table_id: u8,
    pub duration_sec: u32,
    pub duration_nsec: u32,
    pub priority: u16,
    pub idle_timeout: u16,
    pub hard_timeout: u16,
    pub flags: u16,
    pub cookie: u64,
    pub packet_count: u64,
    pub byte_count: u64,
    pub matcher: Match,
    pub instructions: Vec<Instruction>,
}

/// One table of a TABLE reply (`ofp_table_stats`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableStats {
    pub table_id: u8,
    pub active_count: u32,
    pub lookup_count: u64,
    pub matched_count: u64,
}

/// One port of a PORT_STATS reply (`ofp_port_stats`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortStats {
    pub port_no: u32,
    pub rx_packets: u64,
    pub tx_packets: u64,
    pub rx_bytes: u64,
    pub tx_bytes: u64,
    pub rx_dropped: u64,
    pub tx_dropped: u64,
    pub rx_errors: u64,
    pub tx_errors: u64,
    pub rx_frame_err: u64,
    pub rx_over_err: u64,
    pub rx_crc_err: u64,
    pub collisions: u64,
    pub duration_sec: u32,
    pub duration_nsec: u32,
}

/// One group of a GROUP reply (`ofp_group_stats`): counts per bucket as (packets, bytes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupStats {
    pub group_id: u32,
    pub ref_count: u32,
    pub packet_count: u64,
    pub byte_count: u64,
    pub duration_sec: u32,
    pub duration_nsec: u32,
    pub buckets: Vec<(u64, u64)>,
}

/// One group of a GROUP_DESC reply (`ofp_group_desc`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupDesc {
    pub group_type: GroupType,
    pub group_id: u32,
    pub buckets: Vec<Bucket>,
}

/// A GROUP_FEATURES reply (`ofp_group_features`): bitmaps of the group types (bit 0 all, 1
/// select, 2 indirect, 3 fast failover) and capabilities, and per type (in that order) the
/// most groups and a bitmap of the actions (bit N: action type N).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupFeatures {
    pub types: u32,
    pub capabilities: u32,
    pub max_groups: [u32; 4],
    pub actions: [u32; 4],
}

/// Capability bits of [`GroupFeatures::capabilities`] (`ofp_group_capabilities`).
pub mod group_capability {
    pub const SELECT_WEIGHT: u32 = 1 << 0;
    pub const SELECT_LIVENESS: u32 = 1 << 1;
    pub const CHAINING: u32 = 1 << 2;
    pub const CHAINING_CHECKS: u32 = 1 << 3;
}

/// A table feature property (`ofp_table_feature_prop_*`) as its type and its content
/// (without header or padding); [`TableFeatureProperty`]'s constructors build the common ones.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableFeatureProperty {
    pub kind: u16,
    pub data: Vec<u8>,
}

/// Property types (`ofp_table_feature_prop_type`).
pub mod property {
    pub const INSTRUCTIONS: u16 = 0;
    pub const INSTRUCTIONS_MISS: u16 = 1;
    pub const NEXT_TABLES: u16 = 2;
    pub const NEXT_TABLES_MISS: u16 = 3;
    pub const WRITE_ACTIONS: u16 = 4;
    pub const WRITE_ACTIONS_MISS: u16 = 5;
    pub const APPLY_ACTIONS: u16 = 6;
    pub const APPLY_ACTIONS_MISS: u16 = 7;
    pub const MATCH: u16 = 8;
    pub const WILDCARDS: u16 = 10;
    pub const WRITE_SETFIELD: u16 = 12;
    pub const WRITE_SETFIELD_MISS: u16 = 13;
    pub const APPLY_SETFIELD: u16 = 14;
    pub const APPLY_SETFIELD_MISS: u16 = 15;
}

impl TableFeatureProperty {
    /// A list of instruction or action types (INSTRUCTIONS*, *_ACTIONS*): each a 4-byte
    /// header with length 4.
    pub fn types(kind: u16, types: &[u16]) -> Self {
        let mut data = Vec::new();
        for &t in types {
            data.u16(t);
            data.u16(4);
        }
        TableFeatureProperty { kind, data }
    }

    /// NEXT_TABLES(_MISS): table ids.
    pub fn next_tables(kind: u16, tables: &[u8]) -> Self {
        TableFeatureProperty {
            kind,
            data: tables.to_vec(),
        }
    }

    /// MATCH, WILDCARDS, *_SETFIELD*: OXM headers of the basic class (field number, whether
    /// masked, payload length).
    pub fn fields(kind: u16, fields: &[(u8, bool, u8)]) -> Self {
        let mut data = Vec::new();
        for &(field, masked, len) in fields {
            data.u16(0x8000);
            data.u8(field << 1 | u8::from(masked));
            data.u8(len);
        }
        TableFeatureProperty { kind, data }
    }
}

/// One table's features (`ofp_table_features`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableFeatures {
    pub table_id: u8,
    pub name: String,
    pub metadata_match: u64,
    pub metadata_write: u64,
    pub config: u32,
    pub max_entries: u32,
    pub properties: Vec<TableFeatureProperty>,
}

impl TableFeatures {
    fn read(r: &mut Reader<'_>) -> Result<TableFeatures, OfError> {
        let len = usize::from(r.u16()?);
        if len < 64 || len % 8 != 0 {
            return Err(OfError::BAD_REQUEST_LEN);
        }
        let mut body = r.sub(len - 2, OfError::BAD_REQUEST_LEN)?;
        let table_id = body.u8()?;
        body.skip(5)?;
        let name = body.string(32)?;
        let metadata_match = body.u64()?;
        let metadata_write = body.u64()?;
        let config = body.u32()?;
        let max_entries = body.u32()?;
        let mut properties = Vec::new();
        while !body.is_empty() {
            let kind = body.u16()?;
            let len = usize::from(body.u16()?);
            if len < 4 {
                return Err(OfError::BAD_REQUEST_LEN);
            }
            let data = body.take(len - 4)?.to_vec();
            body.skip(len.next_multiple_of(8) - len)?;
            properties.push(TableFeatureProperty { kind, data });
        }
        Ok(TableFeatures {
            table_id,
            name,
            metadata_match,
            metadata_write,
            config,
            max_entries,
            properties,
        })
    }

    fn emit(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.u16(0);
        out.u8(self.table_id);
        out.zeros(5);
        out.string(&self.name, 32);
        out.u64(self.metadata_match);
        out.u64(self.metadata_write);
        out.u32(self.config);
        out.u32(self.max_entries);
        for property in &self.properties {
            let at = out.len();
            out.u16(property.kind);
            out.u16((4 + property.data.len()) as u16);
            out.extend_from_slice(&property.data);
            out.pad8(at);
        }
        let len = len_since(out, start);
        out.patch_u16(start, len);
    }
}

/// A reply's body, by multipart type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReplyBody {
    Desc(Desc),
    Flow(Vec<FlowStats>),
    Aggregate {
        packet_count: u64,
        byte_count: u64,
        flow_count: u32,
    },
    Table(Vec<TableStats>),
    PortStats(Vec<PortStats>),
    Group(Vec<GroupStats>),
    GroupDesc(Vec<GroupDesc>),
    GroupFeatures(GroupFeatures),
    TableFeatures(Vec<TableFeatures>),
    PortDesc(Vec<PortDesc>),
}

/// MULTIPART_REPLY.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MultipartReply {
    pub flags: u16,
    pub body: ReplyBody,
}

fn read_flow_request(r: &mut Reader<'_>) -> Result<FlowStatsRequest, OfError> {
    let table_id = r.u8()?;
    r.skip(3)?;
    let out_port = r.u32()?;
    let out_group = r.u32()?;
    r.skip(4)?;
    Ok(FlowStatsRequest {
        table_id,
        out_port,
        out_group,
        cookie: r.u64()?,
        cookie_mask: r.u64()?,
        matcher: Match::read(r)?,
    })
}

fn emit_flow_request(f: &FlowStatsRequest, out: &mut Vec<u8>) {
    out.u8(f.table_id);
    out.zeros(3);
    out.u32(f.out_port);
    out.u32(f.out_group);
    out.zeros(4);
    out.u64(f.cookie);
    out.u64(f.cookie_mask);
    f.matcher.emit(out);
}

/// Reads items until `r` is empty.
fn read_list<T>(
    r: &mut Reader<'_>,
    mut item: impl FnMut(&mut Reader<'_>) -> Result<T, OfError>,
) -> Result<Vec<T>, OfError> {
    let mut items = Vec::new();
    while !r.is_empty() {
        items.push(item(r)?);
    }
    Ok(items)
}

impl MultipartRequest {
    pub(crate) fn read(r: &mut Reader<'_>) -> Result<MultipartRequest, OfError> {
        let kind = r.u16()?;
        let flags = r.u16()?;
        r.skip(4)?;
        let nothing = |r: &mut Reader<'_>, body| {
            if r.is_empty() {
                Ok(body)
            } else {
                Err(OfError::BAD_REQUEST_LEN)
            }
        };
        let body = match kind {
            DESC => nothing(r, RequestBody::Desc)?,
            FLOW => RequestBody::Flow(read_flow_request(r)?),
            AGGREGATE => RequestBody::Aggregate(read_flow_request(r)?),
            TABLE => nothing(r, RequestBody::Table)?,
            PORT_STATS | GROUP => {
                let id = r.u32()?;
                r.skip(4)?;
                if kind == PORT_STATS {
                    RequestBody::PortStats(id)
                } else {
                    RequestBody::Group(id)
                }
            }
            GROUP_DESC => nothing(r, RequestBody::GroupDesc)?,
            GROUP_FEATURES => nothing(r, RequestBody::GroupFeatures)?,
            TABLE_FEATURES => RequestBody::TableFeatures(read_list(r, TableFeatures::read)?),
            PORT_DESC => nothing(r, RequestBody::PortDesc)?,
            _ => return Err(OfError::BAD_REQUEST_MULTIPART),
        };
        Ok(MultipartRequest { flags, body })
    }

    pub(crate) fn emit(&self, out: &mut Vec<u8>) {
        let kind = match &self.body {
            RequestBody::Desc => DESC,
            RequestBody::Flow(_) => FLOW,
            RequestBody::Aggregate(_) => AGGREGATE,
            RequestBody::Table => TABLE,
            RequestBody::PortStats(_) => PORT_STATS,
            RequestBody::Group(_) => GROUP,
            RequestBody::GroupDesc => GROUP_DESC,
            RequestBody::GroupFeatures => GROUP_FEATURES,
            RequestBody::TableFeatures(_) => TABLE_FEATURES,
            RequestBody::PortDesc => PORT_DESC,
        };
        out.u16(kind);
        out.u16(self.flags);
        out.zeros(4);
        match &self.body {
            RequestBody::Desc
            | RequestBody::Table
            | RequestBody::GroupDesc
            | RequestBody::GroupFeatures
            | RequestBody::PortDesc => {}
            RequestBody::Flow(f) | RequestBody::Aggregate(f) => emit_flow_request(f, out),
            RequestBody::PortStats(id) | RequestBody::Group(id) => {
                out.u32(*id);
                out.zeros(4);
            }
            RequestBody::TableFeatures(tables) => {
                for table in tables {
                    table.emit(out);
                }
            }
        }
    }
}

fn read_flow_stats(r: &mut Reader<'_>) -> Result<FlowStats, OfError> {
    let len = usize::from(r.u16()?);
    if len < 56 {
        return Err(OfError::BAD_REQUEST_LEN);
    }
    let mut b = r.sub(len - 2, OfError::BAD_REQUEST_LEN)?;
    let table_id = b.u8()?;
    b.skip(1)?;
    let duration_sec = b.u32()?;
    let duration_nsec = b.u32()?;
    let priority = b.u16()?;
    let idle_timeout = b.u16()?;
    let hard_timeout = b.u16()?;
    let flags = b.u16()?;
    b.skip(4)?;
    let cookie = b.u64()?;
    let packet_count = b.u64()?;
    let byte_count = b.u64()?;
    let matcher = Match::read(&mut b)?;
    let mut rest = Reader::new(b.rest(), OfError::BAD_INSTRUCTION_LEN);
    Ok(FlowStats {
        table_id,
        duration_sec,
        duration_nsec,
        priority,
        idle_timeout,
        hard_timeout,
        flags,
        cookie,
        packet_count,
        byte_count,
        matcher,
        instructions: read_instructions(&mut rest)?,
    })
}

fn emit_flow_stats(f: &FlowStats, out: &mut Vec<u8>) {
    let start = out.len();
    out.u16(0);
    out.u8(f.table_id);
    out.u8(0);
    out.u32(f.duration_sec);
    out.u32(f.duration_nsec);
    out.u16(f.priority);
    out.u16(f.idle_timeout);
    out.u16(f.hard_timeout);
    out.u16(f.flags);
    out.zeros(4);
    out.u64(f.cookie);
    out.u64(f.packet_count);
    out.u64(f.byte_count);
    f.matcher.emit(out);
    emit_instructions(&f.instructions, out);
    let len = len_since(out, start);
    out.patch_u16(start, len);
}

fn read_port_stats(r: &mut Reader<'_>) -> Result<PortStats, OfError> {
    let port_no = r.u32()?;
    r.skip(4)?;
    let mut counts = [0u64; 12];
    for count in &mut counts {
        *count = r.u64()?;
    }
    let [
        rx_packets,
        tx_packets,
        rx_bytes,
        tx_bytes,
        rx_dropped,
        tx_dropped,
        rx_errors,
        tx_errors,
        rx_frame_err,
        rx_over_err,
        rx_crc_err,
        collisions,
    ] = counts;
    Ok(PortStats {
        port_no,
        rx_packets,
        tx_packets,
        rx_bytes,
        tx_bytes,
        rx_dropped,
        tx_dropped,
        rx_errors,
        tx_errors,
        rx_frame_err,
        rx_over_err,
        rx_crc_err,
        collisions,
        duration_sec: r.u32()?,
        duration_nsec: r.u32()?,
    })
}

fn emit_port_stats(p: &PortStats, out: &mut Vec<u8>) {
    out.u32(p.port_no);
    out.zeros(4);
    for count in [
        p.rx_packets,
        p.tx_packets,
        p.rx_bytes,
        p.tx_bytes,
        p.rx_dropped,
        p.tx_dropped,
        p.rx_errors,
        p.tx_errors,
        p.rx_frame_err,
        p.rx_over_err,
        p.rx_crc_err,
        p.collisions,
    ] {
        out.u64(count);
    }
    out.u32(p.duration_sec);
    out.u32(p.duration_nsec);
}

fn read_group_stats(r: &mut Reader<'_>) -> Result<GroupStats, OfError> {
    let len = usize::from(r.u16()?);
    if len < 40 || (len - 40) % 16 != 0 {
        return Err(OfError::BAD_REQUEST_LEN);
    }
    let mut b = r.sub(len - 2, OfError::BAD_REQUEST_LEN)?;
    b.skip(2)?;
    let group_id = b.u32()?;
    let ref_count = b.u32()?;
    b.skip(4)?;
    let packet_count = b.u64()?;
    let byte_count = b.u64()?;
    let duration_sec = b.u32()?;
    let duration_nsec = b.u32()?;
    let buckets = read_list(&mut b, |b| Ok((b.u64()?, b.u64()?)))?;
    Ok(GroupStats {
        group_id,
        ref_count,
        packet_count,
        byte_count,
        duration_sec,
        duration_nsec,
        buckets,
    })
}

fn emit_group_stats(g: &GroupStats, out: &mut Vec<u8>) {
    let start = out.len();
    out.u16(0);
    out.zeros(2);
    out.u32(g.group_id);
    out.u32(g.ref_count);
    out.zeros(4);
    out.u64(g.packet_count);
    out.u64(g.byte_count);
    out.u32(g.duration_sec);
    out.u32(g.duration_nsec);
    for &(packets, bytes) in &g.buckets {
        out.u64(packets);
        out.u64(bytes);
    }
    let len = len_since(out, start);
    out.patch_u16(start, len);
}

fn read_group_desc(r: &mut Reader<'_>) -> Result<GroupDesc, OfError> {
    let len = usize::from(r.u16()?);
    if len < 8 {
        return Err(OfError::BAD_REQUEST_LEN);
    }
    let mut b = r.sub(len - 2, OfError::BAD_REQUEST_LEN)?;
    let group_type = GroupType::from_wire(b.u8()?)?;
    b.skip(1)?;
    let group_id = b.u32()?;
    Ok(GroupDesc {
        group_type,
        group_id,
        buckets: read_buckets(&mut b)?,
    })
}

impl MultipartReply {
    pub(crate) fn read(r: &mut Reader<'_>) -> Result<MultipartReply, OfError> {
        let kind = r.u16()?;
        let flags = r.u16()?;
        r.skip(4)?;
        let body = match kind {
            DESC => ReplyBody::Desc(Desc {
                manufacturer: r.string(256)?,
                hardware: r.string(256)?,
                software: r.string(256)?,
                serial: r.string(32)?,
                datapath: r.string(256)?,
            }),
            FLOW => ReplyBody::Flow(read_list(r, read_flow_stats)?),
            AGGREGATE => {
                let packet_count = r.u64()?;
                let byte_count = r.u64()?;
                let flow_count = r.u32()?;
                r.skip(4)?;
                ReplyBody::Aggregate {
                    packet_count,
                    byte_count,
                    flow_count,
                }
            }
            TABLE => ReplyBody::Table(read_list(r, |r| {
                let table_id = r.u8()?;
                r.skip(3)?;
                Ok(TableStats {
                    table_id,
                    active_count: r.u32()?,
                    lookup_count: r.u64()?,
                    matched_count: r.u64()?,
                })
            })?),
            PORT_STATS => ReplyBody::PortStats(read_list(r, read_port_stats)?),
            GROUP => ReplyBody::Group(read_list(r, read_group_stats)?),
            GROUP_DESC => ReplyBody::GroupDesc(read_list(r, read_group_desc)?),
            GROUP_FEATURES => {
                let types = r.u32()?;
                let capabilities = r.u32()?;
                let mut max_groups = [0; 4];
                for max in &mut max_groups {
                    *max = r.u32()?;
                }
                let mut actions = [0; 4];
                for bits in &mut actions {
                    *bits = r.u32()?;
                }
                ReplyBody::GroupFeatures(GroupFeatures {
                    types,
                    capabilities,
                    max_groups,
                    actions,
                })
            }
            TABLE_FEATURES => ReplyBody::TableFeatures(read_list(r, TableFeatures::read)?),
            PORT_DESC => ReplyBody::PortDesc(read_list(r, |r| {
                let mut port = r.sub(PORT_DESC_LEN, OfError::BAD_REQUEST_LEN)?;
                PortDesc::read(&mut port)
            })?),
            _ => return Err(OfError::BAD_REQUEST_MULTIPART),
        };
        Ok(MultipartReply { flags, body })
    }

    pub(crate) fn emit(&self, out: &mut Vec<u8>) {
        let kind = match &self.body {
            ReplyBody::Desc(_) => DESC,
            ReplyBody::Flow(_) => FLOW,
            ReplyBody::Aggregate { .. } => AGGREGATE,
            ReplyBody::Table(_) => TABLE,
            ReplyBody::PortStats(_) => PORT_STATS,
            ReplyBody::Group(_) => GROUP,
            ReplyBody::GroupDesc(_) => GROUP_DESC,
            ReplyBody::GroupFeatures(_) => GROUP_FEATURES,
            ReplyBody::TableFeatures(_) => TABLE_FEATURES,
            ReplyBody::PortDesc(_) => PORT_DESC,
        };
        out.u16(kind);
        out.u16(self.flags);
        out.zeros(4);
        match &self.body {
            ReplyBody::Desc(d) => {
                out.string(&d.manufacturer, 256);
                out.string(&d.hardware, 256);
                out.string(&d.software, 256);
                out.string(&d.serial, 32);
                out.string(&d.datapath, 256);
            }
            ReplyBody::Flow(flows) => flows.iter().for_each(|f| emit_flow_stats(f, out)),
            ReplyBody::Aggregate {
                packet_count,
                byte_count,
                flow_count,
            } => {
                out.u64(*packet_count);
                out.u64(*byte_count);
                out.u32(*flow_count);
                out.zeros(4);
            }
            ReplyBody::Table(tables) => {
                for t in tables {
                    out.u8(t.table_id);
                    out.zeros(3);
                    out.u32(t.active_count);
                    out.u64(t.lookup_count);
                    out.u64(t.matched_count);
                }
            }
            ReplyBody::PortStats(ports) => ports.iter().for_each(|p| emit_port_stats(p, out)),
            ReplyBody::Group(groups) => groups.iter().for_each(|g| emit_group_stats(g, out)),
            ReplyBody::GroupDesc(groups) => {
                for g in groups {
                    let start = out.len();
                    out.u16(0);
                    out.u8(g.group_type.to_wire());
                    out.u8(0);
                    out.u32(g.group_id);
                    emit_buckets(&g.buckets, out);
                    let len = len_since(out, start);
                    out.patch_u16(start, len);
                }
            }
            ReplyBody::GroupFeatures(f) => {
                out.u32(f.types);
                out.u32(f.capabilities);
                for &value in f.max_groups.iter().chain(&f.actions) {
                    out.u32(value);
                }
            }
            ReplyBody::TableFeatures(tables) => tables.iter().for_each(|t| t.emit(out)),
            ReplyBody::PortDesc(ports) => ports.iter().for_each(|p| p.emit(out)),
        }
    }
}
