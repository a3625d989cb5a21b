//! Actions (OpenFlow 1.3.5 §7.2.5) and instructions (§7.2.4).
//!
//! Action lists are checked as they are read: every TLV's length (BAD_LEN, a multiple of 8 and
//! the type's own size), types we do not know (BAD_TYPE), output ports that name no port
//! (BAD_OUT_PORT), push-VLAN ethertypes other than 802.1Q/802.1ad (BAD_ARGUMENT), and the field
//! of a set-field (BAD_SET_TYPE, BAD_SET_LEN; a mask is BAD_SET_ARGUMENT).

use crate::OfError;
use crate::bytes::{Reader, Writer, len_since};
use crate::oxm::Oxm;

/// Reserved port numbers (`ofp_port_no`).
pub mod port {
    /// Largest number of a physical port.
    pub const MAX: u32 = 0xffff_ff00;
    pub const IN_PORT: u32 = 0xffff_fff8;
    pub const TABLE: u32 = 0xffff_fff9;
    pub const NORMAL: u32 = 0xffff_fffa;
    pub const FLOOD: u32 = 0xffff_fffb;
    pub const ALL: u32 = 0xffff_fffc;
    pub const CONTROLLER: u32 = 0xffff_fffd;
    pub const LOCAL: u32 = 0xffff_fffe;
    /// "No port": wildcard in requests, never an output.
    pub const ANY: u32 = 0xffff_ffff;
}

/// Reserved group numbers (`ofp_group`).
pub mod group {
    pub const MAX: u32 = 0xffff_ff00;
    pub const ALL: u32 = 0xffff_fffc;
    pub const ANY: u32 = 0xffff_ffff;
}

/// `max_len` asking for the whole packet in a PACKET_IN (OFPCML_NO_BUFFER).
pub const NO_BUFFER_LEN: u16 = 0xffff;

const OUTPUT: u16 = 0;
const PUSH_VLAN: u16 = 17;
const POP_VLAN: u16 = 18;
const GROUP: u16 = 22;
const SET_NW_TTL: u16 = 23;
const DEC_NW_TTL: u16 = 24;
const SET_FIELD: u16 = 25;

/// One action.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// To `port` (or a reserved [`port`]); `max_len` bytes go to the controller.
    Output {
        port: u32,
        max_len: u16,
    },
    /// Set a field; the OXM carries no mask.
    SetField(Oxm),
    /// Push a tag with this TPID (0x8100 or 0x88a8).
    PushVlan(u16),
    PopVlan,
    SetNwTtl(u8),
    DecNwTtl,
    Group(u32),
}

impl Action {
    /// An output to `port` with no bytes for the controller.
    pub fn output(port: u32) -> Action {
        Action::Output { port, max_len: 0 }
    }

    fn read(r: &mut Reader<'_>) -> Result<Action, OfError> {
        let kind = r.u16()?;
        let len = usize::from(r.u16()?);
        if len < 8 || len % 8 != 0 {
            return Err(OfError::BAD_ACTION_LEN);
        }
        let mut body = r.sub(len - 4, OfError::BAD_ACTION_LEN)?;
        let fixed = |expected: usize| {
            if len == expected {
                Ok(())
            } else {
                Err(OfError::BAD_ACTION_LEN)
            }
        };
        let action = match kind {
            OUTPUT => {
                fixed(16)?;
                let port = body.u32()?;
                let max_len = body.u16()?;
                if port == port::ANY || (port > port::MAX && port < port::IN_PORT) || port == 0 {
                    return Err(OfError::BAD_ACTION_OUT_PORT);
                }
                Action::Output { port, max_len }
            }
            PUSH_VLAN => {
                fixed(8)?;
                let tpid = body.u16()?;
                if tpid != 0x8100 && tpid != 0x88a8 {
                    return Err(OfError::BAD_ACTION_ARGUMENT);
                }
                Action::PushVlan(tpid)
            }
            POP_VLAN => {
                fixed(8)?;
                Action::PopVlan
            }
            GROUP => {
                fixed(8)?;
                let id = body.u32()?;
                if id > group::MAX {
                    return Err(OfError::BAD_ACTION_OUT_GROUP);
                }
                Action::Group(id)
            }
            SET_NW_TTL => {
                fixed(8)?;
                Action::SetNwTtl(body.u8()?)
            }
            DEC_NW_TTL => {
                fixed(8)?;
                Action::DecNwTtl
            }
            SET_FIELD => {
                let mut oxm = Reader::new(body.rest(), OfError::BAD_ACTION_SET_LEN);
                let field = match Oxm::read(&mut oxm) {
                    Ok(field) => field,
                    Err(OfError::BAD_MATCH_FIELD) => return Err(OfError::BAD_ACTION_SET_TYPE),
                    Err(OfError::BAD_MATCH_MASK) => return Err(OfError::BAD_ACTION_SET_ARGUMENT),
                    Err(OfError::BAD_MATCH_LEN) => return Err(OfError::BAD_ACTION_SET_LEN),
                    Err(_) => return Err(OfError::BAD_ACTION_SET_ARGUMENT),
                };
                if (4 + field.wire_len()).next_multiple_of(8) != len {
                    return Err(OfError::BAD_ACTION_SET_LEN);
                }
                if field.has_mask() {
                    return Err(OfError::BAD_ACTION_SET_ARGUMENT);
                }
                Action::SetField(field)
            }
            _ => return Err(OfError::BAD_ACTION_TYPE),
        };
        Ok(action)
    }

