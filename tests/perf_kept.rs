//! The counters the checks of events open are kept for the bind that follows (issue 48, first
//! use; `src/backend/perf/kept.rs`), over the kernel model playing the arm64 guest's PMU: a
//! program's first use opens each counter once, a bind that is not the checks' group opens its
//! own and leaves no kept counter behind, and a kept descriptor the program closed and reused
//! is neither taken nor closed.

use std::os::fd::AsRawFd;

use perf_event_open_sys::bindings as b;
use perfcompat::api::cpc::set::Set;
use perfcompat::backend::perf::model::{Config, Model};
use perfcompat::backend::perf::names::PerfCode;
use perfcompat::backend::perf::PerfBackend;

mod common;
use common::{cpc_set, NoSets};

fn hw(config: u32) -> PerfCode {
    PerfCode::new(b::PERF_TYPE_HARDWARE, u64::from(config))
}

fn cycles() -> PerfCode {
    hw(b::PERF_COUNT_HW_CPU_CYCLES)
}

fn instructions() -> PerfCode {
    hw(b::PERF_COUNT_HW_INSTRUCTIONS)
}

fn stalled() -> PerfCode {
    hw(b::PERF_COUNT_HW_STALLED_CYCLES_FRONTEND)
}

/// The arm64 guest's PMU (6 counters and the cycle counter) and the backend over it, which
/// probes it (opening `cycles`) as `cpc_open` does.
fn arm64() -> (&'static Model, &'static PerfBackend) {
    let m = Model::leak(Config::armv8_pmuv3());
    let be = PerfBackend::with_kernel(m).expect("the model answers the probe");
    (m, Box::leak(Box::new(be)))
}

/// `cpc_bind_curlwp` of `s`, then `n` events of each of `codes` and a sample: the values.
fn bind_and_count(m: &Model, be: &'static PerfBackend, s: &Set, codes: &[PerfCode]) -> Vec<u64> {
    s.bind_curlwp::<NoSets>(be, 1, false, 0).expect("bound");
    for (i, c) in codes.iter().enumerate() {
        m.advance(*c, 1000 * (i as u64 + 1));
    }
    m.tick(1_000_000);
    let mut v = vec![0u64; codes.len()];
    let info = s
        .with_counters(1, |b| b.sample(&mut v))
        .expect("bound")
        .unwrap();
    assert!(info.complete, "{info:?}");
    v
}

/// A first use (`cpc_open`'s probe, two requests checked, the bind): two counters opened, the
/// probe's and the check's, which the bind takes; they count.
#[test]
fn a_first_use_opens_each_counter_once() {
    let (m, be) = arm64();
    assert_eq!(m.opened(), 1, "the probe of the PMU");
    let s = cpc_set(be, &["cycles", "instructions"]);
    assert_eq!(
        m.opened(),
        2,
        "the check of instructions ('cycles' was probed)"
    );
    let v = bind_and_count(m, be, s, &[cycles(), instructions()]);
    assert_eq!(v, [1000, 2000]);
    assert_eq!(m.opened(), 2, "the bind took the kept counters");
    assert_eq!(m.open_events(), 2);
    s.unbind(1).unwrap();
    assert_eq!(m.open_events(), 0, "nothing kept after the unbind");
    // A second set of the same events: its checks were answered already, so its bind opens.
    let s2 = cpc_set(be, &["cycles", "instructions"]);
    assert_eq!(m.opened(), 2);
    assert_eq!(
        bind_and_count(m, be, s2, &[cycles(), instructions()]),
        [1000, 2000]
    );
    assert_eq!(m.opened(), 4);
    s2.unbind(1).unwrap();
    assert_eq!(m.open_events(), 0);
}

/// A set in another order than the checks': its bind opens its own counters and closes the
/// kept ones first (its group holds its own members only).
#[test]
fn a_set_in_another_order_opens_its_own_and_keeps_nothing() {
    let (m, be) = arm64();
    let s = cpc_set(be, &["instructions", "cycles"]);
    assert_eq!(m.opened(), 2);
    assert_eq!(
        m.open_events(),
        2,
        "kept: the probe's cycles, the check's instructions"
    );
    let v = bind_and_count(m, be, s, &[instructions(), cycles()]);
    assert_eq!(v, [1000, 2000]);
    assert_eq!(m.opened(), 4);
    assert_eq!(m.open_events(), 2, "the kept counters were closed");
    s.unbind(1).unwrap();
    assert_eq!(m.open_events(), 0);
}

