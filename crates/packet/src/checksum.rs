//! Internet checksums (filled in by the wire work).
