//! Fuzz the ingest path: exposition text through the parser and the DCGM mapping, and a
//! Prometheus API answer through its mapping. Nothing may panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tessera::config::ScrapeNode;
use tessera::sources::dcgm::{NodeName, map};
use tessera::sources::prometheus::to_partial_from_api;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = map(&text, &NodeName::Label);
    let _ = map(&text, &NodeName::Fixed("node".into()));
    let _ = to_partial_from_api(&text, ScrapeNode::Target);
});
