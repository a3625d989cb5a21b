//! Lookup tables used by the stages.

pub mod fib;
pub mod mac;
