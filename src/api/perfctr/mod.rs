//! perfctr's virtual per-thread counters (`vperfctr_*`, issue 47) on the engine.
//!
//! A thread has at most one vperfctr state, as a task had under perfctr's driver: every
//! `vperfctr_open` on the thread reaches the same one, and a handle is only a way to it.
//! [`control()`] checks the control data for the backend's CPU family ([`control::requests`])
//! and binds the counters to the calling thread (not inherited by new threads or children, as
//! perfctr 2.6's per-task counters were not: a `fork` child starts with none); counter `i` is the binding's request `i`, so its
//! 64-bit sum is the request's total ([`crate::engine::BoundSet::sample_totals`]), plus what
//! earlier controls with `preserve` carried. An i-mode counter notifies: at its overflow the
//! engine freezes the whole set (a-mode counters and the TSC stop too, as perfctr suspended
//! the state until `vperfctr_iresume`), and the hook here queues `si_signo` to the thread with
//! `si_code` [`SI_PMC_OVF`] and the overflowed counters' mask (bit `i` = counter `i`) in the
//! first `int` of the siginfo's union, perfctr's `si_pmc_ovf_mask`. [`iresume`] reloads the
//! overflowed counters from their `ireset` and resumes everything.
//!
//! The virtual TSC ([`tsc_now`]): on an emulated PMU, the thread's emulated cycles
//! ([`crate::backend::sim::thread_tsc`]); on the perf backend, the thread's CPU time at the
//! nominal clock (`CLOCK_THREAD_CPUTIME_ID`, nanoseconds times `cpu_khz` / 10^6). It runs while
//! the counters do: from the control to the stop, the unlink or an overflow's freeze, and again
//! from `vperfctr_iresume`.
//!
//! Another thread's counters (`rvperfctr_*`) are [`remote`]'s, whole CPUs' (`gperfctr_*`)
//! [`global`]'s: both hold their state in their handle, not in a thread.
//!
//! Everything the overflow hook and the calls a signal handler makes (`vperfctr_iresume`,
//! `vperfctr_read_*`) touch is in [`Cell`]s of the thread's own state: no lock, no allocation.

pub mod control;
pub mod global;
mod p4;
pub mod remote;

use std::cell::{Cell, RefCell};
use std::ffi::c_int;

use crate::backend::{self, Backend, BackendKind};
use crate::base::error::{Error, Result};
use crate::base::set::{CounterSet, Target};
use crate::engine::{self, Binding, OverflowEvent};

pub use control::{CpuControl, Family, MAX_CTRS};

/// `si_code` of the overflow signal: `'P'`, as perfctr's header defines it for user space.
pub const SI_PMC_OVF: c_int = b'P' as c_int;

/// `user_data` of the bindings this layer makes: the hook ignores others.
const TAG: usize = 0x0bad_c0de_0047;

/// `struct vperfctr_control`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Control {
    /// The overflow signal (needed when there are i-mode counters).
    pub si_signo: i32,
    /// The counters.
    pub cpu: CpuControl,
    /// Non-zero: keep the sums (and the TSC's) of the earlier control; zero: start from 0.
    pub preserve: u32,
    /// [`CLOEXEC`] or 0.
    pub flags: u32,
}

/// `VPERFCTR_CONTROL_CLOEXEC`: the counters end at an `exec` (always so here: a binding does
/// not survive `execve`).
pub const CLOEXEC: u32 = 1;

/// `struct perfctr_sum_ctrs`: the TSC's and each counter's 64-bit sum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Sums {
    /// The virtual TSC.
    pub tsc: u64,
    /// Counter `i`'s events.
    pub pmc: [u64; MAX_CTRS],
}

/// The calling thread's state: the part the overflow path touches, in cells.
struct Fast {
    /// The running binding's id (0: none).
    binding: Cell<u64>,
    /// The overflow signal.
    signo: Cell<i32>,
    /// Sums carried from earlier controls and bindings.
    base: [Cell<u64>; MAX_CTRS],
    /// The TSC: on, running, its start and sum.
    tsc_on: Cell<bool>,
    tsc_running: Cell<bool>,
    tsc_start: Cell<u64>,
    tsc_sum: Cell<u64>,
}

