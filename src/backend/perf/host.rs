//! What the host offers the perf backend: whether a hardware PMU answers, what
//! `perf_event_paranoid` allows, the CPU's model name, and the clock the `cycles` fallback uses
//! (the one `perfex --calibrate` measured, read from [`crate::base::costfile`], else the nominal one).

use std::os::fd::{AsRawFd, OwnedFd};

use perf_event_open_sys::bindings::{self as b, perf_event_attr};

use super::attr_for;
use super::kernel::{self, Kernel};
use super::names::PerfCode;
use crate::base::error::Error;

/// What the host offers.
#[derive(Debug, Clone, PartialEq)]
pub struct HostCaps {
    /// A hardware PMU answers (hardware events open).
    pub pmu: bool,
    /// `/proc/sys/kernel/perf_event_paranoid`.
    pub paranoid: i32,
    /// Running as root.
    pub root: bool,
    /// Clock in MHz for the `cycles` fallback: the one `perfex --calibrate` measured when its
    /// host cost cache exists, else the nominal clock.
    pub mhz: f64,
    /// Where `mhz` comes from, for the notes.
    pub clock_source: &'static str,
}

/// The `/proc/cpuinfo` lines [`cpuinfo_field`] is asked for.
const CPUINFO_KEYS: [&str; 2] = ["model name", "cpu MHz"];

/// The start of `/proc/cpuinfo`, read once: reading it costs tens of microseconds here, and
/// first use (`cpc_open` and the first bind) needed it three times.
fn cpuinfo() -> &'static str {
    static TEXT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TEXT.get_or_init(|| {
        // Only the first processor's entry is needed, and of it the lines of CPUINFO_KEYS,
        // which x86 puts in its first ten. The kernel formats a whole entry for the read that
        // reaches it, and goes on to the next entry to fill the rest of a read: a 4 KiB read
        // formats two (32 µs on this VM), 1 KiB reads that stop once the lines are in (or the
        // first entry ended) format one (18 µs).
        use std::io::Read;
        let mut buf = Vec::with_capacity(4096);
        if let Ok(mut f) = std::fs::File::open("/proc/cpuinfo") {
            let mut chunk = [0u8; 1024];
            while buf.len() < 4096 && !cpuinfo_has_all(&buf) {
                match f.read(&mut chunk) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            }
        }
        String::from_utf8_lossy(&buf).into_owned()
    })
}

/// Whether the complete lines of `text` hold every line of [`CPUINFO_KEYS`] or the end of the
/// first processor's entry (a blank line).
fn cpuinfo_has_all(text: &[u8]) -> bool {
    let end = text.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let text = String::from_utf8_lossy(&text[..end]);
    text.contains("\n\n")
        || CPUINFO_KEYS
            .iter()
            .all(|k| text.lines().any(|l| l.starts_with(k)))
}

/// The value of the first `/proc/cpuinfo` line starting with `key` (one of [`CPUINFO_KEYS`]).
fn cpuinfo_field(key: &str) -> Option<&'static str> {
    debug_assert!(CPUINFO_KEYS.contains(&key), "{key}");
    cpuinfo()
        .lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split(':').nth(1))
        .map(str::trim)
}

/// This machine's nominal core clock in MHz (cpufreq base or maximum frequency, else
/// `/proc/cpuinfo`, else 1000), looked up on the first call and kept.
///
/// Async-signal-safe (issue 48, first use): `cpc_open` no longer looks the clock up, the
/// first `cpc_set_sample` or `cpc_bind_event` sample does, and that may be in a signal
/// handler. So the lookup allocates nothing and takes no lock: raw system calls into stack
/// buffers, the answer kept in an atomic (two threads that race both find the same value).
/// The cpufreq directory is opened once and its files relative to it (without a cpufreq
/// driver, as in most virtual machines, one failed path lookup instead of two), and
/// `/proc/cpuinfo`, which the kernel formats for the read, is read only where it can hold the
/// `cpu MHz` line ([`CPUINFO_HAS_MHZ`]). The value is the same as before.
pub(crate) fn nominal_mhz() -> f64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    /// The clock's bits; all ones (a NaN no parse makes) while not looked up.
    static MHZ: AtomicU64 = AtomicU64::new(UNKNOWN);
    const UNKNOWN: u64 = u64::MAX;
    let bits = MHZ.load(Ordering::Relaxed);
    if bits != UNKNOWN {
        return f64::from_bits(bits);
    }
    let mhz = look_up_mhz();
    MHZ.store(mhz.to_bits(), Ordering::Relaxed);
    mhz
}

