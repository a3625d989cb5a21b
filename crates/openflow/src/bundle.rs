//! Bundles in OpenFlow 1.3: the Open Networking Foundation's extension 230 (the bundles of
//! OpenFlow 1.4, §7.3.9, carried in OFPT_EXPERIMENTER messages of experimenter
//! [`ONF_EXPERIMENTER`]), as Open vSwitch speaks it to a 1.3 switch (`ovs-ofctl --bundle`).
//!
//! A controller opens a bundle, adds messages to it without a barrier after each, then commits
//! it: the switch applies every message or none. For `ovs-ofctl add-flows` that is the way to
//! install many flows without a round trip per flow.

use crate::OfError;
use crate::bytes::{Reader, Writer};
use crate::message::{HEADER_LEN, Header};

/// The ONF's experimenter id ("ONF\0").
pub const ONF_EXPERIMENTER: u32 = 0x4f4e_4600;
/// `exp_type` of ONFT_BUNDLE_CONTROL.
pub const BUNDLE_CONTROL: u32 = 2300;
/// `exp_type` of ONFT_BUNDLE_ADD_MESSAGE.
pub const BUNDLE_ADD_MESSAGE: u32 = 2301;

/// `ofp_bundle_ctrl_type`.
pub mod control {
    pub const OPEN_REQUEST: u16 = 0;
    pub const OPEN_REPLY: u16 = 1;
    pub const CLOSE_REQUEST: u16 = 2;
    pub const CLOSE_REPLY: u16 = 3;
    pub const COMMIT_REQUEST: u16 = 4;
    pub const COMMIT_REPLY: u16 = 5;
    pub const DISCARD_REQUEST: u16 = 6;
    pub const DISCARD_REPLY: u16 = 7;
}

/// `ofp_bundle_flags`.
pub mod flags {
    /// Apply every message or none.
    pub const ATOMIC: u16 = 1;
    /// Apply the messages in the order they were added.
    pub const ORDERED: u16 = 2;
}

/// A BUNDLE_CONTROL message (`ofp_bundle_ctrl_msg`), request or reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BundleControl {
    pub bundle_id: u32,
    /// One of [`control`].
    pub kind: u16,
    /// Of [`flags`].
    pub flags: u16,
    /// The properties, as sent (none are defined that the switch acts on).
    pub properties: Vec<u8>,
}

impl BundleControl {
    pub(crate) fn read(r: &mut Reader<'_>) -> Result<Self, OfError> {
        Ok(BundleControl {
            bundle_id: r.u32()?,
            kind: r.u16()?,
            flags: r.u16()?,
            properties: r.rest().to_vec(),
        })
    }

    pub(crate) fn emit(&self, out: &mut Vec<u8>) {
        out.u32(self.bundle_id);
        out.u16(self.kind);
        out.u16(self.flags);
        out.extend_from_slice(&self.properties);
    }

    /// The reply to this request: the same bundle and flags, the reply's type (a request's
    /// type plus one), no properties.
    pub fn reply(&self) -> BundleControl {
        BundleControl {
            bundle_id: self.bundle_id,
            kind: self.kind | 1,
            flags: self.flags,
            properties: Vec::new(),
        }
    }
}

/// A BUNDLE_ADD_MESSAGE (`ofp_bundle_add_msg`): one message for a bundle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BundleAdd {
    pub bundle_id: u32,
    /// Of [`flags`]: must be the bundle's.
    pub flags: u16,
    /// The whole message added, its header's length checked against what carried it; it is
    /// decoded when the switch takes it into the bundle.
    pub message: Vec<u8>,
}

impl BundleAdd {
    pub(crate) fn read(r: &mut Reader<'_>) -> Result<Self, OfError> {
        let bundle_id = r.u32()?;
        r.skip(2)?;
        let flags = r.u16()?;
        let rest = r.rest();
        let length = Header::peek(rest)
            .map(|header| usize::from(header.length))
            .filter(|&length| length >= HEADER_LEN && length <= rest.len())
            .ok_or(OfError::BUNDLE_MSG_BAD_LEN)?;
        // Properties may follow the message, after padding to 8 bytes; none is defined
        // that the switch acts on, so they are not kept.
        Ok(BundleAdd {
            bundle_id,
            flags,
            message: rest[..length].to_vec(),
        })
    }

    pub(crate) fn emit(&self, out: &mut Vec<u8>) {
        out.u32(self.bundle_id);
        out.zeros(2);
        out.u16(self.flags);
        out.extend_from_slice(&self.message);
    }
}
