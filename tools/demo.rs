//! `perfcompat-demo`: open a counter set on the chosen backend, run a small workload, print the
//! counts.
//!
//! ```text
//! perfcompat-demo [-e EVENT]... [--pages N] [--iterations N]
//! ```
//! The backend comes from `PERFCOMPAT_BACKEND` (default `auto`, the Linux perf backend). On an
//! emulated backend (`sim:<model>`) the workload reports what it did through the emulation's
//! test hook, so the counts are exact.

use std::process::ExitCode;

use perfcompat::backend::{self, sim};
use perfcompat::{bind, CounterSet, Request, Target};

fn usage() -> ExitCode {
    eprintln!("usage: perfcompat-demo [-e EVENT]... [--pages N] [--iterations N]");
    ExitCode::from(2)
}

/// Touch `pages` fresh pages and run `iters` iterations of integer work; returns a checksum.
fn workload(pages: usize, iters: u64) -> u64 {
    let mut v = vec![0u8; pages * 4096];
    for i in 0..pages {
        // SAFETY: in bounds; volatile so the touch is not optimised away.
        unsafe { std::ptr::write_volatile(v.as_mut_ptr().add(i * 4096), 1) };
    }
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for i in 0..iters {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x = x.wrapping_add(i);
    }
    std::hint::black_box(&v);
    x
}

fn main() -> ExitCode {
    let mut events: Vec<String> = Vec::new();
    let mut pages = 4096usize;
    let mut iters = 50_000_000u64;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "-e" => match args.next() {
                Some(e) => events.push(e),
                None => return usage(),
            },
            "--pages" => match args.next().and_then(|v| v.parse().ok()) {
                Some(n) => pages = n,
                None => return usage(),
            },
            "--iterations" => match args.next().and_then(|v| v.parse().ok()) {
                Some(n) => iters = n,
                None => return usage(),
            },
            "-h" | "--help" => {
                usage();
                return ExitCode::SUCCESS;
            }
            _ => return usage(),
        }
    }
    let be = match backend::global() {
        Ok(b) => b,
        Err(e) => {
            eprintln!("perfcompat-demo: {e}");
            return ExitCode::FAILURE;
        }
    };
    let info = be.info();
    let is_sim = info.kind.is_emulated();
    if events.is_empty() {
        events = if is_sim {
            vec!["PAPI_tot_cyc".into(), "PAPI_tot_ins".into()]
        } else {
            vec!["task-clock".into(), "page-faults".into(), "cycles".into()]
        };
    }
    let mut set = CounterSet::new();
    for e in &events {
        if let Err(err) = set.add(Request::new(e.clone())) {
            eprintln!("perfcompat-demo: {err}");
            return ExitCode::FAILURE;
        }
    }
    let binding = match bind(&set, Target::CurrentThread) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("perfcompat-demo: {e}");
            return ExitCode::FAILURE;
        }
    };
    let sum = workload(pages, iters);
    if is_sim {
        // Report the work to the emulated PMU: about 3 cycles and 4 instructions per iteration.
        for e in &events {
            let n = if e.contains("cyc") {
                3 * iters
            } else {
                4 * iters
            };
            let _ = sim::advance(e, n);
        }
    }
    let mut v = vec![0u64; events.len()];
    let s = match binding.sample(&mut v) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("perfcompat-demo: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!("backend:  {} ({})", info.kind, info.description);
    for n in &info.notes {
        println!("note:     {n}");
    }
    println!("workload: {pages} pages touched, {iters} loop iterations (checksum {sum:x})");
    let w = events.iter().map(|e| e.len()).max().unwrap_or(5).max(5);
    println!("{:<w$}  {:>20}", "event", "count");
    for (e, c) in events.iter().zip(&v) {
        println!("{e:<w$}  {c:>20}");
    }
    println!(
        "generation {} ({})",
        s.generation,
        if s.complete {
            "counted the whole interval"
        } else {
            "NOT counted the whole interval: counts are partial"
        }
    );
    ExitCode::SUCCESS
}