/// [`nominal_mhz`]'s lookup, async-signal-safe.
#[cold]
fn look_up_mhz() -> f64 {
    if let Some(khz) = cpufreq_khz() {
        return khz / 1000.0;
    }
    (if CPUINFO_HAS_MHZ { cpuinfo_mhz() } else { None }).unwrap_or(1000.0)
}

/// Whether this architecture's `/proc/cpuinfo` can have a `cpu MHz` line: arm64's never has
/// (its entries list `BogoMIPS`, `Features` and the CPU's implementer, architecture, variant,
/// part and revision), so there the nominal clock does not read the file for it.
pub(crate) const CPUINFO_HAS_MHZ: bool = !cfg!(target_arch = "aarch64");

/// The cpufreq directory of CPU 0, whose files [`cpufreq_khz`] reads.
const CPUFREQ_DIR: &std::ffi::CStr = c"/sys/devices/system/cpu/cpu0/cpufreq";

/// The cpufreq files [`cpufreq_khz`] tries, in order, in [`CPUFREQ_DIR`].
const CPUFREQ_FILES: [&std::ffi::CStr; 2] = [c"base_frequency", c"cpuinfo_max_freq"];

/// `openat(dir, path, flags)` made inline ([`crate::base::sys::openat`]), a descriptor we own.
fn open_raw(dir: i32, path: &std::ffi::CStr, flags: i32) -> Option<OwnedFd> {
    crate::base::sys::openat(dir, path, flags).ok()
}

/// Fill `buf` from `fd` with raw `read`s until it is full, the file ends, or `enough` says the
/// text so far suffices: the bytes read.
fn read_raw(fd: &OwnedFd, buf: &mut [u8], chunk: usize, enough: impl Fn(&[u8]) -> bool) -> usize {
    let mut len = 0;
    while len < buf.len() && !enough(&buf[..len]) {
        let want = chunk.min(buf.len() - len);
        // SAFETY: `want` writable bytes at `buf[len..]`, a descriptor we hold.
        let n = unsafe { crate::base::sys::read(fd.as_raw_fd(), buf[len..].as_mut_ptr(), want) };
        match crate::base::sys::sys_result(n) {
            Ok(0) | Err(_) => break,
            Ok(n) => len += n,
        }
    }
    len
}

/// CPU 0's cpufreq base frequency, else its maximum, in kHz: the directory opened once (a
/// `O_PATH` descriptor), each file relative to it. Async-signal-safe.
fn cpufreq_khz() -> Option<f64> {
    let dir = open_raw(
        libc::AT_FDCWD,
        CPUFREQ_DIR,
        libc::O_PATH | libc::O_DIRECTORY,
    )?;
    CPUFREQ_FILES.iter().find_map(|name| {
        let f = open_raw(dir.as_raw_fd(), name, libc::O_RDONLY)?;
        let mut text = [0u8; 64];
        let n = read_raw(&f, &mut text, 64, |_| false);
        std::str::from_utf8(&text[..n])
            .ok()?
            .trim()
            .parse::<f64>()
            .ok()
    })
}

/// The first `cpu MHz` line of `/proc/cpuinfo`, read into a stack buffer the way [`cpuinfo`]
/// reads the file (1 KiB reads, at most 4 KiB, until the line is complete or the first entry
/// ended), so the value is [`cpuinfo_field`]'s. Async-signal-safe.
fn cpuinfo_mhz() -> Option<f64> {
    let f = open_raw(libc::AT_FDCWD, c"/proc/cpuinfo", libc::O_RDONLY)?;
    let mut buf = [0u8; 4096];
    let n = read_raw(&f, &mut buf, 1024, |t| {
        mhz_line(t).is_some() || t.windows(2).any(|w| w == b"\n\n")
    });
    mhz_line(&buf[..n])?.trim().parse().ok()
}