/// The rest: the binding itself and the control, for the calls a program makes outside its
/// handlers.
#[derive(Default)]
struct Slow {
    binding: Option<Binding>,
    control: Control,
}

thread_local! {
    static FAST: Fast = const {
        Fast {
            binding: Cell::new(0),
            signo: Cell::new(0),
            base: [const { Cell::new(0) }; MAX_CTRS],
            tsc_on: Cell::new(false),
            tsc_running: Cell::new(false),
            tsc_start: Cell::new(0),
            tsc_sum: Cell::new(0),
        }
    };
    static SLOW: RefCell<Slow> = RefCell::new(Slow::default());
}

/// The backend's kind (the process's backend, `PERFCOMPAT_BACKEND`).
fn backend() -> Result<&'static dyn Backend> {
    backend::global()
}

/// What `vperfctr_info` reports: `struct perfctr_info`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Info {
    /// `PERFCTR_ABI_VERSION` ([`ABI_VERSION`] when this library filled it).
    pub abi_version: u32,
    /// The driver's version, NUL-terminated within its 32 bytes when this library filled it
    /// ([`DRIVER_VERSION`]); a program's own may not be (see [`info_text`]).
    pub driver_version: [u8; 32],
    /// perfctr's `cpu_type` number (see the header's `PERFCTR_*` types).
    pub cpu_type: u32,
    /// `PERFCTR_FEATURE_*` bits.
    pub features: u32,
    /// The TSC's clock in kHz.
    pub cpu_khz: u32,
    /// CPU cycles per TSC tick.
    pub tsc_to_cpu_mult: u32,
}

/// `PERFCTR_ABI_VERSION` as this library reports it (perfcompat's own number, not perfctr's).
pub const ABI_VERSION: u32 = 0x0500;

/// `perfctr_info.driver_version` as this library reports it.
pub const DRIVER_VERSION: &str = concat!("perfcompat ", env!("CARGO_PKG_VERSION"));

/// `PERFCTR_FEATURE_RDPMC`: user-space counter reads.
pub const FEATURE_RDPMC: u32 = 0x01;
/// `PERFCTR_FEATURE_RDTSC`: the TSC.
pub const FEATURE_RDTSC: u32 = 0x02;
/// `PERFCTR_FEATURE_PCINT`: overflow interrupts.
pub const FEATURE_PCINT: u32 = 0x04;

/// The `cpu_type` numbers this library reports (the x86 ones are perfctr's; the PowerPC ones
/// are perfctr's plus 0x100 and perf's is perfcompat's, so that one header tells them apart).
pub mod cpu_type {
    /// A CPU with a TSC and no counters perfctr can program.
    pub const X86_GENERIC: u32 = 0;
    /// Intel Pentium III.
    pub const X86_INTEL_PIII: u32 = 5;
    /// Intel Pentium 4.
    pub const X86_INTEL_P4: u32 = 11;
    /// PowerPC 750.
    pub const PPC_750: u32 = 0x103;
    /// PowerPC 7450.
    pub const PPC_7450: u32 = 0x105;
    /// Linux perf events (perfcompat's): software events, `evntsel` in the P6 layout.
    pub const PERF: u32 = 0x200;
}

/// The emulated TSC's nominal clock: 1 GHz (a tick per emulated cycle).
/// The error of a call that found this thread's perfctr state in use by the call it
/// interrupted (a signal handler's): `EAGAIN`, as `Error::Busy` gives, with a static text, so
/// that the refusal allocates nothing on the signal-safe calls (`vperfctr_read_state`).
fn busy(op: &'static str) -> Error {
    Error::Os {
        op,
        errno: libc::EAGAIN,
    }
}

/// `vperfctr_iresume`'s refusal when no i-mode counter overflowed: perfctr's `EPERM`.
pub(crate) fn no_overflow() -> Error {
    Error::Os {
        op: "resuming without an i-mode overflow",
        errno: libc::EPERM,
    }
}

/// `ns` nanoseconds as ticks of a TSC running at `khz` kHz.
pub(crate) fn ns_to_tsc(ns: u128, khz: u32) -> u64 {
    (ns * u128::from(khz) / 1_000_000) as u64
}

