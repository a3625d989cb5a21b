//! Configured pipelines.