/// The value of the first complete `cpu MHz` line of `text`.
fn mhz_line(text: &[u8]) -> Option<&str> {
    let end = text.iter().rposition(|&b| b == b'\n')?;
    std::str::from_utf8(&text[..end])
        .ok()?
        .lines()
        .find(|l| l.starts_with("cpu MHz"))
        .and_then(|l| l.split(':').nth(1))
}

pub(super) fn cpu_model() -> String {
    cpuinfo_field("model name")
        .map(str::to_string)
        .unwrap_or_else(|| std::env::consts::ARCH.to_string())
}

/// A disabled, user-mode-only `task-clock` of the calling thread: the event every kernel with
/// perf_event_open has.
pub(super) fn user_task_clock() -> perf_event_attr {
    let mut a = attr_for(PerfCode::new(
        b::PERF_TYPE_SOFTWARE,
        b::PERF_COUNT_SW_TASK_CLOCK as u64,
    ));
    a.set_disabled(1);
    a.set_exclude_kernel(1);
    a.set_exclude_hv(1);
    a
}

/// Whether the calling thread can count `code` in user mode (libcpc's default, and all that
/// unprivileged users get at `perf_event_paranoid` 2). PMUs that count only CPU-wide, or only
/// without mode filtering (`msr`, which rejects `exclude_kernel`), are refused.
pub(super) fn thread_countable(kernel: &dyn Kernel, code: PerfCode) -> bool {
    open_errno(kernel, code) == 0
}

/// Open a counter of the calling thread that the caller closes before it returns (in group
/// `group`, -1 for none): see [`Kernel::perf_event_probe`].
fn open_probe(kernel: &dyn Kernel, attr: &mut perf_event_attr, group: i32) -> Result<OwnedFd, i32> {
    kernel.perf_event_probe(attr, 0, -1, group, b::PERF_FLAG_FD_CLOEXEC as u64)
}

/// What opening `code` for the calling thread in user mode, disabled, answers: 0 when it
/// opens (the event is closed at once), else the errno. One `perf_event_open` and a `close`.
pub(super) fn open_errno(kernel: &dyn Kernel, code: PerfCode) -> i32 {
    let mut a = attr_for(code);
    a.set_disabled(1);
    a.set_exclude_kernel(1);
    a.set_exclude_hv(1);
    open_probe(kernel, &mut a, -1).map_or_else(|e| e, |_| 0)
}

/// The PMU's counters as the perf backend places requests on them, measured by
/// `probe_counters`. Counters are numbered: first the general ones (`0..general`), which
/// every hardware event can use, then those only `cycles` can use, then those only
/// `instructions` can use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PmuCounters {
    /// Counters every hardware event can use.
    pub general: usize,
    /// Counters besides the general ones that only `cycles` can use (arm64's cycle counter,
    /// x86's fixed counter 1).
    pub cycles_only: usize,
    /// Counters besides the general ones that only `instructions` can use (x86's fixed
    /// counter 0).
    pub instructions_only: usize,
}

impl PmuCounters {
    /// Counters in all (libcpc's `cpc_npic`).
    pub fn total(&self) -> usize {
        self.general + self.cycles_only + self.instructions_only
    }
}

/// Most events the probe puts in one group: the walkers' counter masks are 64 bits.
const MAX_PROBE: usize = 64;

/// Events tried, in order, for the general counters: the first that opens is probed. Branches
/// first: on x86 `instructions` also has a fixed counter; on arm64 (where QEMU has no
/// branch event) it is a general one.
const GENERAL_PROBES: [u32; 6] = [
    b::PERF_COUNT_HW_BRANCH_INSTRUCTIONS,
    b::PERF_COUNT_HW_INSTRUCTIONS,
    b::PERF_COUNT_HW_STALLED_CYCLES_FRONTEND,
    b::PERF_COUNT_HW_STALLED_CYCLES_BACKEND,
    b::PERF_COUNT_HW_BRANCH_MISSES,
    b::PERF_COUNT_HW_CACHE_REFERENCES,
];

/// The probe could not tell (a refusal that is not the PMU's: out of descriptors, say).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Unknown;