/// A set whose leader was kept but not its next member: the leader is taken, the kept members
/// leave its group before the set's own member joins it, and the group reads its two members.
#[test]
fn a_kept_leader_is_taken_without_the_kept_members_it_does_not_have() {
    let (m, be) = arm64();
    // Checked, not bound: cycles (probed), instructions, stalled-cycles-frontend are kept.
    let _unbound = cpc_set(be, &["cycles", "instructions"]);
    let s = cpc_set(be, &["cycles", "stalled-cycles-frontend"]);
    assert_eq!(m.opened(), 3);
    assert_eq!(m.open_events(), 3);
    let v = bind_and_count(m, be, s, &[cycles(), stalled()]);
    assert_eq!(v, [1000, 2000]);
    assert_eq!(
        m.opened(),
        4,
        "cycles taken, stalled-cycles-frontend opened again"
    );
    assert_eq!(m.open_events(), 2);
    s.unbind(1).unwrap();
    assert_eq!(m.open_events(), 0);
}

/// A program that closes the kept descriptors and puts its own files at their numbers between
/// the checks and the bind (issue 44): the bind opens its own counters, and neither takes nor
/// closes the program's files.
#[test]
fn kept_descriptors_the_program_reused_are_left_alone() {
    let (m, be) = arm64();
    let s = cpc_set(be, &["cycles", "instructions"]);
    let kept: Vec<i32> = [cycles(), instructions()]
        .iter()
        .flat_map(|c| m.fds(*c))
        .collect();
    assert_eq!(kept.len(), 2, "{kept:?}");
    let mut pipes = Vec::new();
    for &fd in &kept {
        let (r, w) = std::io::pipe().unwrap();
        // SAFETY: the test's own descriptors: dup2 closes the kept counter and puts the
        // pipe's read end at its number.
        assert_eq!(unsafe { libc::dup2(r.as_raw_fd(), fd) }, fd);
        pipes.push((r, w));
    }
    let v = bind_and_count(m, be, s, &[cycles(), instructions()]);
    assert_eq!(v, [1000, 2000]);
    assert_eq!(m.opened(), 4, "the bind opened its own");
    for &fd in &kept {
        // SAFETY: fstat of a descriptor number into a local struct.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        assert_eq!(unsafe { libc::fstat(fd, &mut st) }, 0, "fd {fd} was closed");
        assert_eq!(
            st.st_mode & libc::S_IFMT,
            libc::S_IFIFO,
            "fd {fd} is not the pipe"
        );
    }
    s.unbind(1).unwrap();
    for &fd in &kept {
        // SAFETY: the test's own dup2'd descriptors, closed once.
        unsafe { libc::close(fd) };
    }
}

/// Counters kept for a set that is never bound are closed when the program closes its handle
/// (`cpc_close` calls `release_kept`), and by a bind refused before it opens anything.
#[test]
fn kept_counters_are_closed_at_release_and_at_a_refused_bind() {
    use perfcompat::backend::Backend;
    let (m, be) = arm64();
    let _unbound = cpc_set(be, &["cycles", "instructions"]);
    assert_eq!(m.open_events(), 2);
    be.release_kept();
    assert_eq!(m.open_events(), 0);
    // Eight hardware requests on seven counters (a new process's backend: the checks above
    // were answered once for all): refused at bind, before the open.
    let (m, be) = arm64();
    let mut names = vec!["instructions"; 6];
    names.extend(["cycles", "cycles"]);
    let s = cpc_set(be, &names);
    assert_eq!(m.open_events(), 2, "kept by the checks");
    assert!(s.bind_curlwp::<NoSets>(be, 1, false, 0).is_err());
    assert_eq!(m.open_events(), 0);
}

/// Kept descriptors the program closed (`close_range`, as daemons do) and did not reuse: the
/// bind opens its own counters, and closes nothing of the program's.
#[test]
fn kept_descriptors_the_program_closed_are_opened_again() {
    let (m, be) = arm64();
    let s = cpc_set(be, &["cycles", "instructions"]);
    let kept: Vec<i32> = [cycles(), instructions()]
        .iter()
        .flat_map(|c| m.fds(*c))
        .collect();
    assert_eq!(kept.len(), 2, "{kept:?}");
    for &fd in &kept {
        // SAFETY: the kept counters' numbers, closed by "the program".
        assert_eq!(unsafe { libc::close(fd) }, 0);
    }
    let v = bind_and_count(m, be, s, &[cycles(), instructions()]);
    assert_eq!(v, [1000, 2000]);
    assert_eq!(m.opened(), 4, "the bind opened its own");
    assert_eq!(m.open_events(), 2);
    s.unbind(1).unwrap();
    assert_eq!(m.open_events(), 0);
}
