//! Issue 48: the overflow watcher, which the first notifying binding of a process starts, has
//! run by the time `cpc_bind_curlwp` returns. A new thread first runs when the scheduler picks
//! it, on a busy or single CPU at the next timer tick: its start and its first look used to
//! fall inside whatever the binding thread counted next (in the arm64 guest's overflow row,
//! the measured loop: some 770 instructions of each overflow, and 2,000 in one run in ten).
//! Here the process is held to one CPU, where the binding thread goes on running after it
//! creates the watcher unless it waits for it: right after the bind, the watcher's
//! `/proc/self/task/<tid>/schedstat` must show time on the CPU.

use std::ptr::null_mut;

use perfcompat_capi::cpc::*;

/// The watcher's thread id: the task of this process named `perfcompat-ovf`.
fn watcher_tid() -> Option<String> {
    std::fs::read_dir("/proc/self/task").ok()?.find_map(|e| {
        let tid = e.ok()?.file_name().into_string().ok()?;
        let comm = std::fs::read_to_string(format!("/proc/self/task/{tid}/comm")).ok()?;
        (comm.trim() == "perfcompat-ovf").then_some(tid)
    })
}

#[test]
fn the_watcher_has_run_when_the_first_notifying_bind_returns() {
    std::env::set_var("PERFCOMPAT_BACKEND", "perf");
    // SAFETY: plain libc calls on a local set; the watcher inherits this thread's mask.
    unsafe {
        let cpu = libc::sched_getcpu();
        assert!(cpu >= 0, "sched_getcpu");
        let mut one: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu as usize, &mut one);
        assert_eq!(
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &one),
            0,
            "held to one CPU"
        );
    }
    let cpc = cpc_open(CPC_VER_CURRENT);
    assert!(!cpc.is_null());
    let set = cpc_set_create(cpc);
    // SAFETY: a NUL-terminated name and no attributes.
    let r = unsafe {
        cpc_set_add_request(
            cpc,
            set,
            c"page-faults".as_ptr(),
            u64::MAX - 1_000_000,
            CPC_COUNT_USER | CPC_OVF_NOTIFY_EMT,
            0,
            null_mut(),
        )
    };
    assert_eq!(r, 0);
    assert!(
        watcher_tid().is_none(),
        "no watcher before the first notifying bind"
    );
    assert_eq!(cpc_bind_curlwp(cpc, set, 0), 0);
    let tid = watcher_tid().expect("the watcher started by the bind");
    let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat"))
        .expect("the watcher's schedstat");
    let on_cpu_ns: u64 = stat
        .split_whitespace()
        .next()
        .and_then(|v| v.parse().ok())
        .expect("schedstat's first field");
    assert!(
        on_cpu_ns > 0,
        "the watcher has not run yet when the bind returns (schedstat {})",
        stat.trim()
    );
    assert_eq!(cpc_unbind(cpc, set), 0);
    // SAFETY: a live handle, not used afterwards.
    unsafe { cpc_close(cpc) };
}
