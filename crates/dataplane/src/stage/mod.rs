//! Pipeline stages, one per file, each with the same anatomy: the counters it keeps, the
//! dispositions it can choose (an output port in `Meta::out_port` or a reason in `Meta::drop`),
//! and one function that processes a whole batch.

pub mod acl;
pub mod bridge_forward;
pub mod discovery;
pub mod fast_path;
pub mod flow_cache;
pub mod icmp_error;
pub mod learn;
pub mod local;
pub mod neighbour;
pub mod parse;
pub mod route;
pub mod task;
pub mod vlan;

pub use parse::Parse;
pub use task::Task;
