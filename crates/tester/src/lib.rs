//! The tester: the second half of wirespeed.
//!
//! * [`generator`]: frame templates built once and stamped into pool frames per flow, and the generator
//!   that sends them out of a port.
//! * [`dut`]: a driver per device under test (set up, verify, tear down, with an undo stack).
//! * [`bench`]: the forwarding benchmark: DuTs side by side with one placement of threads.
#![deny(unsafe_code)]

pub mod bench;
pub mod dut;
pub mod generator;
