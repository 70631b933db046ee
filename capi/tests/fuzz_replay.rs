//! The fuzz targets' committed inputs, replayed without cargo-fuzz: every file under
//! `fuzz/corpus/<target>/` and `fuzz/regressions/<target>/` goes through the target's body
//! (`fuzz/harness/<target>.rs`, the same code `cargo fuzz run` drives), whose invariants are
//! assertions. A regression of a bug fuzzing found fails here.
//!
//! One test runs the four targets in turn on one thread: the state machine binds inheriting
//! sets, which would count the events of threads libtest starts for other tests.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

#[path = "../../fuzz/harness/fuzz_common.rs"]
mod fuzz_common;

#[path = "../../fuzz/harness/cost_file.rs"]
mod cost_file;
#[path = "../../fuzz/harness/event_map.rs"]
mod event_map;
#[path = "../../fuzz/harness/event_spec.rs"]
mod event_spec;
#[path = "../../fuzz/harness/state_machine.rs"]
mod state_machine;

type Body = fn(&[u8]);

const TARGETS: [(&str, Body); 4] = [
    ("cost_file", cost_file::run),
    ("event_map", event_map::run),
    ("event_spec", event_spec::run),
    ("state_machine", state_machine::run),
];

fn inputs(target: &str) -> Vec<PathBuf> {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz");
    let mut v = Vec::new();
    for dir in ["corpus", "regressions"] {
        if let Ok(rd) = std::fs::read_dir(fuzz.join(dir).join(target)) {
            v.extend(
                rd.filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.is_file()),
            );
        }
    }
    v.sort();
    v
}

/// Standard error sent to /dev/null until dropped.
struct Quiet(libc::c_int);

impl Quiet {
    fn new() -> Quiet {
        // SAFETY: plain descriptor calls on valid arguments.
        unsafe {
            let saved = libc::dup(2);
            let null = libc::open(c"/dev/null".as_ptr(), libc::O_WRONLY);
            libc::dup2(null, 2);
            libc::close(null);
            Quiet(saved)
        }
    }
}

impl Drop for Quiet {
    fn drop(&mut self) {
        // SAFETY: puts back the descriptor saved above.
        unsafe {
            libc::dup2(self.0, 2);
            libc::close(self.0);
        }
    }
}

#[test]
fn committed_fuzz_inputs_keep_every_invariant() {
    std::env::set_var("PERFCOMPAT_BACKEND", "sim:r10000");
    let mut failed = Vec::new();
    // The library's own error lines (written with write(2), not captured by libtest) would
    // fill the log: stderr goes to /dev/null while the inputs run.
    let quiet = Quiet::new();
    for (target, body) in TARGETS {
        let files = inputs(target);
        assert!(!files.is_empty(), "no committed input for {target}");
        for f in &files {
            let data = std::fs::read(f).unwrap();
            if catch_unwind(AssertUnwindSafe(|| body(&data))).is_err() {
                failed.push(f.display().to_string());
            }
        }
        println!("{target}: {} inputs replayed", files.len());
    }
    drop(quiet);
    assert!(failed.is_empty(), "inputs that fail: {failed:#?}");
}
