//! One module per subcommand, plus what several of them share.

pub mod bench;
pub mod build;
pub mod compare;
pub mod ctl;
pub mod demo;
pub mod fast_path;
pub mod generate;
pub mod lab;
pub mod metrics;
pub mod numbers;
pub mod pcap;
pub mod privileges;
pub mod reload;
pub mod rfc2544;
pub mod site;
pub mod stats;
pub mod sweep;
pub mod switch;
pub mod top;