/// Measure the PMU's counters through `kernel`, on the calling thread (see [`PmuCounters`]).
///
/// For an event `e`, its *capacity* is the largest group of `e` alone (a disabled leader and
/// enabled members, as the backend opens a set, user mode only) that the kernel both accepts
/// at `perf_event_open` and schedules: after `PERF_EVENT_IOC_ENABLE` of the leader, a read of
/// the group shows `time_running` grown. Members are opened until the kernel refuses one
/// (`EINVAL`: x86 checks the whole group at open; arm64 leaves the disabled leader out of that
/// check, so there the group one over opens and never runs), then the group is enabled, read
/// and disabled, dropping its last member while it does not run. Where no time passed between
/// the enable and the read (a kernel model without time), the kernel's acceptance is taken.
///
/// The general counters are the capacity of the first of [`GENERAL_PROBES`] that opens; the
/// counters only `cycles` (then `instructions`) can use are what its capacity adds to that.
/// Other hardware, cache, raw and sysfs events are taken to use the general counters only.
///
/// Cost, once per process: per event probed, capacity + 2 `perf_event_open`s (+ 1 on arm64),
/// one enable/read/disable round (two on arm64) and the closes: about 45 system calls for
/// arm64's 6 + 1 counters (QEMU: branches missing, instructions and cycles probed), about 40
/// for x86's 4 general and 2 fixed counters (branches, cycles, instructions), which at a few
/// microseconds per `perf_event_open` is of the order of 100 µs (estimated, not measured:
/// this project's CI has no PMU).
///
/// What it measures is what the calling thread can have now: counters held by others at that
/// moment (the NMI watchdog's, a `perfex` parent's inherited events, system-wide sessions)
/// are not counted. [`Unknown`] when a refusal is not the PMU's (descriptors ran out).
pub(super) fn probe_counters(kernel: &dyn Kernel) -> Result<PmuCounters, Unknown> {
    let hw = |config: u32| PerfCode::new(b::PERF_TYPE_HARDWARE, u64::from(config));
    let mut general = None;
    for config in GENERAL_PROBES {
        if let Some(n) = largest_group(kernel, hw(config))? {
            general = Some((config, n));
            break;
        }
    }
    let cycles = largest_group(kernel, hw(b::PERF_COUNT_HW_CPU_CYCLES))?.ok_or(Unknown)?;
    let Some((probed, general)) = general else {
        // Only cycles opens: call its counters general.
        return Ok(PmuCounters {
            general: cycles,
            cycles_only: 0,
            instructions_only: 0,
        });
    };
    let instructions = if probed == b::PERF_COUNT_HW_INSTRUCTIONS {
        general
    } else {
        largest_group(kernel, hw(b::PERF_COUNT_HW_INSTRUCTIONS))?.unwrap_or(0)
    };
    let cycles_only = cycles.saturating_sub(general).min(MAX_PROBE - general);
    let instructions_only = instructions
        .saturating_sub(general)
        .min(MAX_PROBE - general - cycles_only);
    Ok(PmuCounters {
        general,
        cycles_only,
        instructions_only,
    })
}

/// The capacity of `code` (see [`probe_counters`]); `None` when it does not open.
fn largest_group(kernel: &dyn Kernel, code: PerfCode) -> Result<Option<usize>, Unknown> {
    let attr = |leader: bool| {
        let mut a = attr_for(code);
        a.set_disabled(u64::from(leader));
        a.set_exclude_kernel(1);
        a.set_exclude_hv(1);
        a.read_format = (b::PERF_FORMAT_GROUP
            | b::PERF_FORMAT_TOTAL_TIME_ENABLED
            | b::PERF_FORMAT_TOTAL_TIME_RUNNING) as u64;
        a
    };
    let leader = match open_probe(kernel, &mut attr(true), -1) {
        Ok(fd) => fd,
        Err(libc::ENOENT | libc::EOPNOTSUPP | libc::EINVAL) => return Ok(None),
        Err(_) => return Err(Unknown),
    };
    let lfd = leader.as_raw_fd();
    let mut members: Vec<OwnedFd> = Vec::new();
    while members.len() + 1 < MAX_PROBE {
        match open_probe(kernel, &mut attr(false), lfd) {
            Ok(fd) => members.push(fd),
            // The PMU's refusal of a group that does not fit.
            Err(libc::EINVAL | libc::ENOSPC) => break,
            Err(_) => return Err(Unknown),
        }
    }
    let mut last = (0, 0);
    loop {
        if ran(kernel, lfd, members.len() + 1, &mut last) != Some(false) {
            return Ok(Some(members.len() + 1));
        }
        if members.pop().is_none() {
            // A lone event that does not run: every counter is taken; the kernel will
            // multiplex it.
            return Ok(Some(1));
        }
    }
}

