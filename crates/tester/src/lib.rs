//! The tester: the second half of wirespeed.
//!
//! * [`generator`]: frame templates built once and stamped into pool frames per flow, and the generator
//!   that sends them out of a port; pacing schedules (CBR, Poisson, bursts) and the latency
//!   probe written into frames.
//! * [`rfc2544`]: the tests (throughput, MLRsearch, frame loss rate, back-to-back, system
//!   recovery) as pure functions over a `trial` closure.
//! * [`stats`]: what the sink keeps per trial: latency histograms and sequence tracking.
//! * [`report`]: the result data model and its JSON, CSV and HTML (with SVG plots) renderings.
//! * [`dut`]: a driver per device under test (set up, verify, tear down, with an undo stack).
//! * [`bench`]: the forwarding benchmark: DuTs side by side with one placement of threads.
//! * [`suite`]: the RFC 2544 suite in the lab: calibration, searches, latency, the report.
//! * [`trial`]: one paced trial over real ports with probes, and its check against the kernel.
//! * [`testpmd`]: DPDK's testpmd as a process (the `dpdk-testpmd` DuT and the `testpmd-txonly`
//!   generator run it), always stopped and cleaned up.
//! * [`timestamp`]: which timestamp source the RX port offers and the clocks' measured
//!   resolution and read cost.
#![deny(unsafe_code)]

pub mod bench;
pub mod dut;
pub mod generator;
pub mod report;
pub mod rfc2544;
pub mod stats;
pub mod suite;
pub mod testpmd;
pub mod timestamp;
pub mod trial;
