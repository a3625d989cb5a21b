//! Zero-copy views of protocol headers (filled in by the wire work).