/// Enable the group of `n` led by `leader`, read it, disable it: whether it ran
/// (`time_running` grew since `last`, which becomes this read's times); `None` when no time
/// passed or the read failed.
fn ran(kernel: &dyn Kernel, leader: i32, n: usize, last: &mut (u64, u64)) -> Option<bool> {
    kernel.ioctl(leader, b::ENABLE as u64, 0).ok()?;
    let mut buf = [std::mem::MaybeUninit::<u64>::uninit(); 3 + MAX_PROBE];
    let read = kernel.read(leader, &mut buf[..3 + n]);
    let _ = kernel.ioctl(leader, b::DISABLE as u64, 0);
    if read.ok()? < 24 {
        return None;
    }
    // SAFETY: the read wrote at least the first three words (nr, enabled, running).
    let now = unsafe { (buf[1].assume_init(), buf[2].assume_init()) };
    let was = std::mem::replace(last, now);
    (now.0 != was.0).then_some(now.1 > was.1)
}

/// Probe the host: is there a PMU, what does the kernel allow.
pub fn probe() -> std::result::Result<HostCaps, Error> {
    probe_with(&kernel::LINUX)
}

/// [`probe`] through a given kernel interface.
pub fn probe_with(kernel: &dyn Kernel) -> std::result::Result<HostCaps, Error> {
    let pmu = probe_counting(kernel, open_errno(kernel, pmu_probe_code()))?;
    Ok(rest_of_caps(kernel, pmu))
}

/// The hardware event [`probe_counting`] opens to find the PMU: `cycles`.
pub(super) fn pmu_probe_code() -> PerfCode {
    PerfCode::new(b::PERF_TYPE_HARDWARE, b::PERF_COUNT_HW_CPU_CYCLES as u64)
}

/// What a backend must know before it is used: whether the calling thread can count at all
/// (an error naming the cause when not) and whether a hardware PMU answers, given `cycles`,
/// the answer of opening [`pmu_probe_code`] as the check of an event opens it (the backend
/// keeps the answer for its check of `cycles`, and the counter for a bind, see `kept`). Where
/// `cycles` does not open, one `perf_event_open` of a software event (issue 48: the software
/// one first cost a first use one open more); `perf_event_paranoid` is read only to explain a
/// refusal.
pub(super) fn probe_counting(kernel: &dyn Kernel, cycles: i32) -> std::result::Result<bool, Error> {
    // The PMU is probed with the event itself, user mode only (a kernel-mode probe would fail
    // with EACCES for unprivileged users and look like a permission problem). Where it opens,
    // perf_event_open works for the calling thread.
    if cycles == 0 {
        return Ok(true);
    }
    // Software events always exist where perf_event_open works at all.
    let mut a = user_task_clock();
    if let Err(e) = open_probe(kernel, &mut a, -1) {
        return Err(match e {
            libc::ENOSYS => Error::Unsupported(
                "this kernel has no perf_event_open (CONFIG_PERF_EVENTS is off, or a seccomp \
                 filter hides it)"
                    .into(),
            ),
            libc::EACCES | libc::EPERM => Error::PermissionDenied {
                what: "perf_event_open for the calling thread".into(),
                fix: format!(
                    "perf_event_paranoid is {}; at 3 and above unprivileged use is \
                     forbidden: lower /proc/sys/kernel/perf_event_paranoid to 2, or grant \
                     CAP_PERFMON",
                    kernel.perf_event_paranoid()
                ),
            },
            errno => Error::Os {
                op: "perf_event_open of task-clock",
                errno,
            },
        });
    }
    Ok(false)
}

