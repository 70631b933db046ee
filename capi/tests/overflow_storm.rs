//! Overflow storms: however short a period a program asks for, it keeps running and the
//! user's queue of pending signals stays nearly empty (`group::STORM_FLOOR_NS` and the
//! overflow limit of one in `src/backend/perf/group.rs`).
//!
//! Each program runs with the other CPU kept busy by a spinning thread, as a user id of its own
//! (when the test runs as root) so that `SigQ` in its `/proc/<pid>/status` (the signals queued
//! for that user) counts only its own, sampled every millisecond while it runs. It must end by
//! itself within [`LIMIT`] (else it is killed and the test fails) with at most [`MAX_QUEUED`]
//! signals ever seen queued. Before the guard, pfm at 2^12 filled the queue to the user's limit
//! (96,365 here) within a second and never finished.

mod common;

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use common::{c_program, pfcntr_link_args, repo, tmp, Guarded};

/// How long a program may take (each does well under a second of work).
const LIMIT: Duration = Duration::from_secs(60);
/// The most signals the program's user may ever have queued.
const MAX_QUEUED: u64 = 10;

/// What a watched run saw.
struct Watched {
    stdout: String,
    stderr: String,
    success: bool,
    max_queued: u64,
    samples: usize,
    elapsed: Duration,
}

/// The number of signals queued for the user of `pid` (`SigQ: queued/limit`), if readable.
fn queued(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = s.lines().find(|l| l.starts_with("SigQ:"))?;
    line["SigQ:".len()..].trim().split('/').next()?.parse().ok()
}

/// A user id no other test uses while this one runs: 40000 + this process's id modulo 10000,
/// plus `k`.
fn own_uid(k: u32) -> u32 {
    40_000 + std::process::id() % 10_000 * 2 + k
}

/// Run `bin` with `args` and `env` on the perf backend as user `uid` (when root), with one CPU
/// kept busy, sampling its user's queued signals until it ends; kill it at [`LIMIT`].
fn watched(bin: &Path, args: &[&str], env: &[(&str, &str)], uid: u32) -> Watched {
    let stop = Arc::new(AtomicBool::new(false));
    let spin = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut x = 0u64;
            while !stop.load(Ordering::Relaxed) {
                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
            }
        })
    };
    // SAFETY: geteuid cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    let mut cmd = Command::new(bin);
    cmd.args(args)
        .env_remove("LD_LIBRARY_PATH")
        .env("PERFCOMPAT_BACKEND", "perf")
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: system calls only, between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            if root
                && (libc::setgroups(0, std::ptr::null()) != 0
                    || libc::setresgid(uid, uid, uid) != 0
                    || libc::setresuid(uid, uid, uid) != 0)
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        })
    };
    // Killed with the thread that started it: no orphan outlives the test. Set after the
    // change of user above (a change of credentials clears it).
    cmd.guarded();
    let start = Instant::now();
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", bin.display()));
    let pid = child.id();
    let (mut max_queued, mut samples) = (0, 0);
    let status = loop {
        if let Some(q) = queued(pid) {
            max_queued = max_queued.max(q);
            samples += 1;
        }
        if let Some(st) = child.try_wait().expect("waitpid") {
            break Some(st);
        }
        if start.elapsed() > LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    let elapsed = start.elapsed();
    stop.store(true, Ordering::Relaxed);
    spin.join().unwrap();
    let out = child.wait_with_output().expect("the program's output");
    Watched {
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        success: status.is_some_and(|s| s.success()),
        max_queued,
        samples,
        elapsed,
    }
}

/// Judge a watched run: it ended by itself, successfully, with few signals ever queued.
fn judge(what: &str, w: &Watched) {
    println!(
        "{what}: {:.2} s, at most {} signals queued in {} samples of SigQ; {}",
        w.elapsed.as_secs_f64(),
        w.max_queued,
        w.samples,
        w.stdout.trim()
    );
    assert!(
        w.elapsed < LIMIT,
        "{what} did not finish within {LIMIT:?} (killed); at most {} signals queued\n{}",
        w.max_queued,
        w.stderr
    );
    assert!(w.success, "{what} failed:\n{}\n{}", w.stdout, w.stderr);
    assert!(w.samples > 0, "{what}: SigQ never read");
    assert!(
        w.max_queued <= MAX_QUEUED,
        "{what}: {} signals queued for its user at once (at most {MAX_QUEUED})",
        w.max_queued
    );
}

fn pfm_storm() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let out = tmp().join("storm_pfm");
        common::compile(
            Command::new("cc")
                .args(["-O1", "-Wall", "-Wextra", "-Werror", "-o"])
                .arg(&out)
                .arg(repo().join("tests/c/storm_pfm.c"))
                .arg(format!("-I{}", repo().join("include").display()))
                .args(pfcntr_link_args()),
            "tests/c/storm_pfm.c",
        );
        out
    })
}

fn cpc_storm() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| c_program("storm_cpc", &[]))
}

/// pfm's counter 0 every 2^12 cycles and counter 1 every 2^8 (its `PF_BRANCHMISS` mapped to
/// `cycles`), profiling the PC, on the cycles fallback (CPU time × the clock) or a PMU.
#[test]
fn pfm_at_its_shortest_periods_finishes_with_few_signals_queued() {
    let map = tmp().join("storm_pfm.map");
    std::fs::write(&map, "PAPI_br_msp = cycles\n").unwrap();
    let map = map.to_str().unwrap();
    let w = watched(
        pfm_storm(),
        &["100000000"],
        &[("PERFCOMPAT_EVENTS", map)],
        own_uid(0),
    );
    judge("pfm 2^12 and 2^8", &w);
    let n: Vec<u64> = w
        .stdout
        .split_whitespace()
        .filter_map(|t| t.parse().ok())
        .collect();
    assert!(
        n.len() == 3 && n[0] > 0 && n[1] > 0 && n[2] > 0,
        "samples and both counters' interrupts: {}",
        w.stdout
    );
}

/// libcpc's `cpu-clock` preset 1 µs before the wrap, restarted there by its SIGEMT handler.
#[test]
fn a_one_microsecond_cpu_clock_period_finishes_with_few_signals_queued() {
    let w = watched(cpc_storm(), &["200000000"], &[], own_uid(1));
    judge("libcpc cpu-clock 1 us", &w);
}
