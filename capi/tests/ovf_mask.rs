//! The overflowed requests in libcpc's SIGEMT (`perfcompat_cpc_ovf_mask`, libcpc.h's extension
//! after perfctr's `si_pmc_ovf_mask`): tests/c/cpc_ovf_mask.c, built with `-Wpedantic -Werror`
//! against `include/` and the library only, on an emulated UltraSPARC (exact) and on perf.

mod common;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use common::{c_program, run, run_output};

fn program() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| c_program("cpc_ovf_mask", &["-Wpedantic", "-pthread"]))
}

#[test]
fn each_signal_names_the_request_that_overflowed_on_the_emulated_pmu() {
    let out = run_output(program(), "sim:ultrasparc", &["sim"], &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("signals 29\nsim: 0 failures"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn page_fault_overflows_name_their_request_on_perf() {
    // `run` checks the exit status and the program's "0 failures".
    run(program(), "perf", &["perf"]);
}