/// The rest of [`HostCaps`] once [`probe_counting`] found `pmu`: the paranoid level, the
/// user, the clock. Nothing here is needed to bind a set of software or hardware events, so
/// the backend looks it up when first asked ([`super::PerfBackend::caps`]).
pub(super) fn rest_of_caps(kernel: &dyn Kernel, pmu: bool) -> HostCaps {
    let (mhz, clock_source) = match crate::base::costfile::calibrated_mhz() {
        Some(m) => (m, "the clock perfex --calibrate measured"),
        None => (nominal_mhz(), "the nominal clock"),
    };
    HostCaps {
        pmu,
        paranoid: kernel.perf_event_paranoid(),
        // SAFETY: plain libc call.
        root: unsafe { libc::geteuid() } == 0,
        mhz,
        clock_source,
    }
}

#[cfg(test)]
mod tests {
    use super::{cpuinfo_field, cpuinfo_has_all, CPUINFO_KEYS};
    use super::{look_up_mhz, mhz_line, nominal_mhz, CPUINFO_HAS_MHZ};

    /// The clock looked up without allocating (issue 48: a first sample may be in a signal
    /// handler) is the one the standard library's file reads find: cpufreq's base, else its
    /// maximum frequency, else `/proc/cpuinfo`'s first `cpu MHz`, else 1000.
    #[test]
    fn the_signal_safe_clock_is_the_one_the_files_say() {
        let dir = std::path::Path::new("/sys/devices/system/cpu/cpu0/cpufreq");
        let want = ["base_frequency", "cpuinfo_max_freq"]
            .iter()
            .find_map(|f| {
                std::fs::read_to_string(dir.join(f))
                    .ok()?
                    .trim()
                    .parse::<f64>()
                    .ok()
            })
            .map(|khz| khz / 1000.0)
            .or_else(|| {
                CPUINFO_HAS_MHZ
                    .then(|| cpuinfo_field("cpu MHz")?.parse::<f64>().ok())
                    .flatten()
            })
            .unwrap_or(1000.0);
        assert_eq!(look_up_mhz(), want);
        assert_eq!(nominal_mhz(), want);
        assert_eq!(nominal_mhz(), want, "kept");
    }

    #[test]
    fn the_mhz_line_is_a_complete_one() {
        assert_eq!(
            mhz_line(b"model name\t: X\ncpu MHz\t\t: 2596.128\n"),
            Some(" 2596.128")
        );
        assert_eq!(mhz_line(b"model name\t: X\ncpu MHz\t\t: 25"), None);
        assert_eq!(mhz_line(b"processor\t: 0\n"), None);
    }

    /// The lines read in 1 KiB steps are those of the whole file's first entry.
    #[test]
    fn cpuinfo_fields_are_the_first_entrys() {
        let whole = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let first = whole.split("\n\n").next().unwrap_or("");
        for key in CPUINFO_KEYS {
            let want = first
                .lines()
                .find(|l| l.starts_with(key))
                .and_then(|l| l.split(':').nth(1))
                .map(str::trim);
            assert_eq!(cpuinfo_field(key), want, "{key}");
        }
    }

    #[test]
    fn cpuinfo_is_read_until_its_lines_or_the_first_entry_end() {
        let x86 = b"processor\t: 0\nmodel name\t: AMD EPYC\nstepping\t: 1\ncpu MHz\t\t: 2596.128\nflags\t\t: fpu";
        assert!(cpuinfo_has_all(x86));
        // A line cut by the read is not complete yet.
        assert!(!cpuinfo_has_all(
            b"processor\t: 0\nmodel name\t: AMD EPYC\ncpu MH"
        ));
        assert!(!cpuinfo_has_all(
            b"processor\t: 0\nmodel name\t: AMD EPYC\ncpu MHz\t\t: 25"
        ));
        // An entry without the lines (arm64) ends at its blank line.
        assert!(cpuinfo_has_all(
            b"processor\t: 0\nBogoMIPS\t: 50.00\n\nprocessor\t: 1\n"
        ));
        assert!(!cpuinfo_has_all(b"processor\t: 0\nBogoMIPS\t: 50.00\n"));
        assert!(!cpuinfo_has_all(b""));
    }
}
