//! Flow keys (filled in by the wire work).
