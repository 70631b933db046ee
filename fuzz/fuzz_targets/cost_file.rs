//! libFuzzer target `cost_file`: the body is `harness/cost_file.rs`, which the main workspace's replay
//! test (`capi/tests/fuzz_replay.rs`) also runs over the committed corpus and regressions.
#![no_main]

#[path = "../harness/fuzz_common.rs"]
mod fuzz_common;
#[path = "../harness/cost_file.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::run(data));