const SIM_KHZ: u32 = 1_000_000;

/// The process's `vperfctr_info`.
pub fn info() -> Result<Info> {
    let kind = backend()?.shape_unmeasured().kind;
    let (cpu_type, khz) = match kind {
        // On a Pentium 4 the control data is the Pentium 4's (CCCR/ESCR pairs, counted as
        // the kernel's P4 raw events): the program must know it.
        BackendKind::Perf => (
            match Family::of(kind) {
                Family::PerfP4 => cpu_type::X86_INTEL_P4,
                _ => cpu_type::PERF,
            },
            (backend::nominal_mhz() * 1000.0).round() as u32,
        ),
        BackendKind::Sim(m) => (
            match m.name {
                "pentium3" => cpu_type::X86_INTEL_PIII,
                "pentium4" => cpu_type::X86_INTEL_P4,
                "ppc750" => cpu_type::PPC_750,
                "ppc7450" => cpu_type::PPC_7450,
                _ => cpu_type::X86_GENERIC,
            },
            SIM_KHZ,
        ),
        BackendKind::Other(_) => (cpu_type::X86_GENERIC, SIM_KHZ),
    };
    let mut features = FEATURE_RDTSC | FEATURE_PCINT;
    if kind == BackendKind::Perf {
        features |= FEATURE_RDPMC;
    }
    let mut driver_version = [0u8; 32];
    for (d, s) in driver_version
        .iter_mut()
        .zip(DRIVER_VERSION.bytes().take(31))
    {
        *d = s;
    }
    Ok(Info {
        abi_version: ABI_VERSION,
        driver_version,
        cpu_type,
        features,
        cpu_khz: khz,
        tsc_to_cpu_mult: 1,
    })
}

/// The name of `cpu_type` (`perfctr_info_cpu_name`), NUL-terminated for the C layer.
pub fn cpu_name(t: u32) -> &'static std::ffi::CStr {
    match t {
        cpu_type::X86_INTEL_PIII => c"Intel Pentium III",
        cpu_type::X86_INTEL_P4 => c"Intel Pentium 4",
        cpu_type::PPC_750 => c"PowerPC 750",
        cpu_type::PPC_7450 => c"PowerPC 7450",
        cpu_type::PERF => c"Linux perf events (software)",
        cpu_type::X86_GENERIC => c"Generic x86 with TSC",
        _ => c"unknown",
    }
}

/// The counters `cpu_type` has (`perfctr_info_nrctrs`).
pub fn nrctrs(t: u32) -> u32 {
    match t {
        cpu_type::X86_INTEL_PIII => 2,
        cpu_type::X86_INTEL_P4 => 18,
        cpu_type::PPC_750 => 4,
        cpu_type::PPC_7450 => 6,
        cpu_type::PERF => MAX_CTRS as u32,
        _ => 0,
    }
}

/// `perfctr_info_print`'s text: one field a line, the name, tabs to the same column, the
/// value; the CPU type with its name, and the counters it has. At most 31 bytes of
/// `driver_version`, up to its first NUL (a program's own structure may not end it).
pub fn info_text(i: &Info) -> String {
    let v: Vec<u8> = i.driver_version[..31]
        .iter()
        .copied()
        .take_while(|&c| c != 0)
        .collect();
    format!(
        "abi_version\t\t{:#x}\ndriver_version\t\t{}\ncpu_type\t\t{} ({})\ncpu_features\t\t{:#x}\ncpu_khz\t\t\t{}\ntsc_to_cpu_mult\t\t{}\nnrctrs\t\t\t{}\n",
        i.abi_version,
        String::from_utf8_lossy(&v),
        i.cpu_type,
        cpu_name(i.cpu_type).to_string_lossy(),
        i.features,
        i.cpu_khz,
        i.tsc_to_cpu_mult,
        nrctrs(i.cpu_type)
    )
}

