//! The timed loops: the pointer chase, the dependent-add clock loop and the branch loop
//! (x86-64 and arm64 assembly; elsewhere a Rust chase, and no clock or branch loop, whose
//! figures then come from the fallbacks with a note), and the measurements built on them.

use std::time::Instant;

use super::buffer::{page_size, Buffer};
use super::cycles::{grouped_cycle, random_cycle, Rng};
use super::{Measured, Plan};

// The instructions that differ between the x86-64 and arm64 loops: `{p} = *{p}`, `{x} += 1`,
// and "`{n} -= 1`; back to label 2 unless it reached 0".
#[cfg(target_arch = "x86_64")]
macro_rules! load_link {
    () => {
        "mov {p}, qword ptr [{p}]"
    };
}
#[cfg(target_arch = "aarch64")]
macro_rules! load_link {
    () => {
        "ldr {p}, [{p}]"
    };
}
#[cfg(target_arch = "x86_64")]
macro_rules! add_one {
    () => {
        "add {x}, 1"
    };
}
#[cfg(target_arch = "aarch64")]
macro_rules! add_one {
    () => {
        "add {x}, {x}, #1"
    };
}
#[cfg(target_arch = "x86_64")]
macro_rules! count_down {
    () => {
        "dec {n}\njnz 2b"
    };
}
#[cfg(target_arch = "aarch64")]
macro_rules! count_down {
    () => {
        "subs {n}, {n}, #1\nb.ne 2b"
    };
}

// The branch loop's step: `{x}` ^= `{x}` << 13, >> 7, << 17 (through `{t}`); then one add and
// one taken jump whichever way the conditional jump on `{x} & {mask}` goes: `{a}` += 1 when
// it is not zero, `{b}` += 1 when it is.
#[cfg(target_arch = "x86_64")]
macro_rules! xorshift {
    () => {
        "mov {t}, {x}\nshl {t}, 13\nxor {x}, {t}\nmov {t}, {x}\nshr {t}, 7\nxor {x}, {t}\n\
         mov {t}, {x}\nshl {t}, 17\nxor {x}, {t}"
    };
}
#[cfg(target_arch = "aarch64")]
macro_rules! xorshift {
    () => {
        "lsl {t}, {x}, #13\neor {x}, {x}, {t}\nlsr {t}, {x}, #7\neor {x}, {x}, {t}\n\
         lsl {t}, {x}, #17\neor {x}, {x}, {t}"
    };
}
#[cfg(target_arch = "x86_64")]
macro_rules! branch_on_mask {
    () => {
        "test {x}, {mask}\njz 3f\nadd {a}, 1\njmp 4f\n3:\nadd {b}, 1\n4:"
    };
}
#[cfg(target_arch = "aarch64")]
macro_rules! branch_on_mask {
    () => {
        "tst {x}, {mask}\nb.eq 3f\nadd {a}, {a}, #1\nb 4f\n3:\nadd {b}, {b}, #1\n4:"
    };
}

/// Loads [`chase`] really does for a request of `loads`.
fn rounded_loads(loads: usize) -> usize {
    loads.div_ceil(8).max(1) * 8
}

/// Follow [`rounded_loads`]`(loads)` links from `p`; returns where the chase stopped. In
/// assembly on x86-64 and arm64, so it runs at full speed in unoptimised builds too.
///
/// # Safety
/// `p` and every address reachable from it must be a readable node holding the address of
/// another such node.
#[inline(never)]
pub(super) unsafe fn chase(mut p: *const usize, loads: usize) -> *const usize {
    let n = loads.div_ceil(8).max(1);
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    // SAFETY: the caller's contract; the loop only reads through the chain.
    unsafe {
        std::arch::asm!(
            "2:",
            ".rept 8",
            load_link!(),
            ".endr",
            count_down!(),
            p = inout(reg) p,
            n = inout(reg) n => _,
            options(nostack, readonly),
        );
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        // Plain dereferences, unrolled: few instructions besides the loads even unoptimised.
        let mut n = n;
        while n > 0 {
            // SAFETY: the caller's contract.
            unsafe {
                p = *p as *const usize;
                p = *p as *const usize;
                p = *p as *const usize;
                p = *p as *const usize;
                p = *p as *const usize;
                p = *p as *const usize;
                p = *p as *const usize;
                p = *p as *const usize;
            }
            n -= 1;
        }
    }
    p
}

