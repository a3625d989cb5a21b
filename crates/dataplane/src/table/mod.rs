//! Lookup tables used by the stages.

pub mod fib;
pub mod interfaces;
pub mod mac;
pub mod neighbour;
