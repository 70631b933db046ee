//! Signal numbers from the environment (issue 29): `PERFCOMPAT_SIGEMT` and
//! `PERFCOMPAT_OVERFLOW_SIGNAL` must name a real-time signal other than the other one's.
//! Anything else is refused with a message naming the variable and its value, and libcpc goes
//! on with its defaults: tests/c/cpc_emt_delivery.c (its `handler` mode, SIGEMT = 63) still gets
//! every notification. Before the check, `PERFCOMPAT_SIGEMT=9` killed the program, `=11`
//! crashed it, `=62` (the overflow signal) and `PERFCOMPAT_OVERFLOW_SIGNAL=63` lost every
//! SIGEMT, and the other values were ignored without a word.

mod common;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use common::{c_program, run_output};

fn program() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| c_program("cpc_emt_delivery", &[]))
}

fn refused(var: &str, value: &str) {
    let out = run_output(program(), "perf", &["handler"], &[(var, value)]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("\n0 failures"),
        "{var}={value}: {:?}\n{stdout}\n{stderr}",
        out.status
    );
    assert!(
        stderr.contains(&format!("perfcompat: {var}={value} is refused")),
        "{var}={value}: no message\n{stderr}"
    );
}

#[test]
fn sigemt_numbers_that_are_not_free_real_time_signals_are_refused() {
    for v in ["9", "11", "62", "0", "x"] {
        refused("PERFCOMPAT_SIGEMT", v);
    }
}

#[test]
fn overflow_signal_numbers_that_are_not_free_real_time_signals_are_refused() {
    for v in ["63", "garbage", "9", "0"] {
        refused("PERFCOMPAT_OVERFLOW_SIGNAL", v);
    }
}

/// A program that defines its own `getenv` (as bash does, answering from a table it fills
/// later) does not hide the library's variables from it: the library reads the process's
/// environment array (issue 37; tests/c/own_getenv.c, whose `getenv` knows no variable). Before,
/// `PERFCOMPAT_BACKEND=sim:r10000` went unseen and libcpc named the host's processor.
#[test]
fn a_program_with_its_own_getenv_does_not_hide_the_librarys_variables() {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    let bin = BIN.get_or_init(|| c_program("own_getenv", &[]));
    let out = run_output(bin, "sim:r10000", &[], &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("\n0 failures"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
