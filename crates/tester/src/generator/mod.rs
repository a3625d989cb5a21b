//! Traffic generation: templates and the loop that sends them.

pub mod template;

pub use template::{Template, TemplateConfig, TemplateError};
