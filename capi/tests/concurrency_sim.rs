//! Concurrency on the emulated R10000 (`sim:r10000`), where counts are exact: 64 threads each
//! binding, sampling, restarting and unbinding their own libcpc sets at once; libperfex from
//! 64 threads; and the engine's sequence counter read from many threads while the owner of a
//! binding advances it (no torn sample). `.ci/tsan` runs this file under ThreadSanitizer.

use std::ffi::{c_int, c_longlong, CStr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex, MutexGuard, Once};

use perfcompat::base::set::{CounterSet, Request, RequestFlags, Target};
use perfcompat_capi::cpc::*;
use perfcompat_capi::perfex::{read_counters, start_counters};
use perfcompat_capi::sim::perfcompat_sim_advance;

mod common;

const THREADS: usize = 64;

/// One test at a time (they share the process's descriptors); the first chooses the backend.
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    static ENV: Once = Once::new();
    let g = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    ENV.call_once(|| {
        std::env::set_var("PERFCOMPAT_BACKEND", "sim:r10000");
    });
    common::fail_fast("concurrency_sim", 600);
    g
}

fn errno() -> c_int {
    // SAFETY: this thread's errno.
    unsafe { *libc::__errno_location() }
}

fn advance(event: &CStr, n: u64) {
    // SAFETY: a valid name.
    assert!(unsafe { perfcompat_sim_advance(event.as_ptr(), n) } >= 0);
}

fn get(cpc: *mut cpc_t, buf: *mut cpc_buf_t, i: c_int) -> u64 {
    let mut v = 0;
    // SAFETY: a valid out-pointer.
    assert_eq!(unsafe { cpc_buf_get(cpc, buf, i, &mut v) }, 0);
    v
}

