//! What the host offers the perf backend: whether a hardware PMU answers, what
//! `perf_event_paranoid` allows, the CPU's model name, and the clock the `cycles` fallback uses
//! (the one `perfex --calibrate` measured, read from [`crate::costfile`], else the nominal one).

use perf_event_open_sys::bindings::{self as b, perf_event_attr};

use super::kernel::{self, Kernel};
use super::names::PerfCode;
use super::{attr_for, open_attr};
use crate::error::Error;

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
/// `/proc/cpuinfo`, else 1000).
pub(crate) fn nominal_mhz() -> f64 {
    static MHZ: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *MHZ.get_or_init(|| {
        for p in [
            "/sys/devices/system/cpu/cpu0/cpufreq/base_frequency",
            "/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq",
        ] {
            if let Some(khz) = std::fs::read_to_string(p)
                .ok()
                .and_then(|s| s.trim().parse::<f64>().ok())
            {
                return khz / 1000.0;
            }
        }
        cpuinfo_field("cpu MHz")
            .and_then(|v| v.parse().ok())
            .unwrap_or(1000.0)
    })
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
    let mut a = attr_for(code);
    a.set_disabled(1);
    a.set_exclude_kernel(1);
    a.set_exclude_hv(1);
    open_attr(kernel, &mut a, 0, -1, -1).is_ok()
}

/// Probe the host: is there a PMU, what does the kernel allow.
pub fn probe() -> std::result::Result<HostCaps, Error> {
    probe_with(&kernel::LINUX)
}

/// [`probe`] through a given kernel interface.
pub fn probe_with(kernel: &dyn Kernel) -> std::result::Result<HostCaps, Error> {
    let pmu = probe_counting(kernel)?;
    Ok(rest_of_caps(kernel, pmu))
}

/// What a backend must know before it is used: whether the calling thread can count at all
/// (an error naming the cause when not) and whether a hardware PMU answers. Two
/// `perf_event_open`s; `perf_event_paranoid` is read only to explain a refusal.
pub(super) fn probe_counting(kernel: &dyn Kernel) -> std::result::Result<bool, Error> {
    // Software events always exist where perf_event_open works at all.
    let mut a = user_task_clock();
    if let Err(e) = open_attr(kernel, &mut a, 0, -1, -1) {
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
    // Probe the PMU with the event itself, user mode only (a kernel-mode probe would fail with
    // EACCES for unprivileged users and look like a permission problem).
    let mut h = attr_for(PerfCode::new(
        b::PERF_TYPE_HARDWARE,
        b::PERF_COUNT_HW_CPU_CYCLES as u64,
    ));
    h.set_disabled(1);
    h.set_exclude_kernel(1);
    h.set_exclude_hv(1);
    Ok(open_attr(kernel, &mut h, 0, -1, -1).is_ok())
}

/// The rest of [`HostCaps`] once [`probe_counting`] found `pmu`: the paranoid level, the
/// user, the clock. Nothing here is needed to bind a set of software or hardware events, so
/// the backend looks it up when first asked ([`super::PerfBackend::caps`]).
pub(super) fn rest_of_caps(kernel: &dyn Kernel, pmu: bool) -> HostCaps {
    let (mhz, clock_source) = match crate::costfile::calibrated_mhz() {
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
