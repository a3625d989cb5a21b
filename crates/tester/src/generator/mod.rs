//! Traffic generation: templates and the loop that sends them.

pub mod backend;
pub mod blast;
mod in_process;
pub mod kernel_count;
pub mod live;
pub mod pacing;
pub mod probe;
pub mod template;
mod testpmd_txonly;
pub mod xdp_tools;

pub use backend::{BACKEND_NAMES, Backend, Spec, backend};
pub use blast::{BlastConfig, BlastResult, blast, prefill};
pub use in_process::{InProcess, Socket};
pub use kernel_count::TxCounters;
pub use template::{Template, TemplateConfig, TemplateError};
pub use testpmd_txonly::TestpmdTxonly;