/// The calling thread's virtual TSC now (see the module's documentation). Async-signal-safe.
pub fn tsc_now(kind: BackendKind, khz: u32) -> u64 {
    match kind {
        BackendKind::Sim(_) => backend::sim::thread_tsc(),
        _ => {
            let mut ts = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            // SAFETY: a plain system call into a local.
            unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
            let ns = ts.tv_sec as u128 * 1_000_000_000 + ts.tv_nsec as u128;
            ns_to_tsc(ns, khz)
        }
    }
}

/// The TSC's clock and kind, cached per process (async-signal-safe after the first call,
/// which [`control`] makes).
fn clock() -> (BackendKind, u32) {
    static CLOCK: std::sync::OnceLock<(BackendKind, u32)> = std::sync::OnceLock::new();
    *CLOCK.get_or_init(|| match (backend(), info()) {
        (Ok(b), Ok(i)) => (b.shape_unmeasured().kind, i.cpu_khz),
        _ => (BackendKind::Other("none"), SIM_KHZ),
    })
}

fn tsc_suspend(f: &Fast) {
    if f.tsc_running.get() {
        let (k, khz) = clock();
        let now = tsc_now(k, khz);
        f.tsc_sum.set(
            f.tsc_sum
                .get()
                .wrapping_add(now.wrapping_sub(f.tsc_start.get())),
        );
        f.tsc_running.set(false);
    }
}

fn tsc_resume(f: &Fast) {
    if f.tsc_on.get() && !f.tsc_running.get() {
        let (k, khz) = clock();
        f.tsc_start.set(tsc_now(k, khz));
        f.tsc_running.set(true);
    }
}

/// Install the overflow hook and the fork handler (idempotent).
fn install() -> Result<()> {
    static ATFORK: std::sync::Once = std::sync::Once::new();
    ATFORK.call_once(|| {
        crate::base::sys::on_fork_in_child(after_fork_in_child);
    });
    engine::add_overflow_hook(hook)
}

/// In the child of `fork`: no counters, as a perfctr child had none (the binding is the
/// parent's thread's: forgotten, not dropped, so that nothing touches its counters).
extern "C" fn after_fork_in_child() {
    let _ = SLOW.try_with(|s| {
        if let Ok(mut s) = s.try_borrow_mut() {
            std::mem::forget(s.binding.take());
            s.control = Control::default();
        }
    });
    let _ = FAST.try_with(|f| {
        f.binding.set(0);
        f.signo.set(0);
        for x in &f.base {
            x.set(0);
        }
        f.tsc_on.set(false);
        f.tsc_running.set(false);
        f.tsc_sum.set(0);
    });
}

/// The overflow hook: freeze the TSC, queue the program's signal. Async-signal-safe.
fn hook(ev: &OverflowEvent) {
    if ev.user_data != TAG {
        return;
    }
    let signo = FAST
        .try_with(|f| {
            if f.binding.get() != ev.binding {
                return 0;
            }
            tsc_suspend(f);
            f.signo.get()
        })
        .unwrap_or(0);
    if signo > 0 {
        queue(ev.tid, signo, ev.overflowed as u32);
    }
}

/// Queue `signo` to thread `tid` with `si_code` [`SI_PMC_OVF`] and `mask` in `_pad[0]`
/// (`SI_QUEUE` from another thread, where Linux refuses a positive code). Async-signal-safe.
fn queue(tid: i32, signo: c_int, mask: u32) {
    #[repr(C, align(8))]
    struct SigInfo([u8; 128]);
    let union_at = if cfg!(target_pointer_width = "64") {
        16
    } else {
        12
    };
    let mut info = SigInfo([0; 128]);
    info.0[0..4].copy_from_slice(&signo.to_ne_bytes());
    info.0[8..12].copy_from_slice(&SI_PMC_OVF.to_ne_bytes());
    info.0[union_at..union_at + 4].copy_from_slice(&mask.to_ne_bytes());
    // From another thread Linux refuses a positive code: then `SI_QUEUE`.
    crate::base::signal::queue_siginfo(tid, &mut info.0);
}

/// `vperfctr_open`: make sure the backend works and the hook is in place; the thread's state
/// exists from its first use.
pub fn open() -> Result<()> {
    backend()?;
    clock();
    install()
}

/// `vperfctr_control`: check `c` and (re)program the calling thread's counters. On an error
/// (checks, placement, the kernel) the earlier counters are left as they were.
pub fn control(c: &Control) -> Result<()> {
    control_with(backend()?, c)
}

