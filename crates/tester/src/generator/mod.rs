//! Traffic generation: templates and the loop that sends them.

pub mod blast;
pub mod live;
pub mod pacing;
pub mod probe;
pub mod template;

pub use blast::{BlastConfig, BlastResult, blast, prefill};
pub use template::{Template, TemplateConfig, TemplateError};
