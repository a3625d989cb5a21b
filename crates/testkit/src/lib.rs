//! Helpers for tests and benchmarks: build frames, push them into ports, read them back,
//! generate routing tables.
#![deny(unsafe_code)]

pub mod frames;
pub mod interleave;
pub mod ports;
pub mod rig;
pub mod routes;