/// [`control()`] on backend `b` rather than the process's (a test's model kernel); the thread's
/// later calls read the binding made here.
pub fn control_with(b: &'static dyn Backend, c: &Control) -> Result<()> {
    let set = checked_set(b, c)?;
    install()?;
    SLOW.with(|s| -> Result<()> {
        let mut s = s.try_borrow_mut().map_err(|_| {
            busy("vperfctr_control from a signal handler during another of this thread's calls")
        })?;
        // The new counters are bound before the earlier ones go, which stop meanwhile (so that
        // no event is in both): a set the engine cannot place or the kernel cannot count (a
        // raw event without a PMU: ENOENT) leaves the earlier counters as they were.
        let stopped = s.binding.as_ref().is_some_and(|o| o.stop().is_ok());
        let new = if set.is_empty() {
            None
        } else {
            match engine::bind_tagged(b, &set, Target::CurrentThread, TAG) {
                Ok(bd) => Some(bd),
                Err(e) => {
                    if let (true, Some(o)) = (stopped, &s.binding) {
                        let _ = o.resume();
                    }
                    return Err(e);
                }
            }
        };
        FAST.with(|f| {
            // The earlier counters' sums, then start afresh or keep them.
            fold(f, &s);
            f.binding.set(new.as_ref().map_or(0, |n| n.id()));
            let old = std::mem::replace(&mut s.binding, new);
            drop(old);
            tsc_suspend(f);
            if c.preserve == 0 {
                for x in &f.base {
                    x.set(0);
                }
                f.tsc_sum.set(0);
            }
            f.signo.set(c.si_signo);
            f.tsc_on.set(c.cpu.tsc_on != 0);
            s.control = *c;
            tsc_resume(f);
            Ok(())
        })
    })
}

/// The counter set `c` programs on backend `b`, after checking the control data for its CPU
/// family, the signal i-mode counters need and the flags (`EINVAL` with the cause).
fn checked_set(b: &dyn Backend, c: &Control) -> Result<CounterSet> {
    let family = Family::of(b.shape_unmeasured().kind);
    let reqs = control::requests(family, &c.cpu)?;
    if c.cpu.nrictrs > 0 && !(1..=libc::SIGRTMAX()).contains(&c.si_signo) {
        return Err(Error::InvalidArgument(format!(
            "si_signo {}: i-mode counters need a signal number (1..{})",
            c.si_signo,
            libc::SIGRTMAX()
        )));
    }
    if c.flags & !CLOEXEC != 0 {
        return Err(Error::InvalidArgument(format!(
            "flags {:#x}: only VPERFCTR_CONTROL_CLOEXEC (1)",
            c.flags
        )));
    }
    let mut set = CounterSet::new();
    for r in reqs {
        set.add(r)?;
    }
    Ok(set)
}

/// Add the binding's totals to the carried sums (before it goes).
fn fold(f: &Fast, s: &Slow) {
    if let Some(b) = &s.binding {
        let mut sums = f.base.each_ref().map(Cell::get);
        if add_totals(b, &mut sums).is_ok() {
            for (c, v) in f.base.iter().zip(sums) {
                c.set(v);
            }
        }
    }
}

/// Add binding `b`'s totals (its first [`MAX_CTRS`] counters, wrapping) into `sums`: the one
/// way the thread's, the remote and the global calls turn a binding into perfctr's sums.
/// Async-signal-safe.
pub(crate) fn add_totals(b: &engine::BoundSet, sums: &mut [u64; MAX_CTRS]) -> Result<()> {
    let n = b.len().min(MAX_CTRS);
    let (mut v, mut t) = ([0u64; MAX_CTRS], [0u64; MAX_CTRS]);
    b.sample_totals(&mut v[..n], &mut t[..n])?;
    for (p, t) in sums.iter_mut().zip(&t[..n]) {
        *p = p.wrapping_add(*t);
    }
    Ok(())
}