/// The fastest of `reps` timed runs of `f`, in ns per `ops`.
fn best_ns(reps: usize, ops: f64, mut f: impl FnMut()) -> f64 {
    (0..reps.max(1))
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64() * 1e9 / ops
        })
        .fold(f64::INFINITY, f64::min)
}

/// Best time of a chase starting at `start` (after one warm-up pass over `nodes`), ns/load.
///
/// # Safety
/// As for [`chase`].
unsafe fn time_chase(start: *const usize, nodes: usize, loads: usize, reps: usize) -> f64 {
    // SAFETY: the caller's contract, for every call below.
    let mut p = unsafe { chase(start, nodes.min(loads)) };
    let n = rounded_loads(loads);
    let ns = best_ns(reps, n as f64, || p = unsafe { chase(p, n) });
    std::hint::black_box(p);
    ns
}

/// ns per dependent load over a `bytes` buffer (one node per line), and whether it was backed
/// by huge pages.
pub(super) fn chase_latency(
    bytes: usize,
    line: usize,
    loads: usize,
    reps: usize,
) -> std::result::Result<(f64, bool), String> {
    let buf = Buffer::new(bytes, true)?;
    let nodes = bytes / line;
    let mut rng = Rng(0x5eed ^ bytes as u64);
    let huge = buf.huge_fraction() >= 0.9;
    let next = if huge {
        random_cycle(nodes, &mut rng)
    } else {
        grouped_cycle(nodes, (page_size() / line).max(1), &mut rng)
    };
    let start = buf.link(&next, |i| i * line);
    drop(next);
    // SAFETY: every node of the buffer links to another node of it.
    let ns = unsafe { time_chase(start, nodes, loads, reps) };
    Ok((ns, huge))
}

/// The two chases of the TLB measurement.
pub(super) struct TlbRun {
    pub(super) pages: usize,
    pub(super) sparse_ns: f64,
    pub(super) dense_ns: f64,
}

/// Pages of the TLB chase: twice the reach of the largest second-level data TLBs we know
/// (4096 entries) at 4 KiB pages.
const TLB_PAGES: usize = 8192;

pub(super) fn measure_tlb(line: usize, plan: &Plan) -> std::result::Result<TlbRun, String> {
    tlb_chases(line, TLB_PAGES, plan.tlb_passes * TLB_PAGES, plan.reps)
}

fn tlb_chases(
    line: usize,
    pages: usize,
    loads: usize,
    reps: usize,
) -> std::result::Result<TlbRun, String> {
    let page = page_size();
    let per_page = (page / line).max(1);
    let mut rng = Rng(0x71b);
    let next = random_cycle(pages, &mut rng);

    let sparse = Buffer::new(pages * page, false)?;
    if sparse.huge_fraction() > 0.0 {
        return Err("the kernel backed the MADV_NOHUGEPAGE buffer with huge pages".into());
    }
    // Page i holds its node in line i mod (lines per page): the nodes spread over all sets.
    let start = sparse.link(&next, |i| i * page + (i % per_page) * line);
    // SAFETY: every node links to another node of the buffer.
    let sparse_ns = unsafe { time_chase(start, pages, loads, reps) };
    drop(sparse);

    let dense = Buffer::new(pages * line, true)?;
    let next = if dense.huge_fraction() >= 0.9 {
        next
    } else {
        grouped_cycle(pages, per_page, &mut rng)
    };
    let start = dense.link(&next, |i| i * line);
    // SAFETY: as above.
    let dense_ns = unsafe { time_chase(start, pages, loads, reps) };
    Ok(TlbRun {
        pages,
        sparse_ns,
        dense_ns,
    })
}

/// `iters` iterations of 64 dependent one-cycle additions (the loop counter and its branch run
/// beside the chain); `None` where there is no such loop (neither x86-64 nor arm64).
#[inline(never)]
fn add_chain(iters: u64) -> Option<u64> {
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    {
        let mut x = 0u64;
        // SAFETY: register arithmetic only.
        unsafe {
            std::arch::asm!(
                "2:",
                ".rept 64",
                add_one!(),
                ".endr",
                count_down!(),
                x = inout(reg) x,
                n = inout(reg) iters.max(1) => _,
                options(nostack, nomem),
            );
        }
        Some(x)
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        let _ = iters;
        None
    }
}

