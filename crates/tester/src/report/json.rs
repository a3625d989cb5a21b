//! The report as JSON, for machines: serde's rendering of [`Report`], refused on reading when
//! its `schema_version` is not the one this build understands.

use super::{Report, SCHEMA_VERSION};

/// Why a JSON report cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum JsonError {
    #[error("report JSON is malformed: {0}")]
    Syntax(#[from] serde_json::Error),
    #[error(
        "report has schema version {found}, this wirespeed reads version {SCHEMA_VERSION}; use the wirespeed that wrote it"
    )]
    Version { found: u64 },
}

/// The report as compact JSON on one line (`jq .` prints it indented), its latency histograms
/// in HdrHistogram's own encoding: a report with many trials stays at kilobytes.
pub fn to_json(report: &Report) -> String {
    // A Report holds only strings, numbers, options and vectors (and histograms whose encoding
    // writes to memory): serialising cannot fail.
    let mut text =
        serde_json::to_string(report).unwrap_or_else(|_| unreachable!("reports serialise"));
    text.push('\n');
    text
}

/// Reads a report written by [`to_json`], checking the schema version first.
pub fn from_json(text: &str) -> Result<Report, JsonError> {
    let value: serde_json::Value = serde_json::from_str(text)?;
    let found = value
        .get("schema_version")
        .and_then(serde_json::Value::as_u64)
        .unwrap_or(0);
    if found != SCHEMA_VERSION as u64 {
        return Err(JsonError::Version { found });
    }
    Ok(serde_json::from_value(value)?)
}