/// 64 threads, started on a barrier, each with its own `cpc_t`: for 50 rounds, make a set of
/// `cycles` and `issued_loads` (preset 1000 on the loads), bind it, advance both events by
/// known amounts from the thread (counts are exact: preset + what this thread advanced, never
/// another thread's), `cpc_request_preset` + `cpc_set_restart` (back to the new preset
/// exactly), unbind, destroy. No descriptor is involved on the emulation; every call's result
/// is checked.
#[test]
fn sixty_four_threads_count_exactly_on_their_own_emulated_sets() {
    let _s = serial();
    const ROUNDS: u64 = 50;
    let ready = Arc::new(Barrier::new(THREADS));
    let calls = Arc::new(AtomicU64::new(0));
    let threads: Vec<_> = (0..THREADS as u64)
        .map(|t| {
            let (ready, calls) = (ready.clone(), calls.clone());
            std::thread::spawn(move || {
                let cpc = cpc_open(CPC_VER_CURRENT);
                assert!(!cpc.is_null());
                let mut n = 1u64;
                ready.wait();
                for round in 0..ROUNDS {
                    let set = cpc_set_create(cpc);
                    for (e, preset) in [(c"cycles", 0u64), (c"issued_loads", 1000)] {
                        // SAFETY: a valid name, no attributes.
                        let r = unsafe {
                            cpc_set_add_request(
                                cpc,
                                set,
                                e.as_ptr(),
                                preset,
                                CPC_COUNT_USER,
                                0,
                                std::ptr::null(),
                            )
                        };
                        assert!(r >= 0, "errno {}", errno());
                    }
                    let buf = cpc_buf_create(cpc, set);
                    assert!(!buf.is_null());
                    assert_eq!(cpc_bind_curlwp(cpc, set, 0), 0, "errno {}", errno());
                    let (mut cycles, mut loads) = (0, 0);
                    for k in 0..10 {
                        let (c, l) = (t + k + round, 3 * k + 1);
                        advance(c"cycles", c);
                        advance(c"issued_loads", l);
                        (cycles, loads) = (cycles + c, loads + l);
                        assert_eq!(cpc_set_sample(cpc, set, buf), 0);
                        assert_eq!(get(cpc, buf, 0), cycles, "thread {t}");
                        assert_eq!(get(cpc, buf, 1), 1000 + loads, "thread {t}");
                        n += 5;
                    }
                    assert_eq!(cpc_request_preset(cpc, 1, t), 0);
                    assert_eq!(cpc_set_restart(cpc, set), 0);
                    advance(c"issued_loads", 7);
                    assert_eq!(cpc_set_sample(cpc, set, buf), 0);
                    assert_eq!((get(cpc, buf, 0), get(cpc, buf, 1)), (0, t + 7));
                    assert_eq!(cpc_unbind(cpc, set), 0);
                    // Advances after the unbind count nowhere.
                    advance(c"issued_loads", 7);
                    assert_eq!(cpc_set_sample(cpc, set, buf), -1);
                    assert_eq!(errno(), libc::EINVAL);
                    // SAFETY: ours, unused elsewhere.
                    unsafe {
                        assert_eq!(cpc_buf_destroy(cpc, buf), 0);
                        assert_eq!(cpc_set_destroy(cpc, set), 0);
                    }
                    n += 16;
                }
                // SAFETY: ours, unused elsewhere.
                assert_eq!(unsafe { cpc_close(cpc) }, 0);
                calls.fetch_add(n + 1, Ordering::Relaxed);
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    eprintln!(
        "concurrency_sim: {THREADS} threads x {ROUNDS} rounds: {} calls",
        calls.load(Ordering::Relaxed)
    );
}

/// libperfex from 64 threads at once on the emulated R10000: per-thread counts are exact
/// (each thread's `read_counters` is what it advanced since its own `start_counters`).
#[test]
fn start_and_read_counters_count_exactly_per_thread_from_sixty_four_threads() {
    let _s = serial();
    let ready = Arc::new(Barrier::new(THREADS));
    let threads: Vec<_> = (0..THREADS as i64)
        .map(|t| {
            let ready = ready.clone();
            std::thread::spawn(move || {
                ready.wait();
                for i in 0..40i64 {
                    let g = start_counters(0, 18);
                    assert!(g > 0, "errno {}", errno());
                    advance(c"0", (t * 100 + i) as u64);
                    advance(c"18", (i + 1) as u64);
                    let (mut c0, mut c1): (c_longlong, c_longlong) = (-1, -1);
                    // SAFETY: valid out-pointers.
                    assert_eq!(unsafe { read_counters(0, &mut c0, 18, &mut c1) }, g);
                    assert_eq!((c0, c1), (t * 100 + i, i + 1), "thread {t}");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

/// The engine's sequence counter across threads: one thread owns a binding with `cycles` on
/// both R10000 counters and advances it one event at a time (each advance moves both in one
/// write); 8 other threads sample the same binding meanwhile. Every sample has both values
/// equal (no torn read), never behind the reader's previous sample, and the last is exact.
#[test]
fn samples_from_other_threads_never_see_half_an_advance() {
    let _s = serial();
    const ADVANCES: u64 = 20_000;
    const READERS: usize = 8;
    let backend = perfcompat::backend::global().unwrap();
    let set = CounterSet::new()
        .with(
            Request::new("cycles")
                .on_counter(0)
                .flags(RequestFlags::USER),
        )
        .unwrap()
        .with(
            Request::new("cycles")
                .on_counter(1)
                .flags(RequestFlags::USER),
        )
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let done = Arc::new(AtomicBool::new(false));
    let owner = {
        let done = done.clone();
        std::thread::spawn(move || {
            let b = Arc::new(perfcompat::bind_with(backend, &set, Target::CurrentThread).unwrap());
            tx.send(b.clone()).unwrap();
            for _ in 0..ADVANCES {
                advance(c"cycles", 1);
            }
            done.store(true, Ordering::SeqCst);
            b
        })
    };
    let b = rx.recv().unwrap();
    let readers: Vec<_> = (0..READERS)
        .map(|_| {
            let (b, done) = (b.clone(), done.clone());
            std::thread::spawn(move || {
                let (mut last, mut n) = (0, 0u64);
                loop {
                    let finished = done.load(Ordering::SeqCst);
                    let mut v = [0u64; 2];
                    b.sample(&mut v).unwrap();
                    assert_eq!(v[0], v[1], "a torn sample");
                    assert!(v[0] >= last && v[0] <= ADVANCES, "{last} then {v:?}");
                    last = v[0];
                    n += 1;
                    if finished {
                        assert_eq!(last, ADVANCES);
                        return n;
                    }
                }
            })
        })
        .collect();
    let samples: u64 = readers.into_iter().map(|r| r.join().unwrap()).sum();
    drop(b);
    drop(owner.join().unwrap());
    eprintln!("concurrency_sim: {ADVANCES} advances, {samples} samples from {READERS} threads");
}

/// A binding's owner thread exits while another thread still holds the binding: samples keep
/// working (the counts frozen where the owner left them) and dropping it later is safe.
#[test]
fn a_binding_outlives_its_owner_thread() {
    let _s = serial();
    let backend = perfcompat::backend::global().unwrap();
    let set = CounterSet::new()
        .with(Request::new("cycles").flags(RequestFlags::USER))
        .unwrap();
    let bindings: Vec<_> = (0..THREADS as u64)
        .map(|t| {
            let set = set.clone();
            std::thread::spawn(move || {
                let b = perfcompat::bind_with(backend, &set, Target::CurrentThread).unwrap();
                advance(c"cycles", t + 1);
                b
            })
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|h| h.join().unwrap())
        .collect();
    let sampled = Arc::new(AtomicU64::new(0));
    let bindings = Arc::new(bindings);
    let readers: Vec<_> = (0..4)
        .map(|_| {
            let (bindings, sampled) = (bindings.clone(), sampled.clone());
            std::thread::spawn(move || {
                for (t, b) in bindings.iter().enumerate() {
                    let mut v = [0u64; 1];
                    b.sample(&mut v).unwrap();
                    assert_eq!(v[0], t as u64 + 1);
                    sampled.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for r in readers {
        r.join().unwrap();
    }
    assert_eq!(sampled.load(Ordering::Relaxed), 4 * THREADS as u64);
}
