//! The tester: the second half of wirespeed.
//!
//! * [`generator`]: frame templates built once and stamped into pool frames per flow, and the generator
//!   that sends them out of a port.
#![deny(unsafe_code)]

pub mod generator;
