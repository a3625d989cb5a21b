//! Pipeline stages, one per file.
