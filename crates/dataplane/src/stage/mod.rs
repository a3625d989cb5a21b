//! Pipeline stages, one per file, each with the same anatomy: the counters it keeps, the
//! dispositions it can choose (an output port in `Meta::out_port` or a reason in `Meta::drop`),
//! and one function that processes a whole batch.

pub mod bridge_forward;
pub mod learn;
pub mod parse;
pub mod task;
pub mod vlan;

pub use parse::Parse;
pub use task::Task;
