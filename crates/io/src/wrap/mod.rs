//! Wrapper ports: a [`Port`](crate::Port) around another port that adds one behaviour and is
//! itself a port, so it can stand anywhere a port stands (smoltcp's tracer and fault injector,
//! for batches).
//!
//! * [`Traced`]: a tap that writes a copy of every frame received and transmitted to capture
//!   files, for debugging a pipeline on real ports.
//! * [`Faulty`]: deterministic fault injection (drop, truncate, corrupt, duplicate, reorder) for
//!   tests of everything above the port.
//!
//! They compose: `Faulty<Traced<P>>` traces what reaches the real port after the faults,
//! `Traced<Faulty<P>>` traces what the pipeline saw.

#![deny(unsafe_code)]

mod fault;
mod trace;

pub use fault::{FaultConfig, FaultStats, Faulty};
pub use trace::Traced;