pub(super) fn measure_clock(plan: &Plan) -> Measured {
    // The first run is a warm-up: it lets the clock ramp up.
    if std::hint::black_box(add_chain(plan.clock_iters)).is_none() {
        return Err(format!(
            "no cycle-timed loop on {} (the nominal clock is used)",
            std::env::consts::ARCH
        ));
    }
    let cycles = plan.clock_iters.max(1) as f64 * 64.0;
    let ns = best_ns(plan.clock_reps, cycles, || {
        std::hint::black_box(add_chain(plan.clock_iters));
    });
    Ok(1000.0 / ns)
}

/// The branch loops' times.
pub(super) struct BranchRun {
    pub(super) random_ns: f64,
    pub(super) predictable_ns: f64,
    /// Share of the rarer direction in the random loop: its mispredict rate.
    pub(super) rate: f64,
}

/// `iters` iterations of: draw a xorshift64 number, branch on `x & mask` (one add and one taken
/// jump either way). Returns how often each way was taken; `None` where there is no such loop
/// (neither x86-64 nor arm64).
#[inline(never)]
fn branch_loop(iters: u64, mask: u64) -> Option<(u64, u64)> {
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    {
        let (mut a, mut b) = (0u64, 0u64);
        // SAFETY: register arithmetic and local jumps only.
        unsafe {
            std::arch::asm!(
                "2:",
                xorshift!(),
                branch_on_mask!(),
                count_down!(),
                x = inout(reg) 0x2545_f491_4f6c_dd1du64 => _,
                n = inout(reg) iters.max(1) => _,
                a = inout(reg) a,
                b = inout(reg) b,
                t = out(reg) _,
                mask = in(reg) mask,
                options(nostack, nomem),
            );
        }
        Some((a, b))
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        let _ = (iters, mask);
        None
    }
}

pub(super) fn measure_branch(plan: &Plan) -> std::result::Result<BranchRun, String> {
    let iters = plan.branch_iters;
    let Some((a, b)) = branch_loop(iters, 1 << 31) else {
        return Err(format!(
            "no branch loop with a guaranteed conditional jump on {}",
            std::env::consts::ARCH
        ));
    };
    let rate = a.min(b) as f64 / (a + b) as f64;
    if rate < 0.1 {
        return Err(format!(
            "the random branch went one way {:.0}% of the time",
            100.0 * (1.0 - rate)
        ));
    }
    let (mut random_ns, mut predictable_ns) = (f64::INFINITY, f64::INFINITY);
    // Interleaved, so a change of clock or load affects both alike.
    for _ in 0..plan.reps {
        predictable_ns = predictable_ns.min(best_ns(1, iters as f64, || {
            std::hint::black_box(branch_loop(iters, 0));
        }));
        random_ns = random_ns.min(best_ns(1, iters as f64, || {
            std::hint::black_box(branch_loop(iters, 1 << 31));
        }));
    }
    Ok(BranchRun {
        random_ns,
        predictable_ns,
        rate,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chase_visits_the_linked_nodes() {
        let buf = Buffer::new(64 * 1024, true).unwrap();
        let next = random_cycle(1024, &mut Rng(3));
        let start = buf.link(&next, |i| i * 64);
        // SAFETY: the buffer is linked.
        let end = unsafe { chase(start, 8) };
        let mut i = 0;
        for _ in 0..8 {
            i = next[i] as usize;
        }
        assert_eq!(end as usize, buf.ptr as usize + i * 64);
    }

    /// Where there is a clock loop (x86-64, arm64) it makes exactly 64 additions an iteration.
    #[test]
    fn add_chain_adds_64_an_iteration() {
        let want = cfg!(any(target_arch = "x86_64", target_arch = "aarch64")).then_some(64 * 1000);
        assert_eq!(add_chain(1000), want);
    }

    /// Where there is a branch loop, every iteration goes one way or the other: a zero mask
    /// always the same way, bit 31 of the random draws both ways about equally.
    #[test]
    fn branch_loop_counts_both_ways() {
        if !cfg!(any(target_arch = "x86_64", target_arch = "aarch64")) {
            assert_eq!(branch_loop(100, 0), None);
            return;
        }
        assert_eq!(branch_loop(10_000, 0), Some((0, 10_000)));
        let (a, b) = branch_loop(10_000, 1 << 31).expect("a branch loop");
        assert_eq!(a + b, 10_000);
        assert!((4000..=6000).contains(&a), "{a} of 10000 one way");
    }
}
