//! Lookup tables used by the stages.
