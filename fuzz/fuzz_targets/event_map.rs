//! libFuzzer target `event_map`: the body is `harness/event_map.rs`, which the main workspace's replay
//! test (`capi/tests/fuzz_replay.rs`) also runs over the committed corpus and regressions.
#![no_main]

#[path = "../harness/fuzz_common.rs"]
mod fuzz_common;
#[path = "../harness/event_map.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::run(data));
