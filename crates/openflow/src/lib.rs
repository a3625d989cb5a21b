//! OpenFlow 1.3 (wire version 0x04) as wirespeed speaks it: every message the agent receives
//! or sends, decoded from bytes into typed values and encoded back, after the OpenFlow Switch
//! Specification 1.3.5.
//!
//! Built like smoltcp's `wire`: decoding validates a message once, completely, and never
//! panics; what it refuses comes back as the [`OfError`] (type and code) the specification
//! names for that defect, which the agent sends back as an ERROR message unchanged. Encoding
//! writes what decoding reads, byte for byte (the round-trip property tests check both ways).
//! No maintained Rust crate speaks OpenFlow 1.3, hence this one; it has no dependencies and no
//! I/O: connections, timers and the translation to the data plane's rules are the agent's
//! (`wirespeed-control`).
#![deny(unsafe_code)]

pub mod action;
pub mod bundle;
mod bytes;
mod error;
pub mod message;
pub mod multipart;
pub mod oxm;

pub use action::{Action, Instruction};
pub use bundle::{BundleAdd, BundleControl};
pub use error::OfError;
pub use message::{DecodeError, Header, Message, VERSION};
pub use oxm::{Match, Oxm};

#[cfg(test)]
mod tests;
