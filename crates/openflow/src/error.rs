//! The OpenFlow 1.3.5 error types and codes (§7.4.4, `ofp_error_type` and the per-type code
//! enums), as one value: what decoding returns and what the switch sends back in an ERROR
//! message. Decoding a message yields exactly the error the spec names for its defect, so the
//! agent answers a malformed request without a second look at it.

use std::fmt;

/// An OpenFlow error: the spec's type and code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct OfError {
    pub kind: u16,
    pub code: u16,
}

macro_rules! errors {
    ($($kind:literal $kind_name:literal { $($name:ident = $code:literal $text:literal),* $(,)? })*) => {
        impl OfError {
            $($(pub const $name: OfError = OfError { kind: $kind, code: $code };)*)*
        }

        impl fmt::Display for OfError {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match (self.kind, self.code) {
                    $($(($kind, $code) => write!(f, "{}/{}", $kind_name, $text),)*)*
                    $(($kind, code) => write!(f, "{}/code {}", $kind_name, code),)*
                    (kind, code) => write!(f, "type {kind}/code {code}"),
                }
            }
        }
    };
}

errors! {
    0 "HELLO_FAILED" {
        HELLO_INCOMPATIBLE = 0 "INCOMPATIBLE",
        HELLO_EPERM = 1 "EPERM",
    }
    1 "BAD_REQUEST" {
        BAD_REQUEST_VERSION = 0 "BAD_VERSION",
        BAD_REQUEST_TYPE = 1 "BAD_TYPE",
        BAD_REQUEST_MULTIPART = 2 "BAD_MULTIPART",
        BAD_REQUEST_EXPERIMENTER = 3 "BAD_EXPERIMENTER",
        BAD_REQUEST_EXP_TYPE = 4 "BAD_EXP_TYPE",
        BAD_REQUEST_EPERM = 5 "EPERM",
        BAD_REQUEST_LEN = 6 "BAD_LEN",
        BAD_REQUEST_BUFFER_UNKNOWN = 8 "BUFFER_UNKNOWN",
        BAD_REQUEST_TABLE_ID = 9 "BAD_TABLE_ID",
        BAD_REQUEST_IS_SLAVE = 10 "IS_SLAVE",
        BAD_REQUEST_PORT = 11 "BAD_PORT",
        BAD_REQUEST_PACKET = 12 "BAD_PACKET",
        BAD_REQUEST_MULTIPART_OVERFLOW = 13 "MULTIPART_BUFFER_OVERFLOW",
    }
    2 "BAD_ACTION" {
        BAD_ACTION_TYPE = 0 "BAD_TYPE",
        BAD_ACTION_LEN = 1 "BAD_LEN",
        BAD_ACTION_EXPERIMENTER = 2 "BAD_EXPERIMENTER",
        BAD_ACTION_OUT_PORT = 4 "BAD_OUT_PORT",
        BAD_ACTION_ARGUMENT = 5 "BAD_ARGUMENT",
        BAD_ACTION_TOO_MANY = 7 "TOO_MANY",
        BAD_ACTION_OUT_GROUP = 9 "BAD_OUT_GROUP",
        BAD_ACTION_MATCH_INCONSISTENT = 10 "MATCH_INCONSISTENT",
        BAD_ACTION_UNSUPPORTED_ORDER = 11 "UNSUPPORTED_ORDER",
        BAD_ACTION_SET_TYPE = 13 "BAD_SET_TYPE",
        BAD_ACTION_SET_LEN = 14 "BAD_SET_LEN",
        BAD_ACTION_SET_ARGUMENT = 15 "BAD_SET_ARGUMENT",
    }
    3 "BAD_INSTRUCTION" {
        BAD_INSTRUCTION_UNKNOWN = 0 "UNKNOWN_INST",
        BAD_INSTRUCTION_UNSUPPORTED = 1 "UNSUP_INST",
        BAD_INSTRUCTION_TABLE_ID = 2 "BAD_TABLE_ID",
        BAD_INSTRUCTION_UNSUP_METADATA = 3 "UNSUP_METADATA",
        BAD_INSTRUCTION_EXPERIMENTER = 5 "BAD_EXPERIMENTER",
        BAD_INSTRUCTION_LEN = 7 "BAD_LEN",
    }
    4 "BAD_MATCH" {
        BAD_MATCH_TYPE = 0 "BAD_TYPE",
        BAD_MATCH_LEN = 1 "BAD_LEN",
        BAD_MATCH_DL_ADDR_MASK = 3 "BAD_DL_ADDR_MASK",
        BAD_MATCH_NW_ADDR_MASK = 4 "BAD_NW_ADDR_MASK",
        BAD_MATCH_WILDCARDS = 5 "BAD_WILDCARDS",
        BAD_MATCH_FIELD = 6 "BAD_FIELD",
        BAD_MATCH_VALUE = 7 "BAD_VALUE",
        BAD_MATCH_MASK = 8 "BAD_MASK",
        BAD_MATCH_PREREQ = 9 "BAD_PREREQ",
        BAD_MATCH_DUP_FIELD = 10 "DUP_FIELD",
    }
    5 "FLOW_MOD_FAILED" {
        FLOW_MOD_UNKNOWN = 0 "UNKNOWN",
        FLOW_MOD_TABLE_FULL = 1 "TABLE_FULL",
        FLOW_MOD_BAD_TABLE_ID = 2 "BAD_TABLE_ID",
        FLOW_MOD_OVERLAP = 3 "OVERLAP",
        FLOW_MOD_EPERM = 4 "EPERM",
        FLOW_MOD_BAD_TIMEOUT = 5 "BAD_TIMEOUT",
        FLOW_MOD_BAD_COMMAND = 6 "BAD_COMMAND",
        FLOW_MOD_BAD_FLAGS = 7 "BAD_FLAGS",
    }
    6 "GROUP_MOD_FAILED" {
        GROUP_MOD_EXISTS = 0 "GROUP_EXISTS",
        GROUP_MOD_INVALID = 1 "INVALID_GROUP",
        GROUP_MOD_OUT_OF_GROUPS = 3 "OUT_OF_GROUPS",
        GROUP_MOD_OUT_OF_BUCKETS = 4 "OUT_OF_BUCKETS",
        GROUP_MOD_CHAINING_UNSUPPORTED = 5 "CHAINING_UNSUPPORTED",
        GROUP_MOD_WATCH_UNSUPPORTED = 6 "WATCH_UNSUPPORTED",
        GROUP_MOD_LOOP = 7 "LOOP",
        GROUP_MOD_UNKNOWN_GROUP = 8 "UNKNOWN_GROUP",
        GROUP_MOD_CHAINED_GROUP = 9 "CHAINED_GROUP",
        GROUP_MOD_BAD_TYPE = 10 "BAD_TYPE",
        GROUP_MOD_BAD_COMMAND = 11 "BAD_COMMAND",
        GROUP_MOD_BAD_BUCKET = 12 "BAD_BUCKET",
        GROUP_MOD_BAD_WATCH = 13 "BAD_WATCH",
        GROUP_MOD_EPERM = 14 "EPERM",
    }
    10 "SWITCH_CONFIG_FAILED" {
        SWITCH_CONFIG_BAD_FLAGS = 0 "BAD_FLAGS",
        SWITCH_CONFIG_BAD_LEN = 1 "BAD_LEN",
    }
    11 "ROLE_REQUEST_FAILED" {
        ROLE_STALE = 0 "STALE",
        ROLE_UNSUPPORTED = 1 "UNSUP",
        ROLE_BAD_ROLE = 2 "BAD_ROLE",
    }
    13 "TABLE_FEATURES_FAILED" {
        TABLE_FEATURES_BAD_TABLE = 0 "BAD_TABLE",
        TABLE_FEATURES_EPERM = 5 "EPERM",
    }
    // OFPET_EXPERIMENTER errors of the ONF (the only experimenter the switch answers for):
    // the bundles of OpenFlow 1.4's OFPET_BUNDLE_FAILED, code n as exp_type 2300 + n.
    0xffff "ONF_BUNDLE_FAILED" {
        BUNDLE_UNKNOWN = 2300 "UNKNOWN",
        BUNDLE_EPERM = 2301 "EPERM",
        BUNDLE_BAD_ID = 2302 "BAD_ID",
        BUNDLE_EXIST = 2303 "BUNDLE_EXIST",
        BUNDLE_CLOSED = 2304 "BUNDLE_CLOSED",
        BUNDLE_OUT_OF_BUNDLES = 2305 "OUT_OF_BUNDLES",
        BUNDLE_BAD_TYPE = 2306 "BAD_TYPE",
        BUNDLE_BAD_FLAGS = 2307 "BAD_FLAGS",
        BUNDLE_MSG_BAD_LEN = 2308 "MSG_BAD_LEN",
        BUNDLE_MSG_BAD_XID = 2309 "MSG_BAD_XID",
        BUNDLE_MSG_UNSUP = 2310 "MSG_UNSUP",
        BUNDLE_MSG_CONFLICT = 2311 "MSG_CONFLICT",
        BUNDLE_MSG_TOO_MANY = 2312 "MSG_TOO_MANY",
        BUNDLE_MSG_FAILED = 2313 "MSG_FAILED",
        BUNDLE_TIMEOUT = 2314 "TIMEOUT",
        BUNDLE_IN_PROGRESS = 2315 "BUNDLE_IN_PROGRESS",
    }
}

impl OfError {
    /// `type` of an experimenter's error (OFPET_EXPERIMENTER): its `code` is the
    /// experimenter's `exp_type`, and the experimenter id precedes the data.
    pub const EXPERIMENTER: u16 = 0xffff;
}

impl std::error::Error for OfError {}