    fn emit(&self, out: &mut Vec<u8>) {
        let start = out.len();
        match *self {
            Action::Output { port, max_len } => {
                out.u16(OUTPUT);
                out.u16(16);
                out.u32(port);
                out.u16(max_len);
                out.zeros(6);
            }
            Action::SetField(field) => {
                out.u16(SET_FIELD);
                out.u16(0);
                field.emit(out);
                out.pad8(start);
                let len = len_since(out, start);
                out.patch_u16(start + 2, len);
            }
            Action::PushVlan(tpid) => {
                out.u16(PUSH_VLAN);
                out.u16(8);
                out.u16(tpid);
                out.zeros(2);
            }
            Action::PopVlan => {
                out.u16(POP_VLAN);
                out.u16(8);
                out.zeros(4);
            }
            Action::SetNwTtl(ttl) => {
                out.u16(SET_NW_TTL);
                out.u16(8);
                out.u8(ttl);
                out.zeros(3);
            }
            Action::DecNwTtl => {
                out.u16(DEC_NW_TTL);
                out.u16(8);
                out.zeros(4);
            }
            Action::Group(id) => {
                out.u16(GROUP);
                out.u16(8);
                out.u32(id);
            }
        }
    }
}

/// Reads actions until `r` is empty.
pub(crate) fn read_actions(r: &mut Reader<'_>) -> Result<Vec<Action>, OfError> {
    let mut actions = Vec::new();
    while !r.is_empty() {
        actions.push(Action::read(r)?);
    }
    Ok(actions)
}

pub(crate) fn emit_actions(actions: &[Action], out: &mut Vec<u8>) {
    for action in actions {
        action.emit(out);
    }
}

/// One instruction of a flow entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Instruction {
    GotoTable(u8),
    WriteMetadata { metadata: u64, mask: u64 },
    WriteActions(Vec<Action>),
    ApplyActions(Vec<Action>),
    ClearActions,
    Meter(u32),
}

const GOTO_TABLE: u16 = 1;
const WRITE_METADATA: u16 = 2;
const WRITE_ACTIONS: u16 = 3;
const APPLY_ACTIONS: u16 = 4;
const CLEAR_ACTIONS: u16 = 5;
const METER: u16 = 6;

impl Instruction {
    fn kind(&self) -> u16 {
        match self {
            Instruction::GotoTable(_) => GOTO_TABLE,
            Instruction::WriteMetadata { .. } => WRITE_METADATA,
            Instruction::WriteActions(_) => WRITE_ACTIONS,
            Instruction::ApplyActions(_) => APPLY_ACTIONS,
            Instruction::ClearActions => CLEAR_ACTIONS,
            Instruction::Meter(_) => METER,
        }
    }

    fn read(r: &mut Reader<'_>) -> Result<Instruction, OfError> {
        let kind = r.u16()?;
        let len = usize::from(r.u16()?);
        if len < 8 || len % 8 != 0 {
            return Err(OfError::BAD_INSTRUCTION_LEN);
        }
        let mut body = r.sub(len - 4, OfError::BAD_INSTRUCTION_LEN)?;
        let fixed = |expected: usize| {
            if len == expected {
                Ok(())
            } else {
                Err(OfError::BAD_INSTRUCTION_LEN)
            }
        };
        Ok(match kind {
            GOTO_TABLE => {
                fixed(8)?;
                let table = body.u8()?;
                if table == 0xff {
                    return Err(OfError::BAD_INSTRUCTION_TABLE_ID);
                }
                Instruction::GotoTable(table)
            }
            WRITE_METADATA => {
                fixed(24)?;
                body.skip(4)?;
                Instruction::WriteMetadata {
                    metadata: body.u64()?,
                    mask: body.u64()?,
                }
            }
            WRITE_ACTIONS | APPLY_ACTIONS | CLEAR_ACTIONS => {
                body.skip(4)?;
                let mut list = Reader::new(body.rest(), OfError::BAD_ACTION_LEN);
                let actions = read_actions(&mut list)?;
                match kind {
                    WRITE_ACTIONS => Instruction::WriteActions(actions),
                    APPLY_ACTIONS => Instruction::ApplyActions(actions),
                    _ if actions.is_empty() => Instruction::ClearActions,
                    _ => return Err(OfError::BAD_INSTRUCTION_LEN),
                }
            }
            METER => {
                fixed(8)?;
                Instruction::Meter(body.u32()?)
            }
            _ => return Err(OfError::BAD_INSTRUCTION_UNKNOWN),
        })
    }

    fn emit(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.u16(self.kind());
        out.u16(0);
        match self {
            Instruction::GotoTable(table) => {
                out.u8(*table);
                out.zeros(3);
            }
            Instruction::WriteMetadata { metadata, mask } => {
                out.zeros(4);
                out.u64(*metadata);
                out.u64(*mask);
            }
            Instruction::WriteActions(actions) | Instruction::ApplyActions(actions) => {
                out.zeros(4);
                emit_actions(actions, out);
            }
            Instruction::ClearActions => out.zeros(4),
            Instruction::Meter(id) => out.u32(*id),
        }
        let len = len_since(out, start);
        out.patch_u16(start + 2, len);
    }
}

/// Reads instructions until `r` is empty; an instruction type twice is UNSUP_INST (§7.2.4:
/// a flow entry has at most one of each).
pub(crate) fn read_instructions(r: &mut Reader<'_>) -> Result<Vec<Instruction>, OfError> {
    let mut instructions: Vec<Instruction> = Vec::new();
    while !r.is_empty() {
        let instruction = Instruction::read(r)?;
        if instructions.iter().any(|i| i.kind() == instruction.kind()) {
            return Err(OfError::BAD_INSTRUCTION_UNSUPPORTED);
        }
        instructions.push(instruction);
    }
    Ok(instructions)
}

pub(crate) fn emit_instructions(instructions: &[Instruction], out: &mut Vec<u8>) {
    for instruction in instructions {
        instruction.emit(out);
    }
}