/// `vperfctr_read_ctrs`: the TSC's and every counter's sum (counters not programmed: what
/// earlier controls left). Async-signal-safe.
pub fn read() -> Result<Sums> {
    FAST.with(|f| {
        let mut out = Sums::default();
        for i in 0..MAX_CTRS {
            out.pmc[i] = f.base[i].get();
        }
        let id = f.binding.get();
        if id != 0 {
            engine::with_thread_binding(id, |b| add_totals(b, &mut out.pmc))
                .unwrap_or(Err(Error::NotBound))?;
        }
        out.tsc = f.tsc_sum.get();
        if f.tsc_running.get() {
            let (k, khz) = clock();
            out.tsc = out
                .tsc
                .wrapping_add(tsc_now(k, khz).wrapping_sub(f.tsc_start.get()));
        }
        Ok(out)
    })
}

/// `vperfctr_read_state`: the sums ([`read`]) and the control in force, as perfctr's driver
/// reported it: the last control made on this thread with `preserve` 0 (it applies to a
/// control, it is not a state); all zeros while nothing is programmed (before a control,
/// after [`stop`], which is a control with nothing in it as perfctr's library made it, and
/// after [`unlink`]), so that `cpu_control` counts exactly the counters
/// `vperfctr_is_running` says run.
pub fn read_state() -> Result<(Sums, Control)> {
    let c = SLOW.with(|s| {
        s.try_borrow()
            .map(|s| s.control)
            .map_err(|_| busy("vperfctr_read_state during a vperfctr_control"))
    })?;
    Ok((read()?, Control { preserve: 0, ..c }))
}

/// `vperfctr_iresume`: after an overflow, reload the overflowed i-mode counters from their
/// `ireset` and resume every counter and the TSC. `EPERM` without i-mode counters or without an
/// overflow to resume from (the set is running). Async-signal-safe.
pub fn iresume() -> Result<()> {
    FAST.with(|f| {
        let id = f.binding.get();
        let r = if id == 0 {
            Err(Error::NotBound)
        } else {
            engine::with_thread_binding(id, |b| b.iresume()).unwrap_or(Err(Error::NotBound))
        };
        match r {
            Ok(()) => {
                tsc_resume(f);
                Ok(())
            }
            Err(Error::WrongState(_)) | Err(Error::NotBound) => Err(no_overflow()),
            Err(e) => Err(e),
        }
    })
}

/// `vperfctr_is_running`: whether counters or the TSC are programmed and not stopped.
pub fn is_running() -> bool {
    FAST.with(|f| f.binding.get() != 0 || f.tsc_running.get())
}

/// `vperfctr_stop`: stop the counters and the TSC; their sums stay readable, and a later
/// control with `preserve` goes on from them.
pub fn stop() -> Result<()> {
    SLOW.with(|s| {
        let mut s = s.try_borrow_mut().map_err(|_| {
            busy("vperfctr_stop from a signal handler during another of this thread's calls")
        })?;
        FAST.with(|f| {
            fold(f, &s);
            f.binding.set(0);
            s.binding = None;
            // perfctr's library stopped with an empty control: the control reads as zeros.
            s.control = Control::default();
            tsc_suspend(f);
            f.tsc_on.set(false);
            Ok(())
        })
    })
}

/// `vperfctr_unlink`: end the thread's counting and forget its sums and control.
pub fn unlink() -> Result<()> {
    stop()?;
    SLOW.with(|s| {
        if let Ok(mut s) = s.try_borrow_mut() {
            s.control = Control::default();
        }
    });
    FAST.with(|f| {
        for x in &f.base {
            x.set(0);
        }
        f.tsc_sum.set(0);
        f.signo.set(0);
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    // A `vperfctr_read_state` that interrupts this thread's own `vperfctr_control` (a signal
    // handler's) is refused with EAGAIN, and its error holds only static text: the call is
    // one a handler may make, so its refusal must not allocate.
    #[test]
    fn a_read_state_inside_a_control_is_eagain_with_a_static_error() {
        SLOW.with(|s| {
            let _held = s.borrow_mut();
            let e = read_state().unwrap_err();
            assert_eq!(e.errno(), libc::EAGAIN);
            assert!(
                matches!(e, Error::Os { .. }),
                "a static-text error, not an allocated one: {e:?}"
            );
        });
    }
}
