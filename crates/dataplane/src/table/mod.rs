//! Lookup tables used by the stages.

pub mod adjacency;
pub mod classifier;
pub mod fib;
pub mod flow_cache;
pub mod interfaces;
pub mod mac;
pub mod neighbour;
