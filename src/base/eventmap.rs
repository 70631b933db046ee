//! The R10000/R12000 event table and the user's event map.
//!
//! libperfex programs name events by their R10000 number (0-31, as `perfex -e 26` does). On a
//! Linux host each number has to become a perf event spec. [`R10K_EVENTS`] lists all 32 events as
//! r10k_evcntrs(5) documents them, with the closest generic Linux perf event where one exists.
//!
//! A user can override or complete that mapping, and define names of his own, in the file named
//! by the `PERFCOMPAT_EVENTS` environment variable:
//!
//! ```text
//! # R10000 event number = perf event spec
//! 21 = cpu/event=0xc7,umask=0xff/
//! 25 = r01c2
//! # name = perf event spec
//! faults = page-faults
//! ```
//!
//! One mapping per line; `#` starts a comment that runs to the end of the line; blank lines are
//! ignored and whitespace around the key and the spec is trimmed. A key made only of decimal
//! digits is an event number (0-31); any other key is a name, which starts with an ASCII letter
//! or `_` and continues with ASCII letters, digits and `_ . : -`. The spec is everything after
//! the first `=` (so specs may contain `=` themselves); it must not be empty nor contain
//! whitespace. A file with any bad line, a duplicate key, content that is not UTF-8 or a size over
//! 1 MiB is rejected as a whole: [`EventMap::parse`] and [`EventMap::load`] then return
//! [`Error::BadFile`] naming the file, the line and the reason, and no part of it is used.
//!
//! The process's map ([`EventMap::global`]) is also checked against the backend when the
//! backend is first made ([`EventMap::init_global`], issue 46 item 9): a spec the perf backend
//! does not know (`26 = no-such-event`, a PMU alias of another machine written without its
//! PMU) rejects the file the same way, with its file and line, instead of failing later with
//! neither. A spec naming a PMU this host lacks (`cpu/event=0x3c/`) is kept: counting it says
//! why. The emulated backends check nothing here (their specs are model event names).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::OnceLock;

use crate::base::error::{Error, Result};
use crate::base::text::Text;

/// One R10000/R12000 event as documented in r10k_evcntrs(5).
///
/// Its strings are held in place ([`Text`]: they read as `&str`, and compare with one), not as
/// `&'static str`: a pointer in a static table is a relocation the dynamic loader writes in
/// every process that loads the library (issue 48, loading), and this table is read-only data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct R10kEvent {
    /// The event number, 0-31 (the number `perfex -e` takes).
    pub number: u32,
    /// The hardware counter that counts it: 0 for events 0-15, 1 for events 16-31.
    pub counter: u32,
    /// What the event counts on an R10000.
    pub r10000: Text<76>,
    /// What the event counts on an R12000.
    pub r12000: Text<76>,
    /// The closest Linux perf event spec, `None` if the host has no equivalent.
    pub host: Option<Text<24>>,
}

impl R10kEvent {
    /// [`host`](Self::host) as a string slice.
    pub fn host_str(&'static self) -> Option<&'static str> {
        self.host.as_ref().map(Text::as_str)
    }
}

const fn ev(
    number: u32,
    r10000: &'static str,
    r12000: &'static str,
    host: Option<&'static str>,
) -> R10kEvent {
    R10kEvent {
        number,
        counter: number / 16,
        r10000: Text::new(r10000),
        r12000: Text::new(r12000),
        host: match host {
            Some(h) => Some(Text::new(h)),
            None => None,
        },
    }
}

/// All 32 R10000/R12000 events, indexed by event number.
///
/// The descriptions follow r10k_evcntrs(5) (obvious typos of the man page fixed). The host
/// mapping picks a generic perf event (`perf list` names) only where it counts the same thing or
/// a close superset/subset of it on a modern CPU; events about the R10000's own machinery (Miss
/// Handling Table, way prediction, ECC, coherency, write-backs) and events for which Linux has
/// no generic event are `None`. The host mapping is by R10000 number: on an R12000, events 16
/// and 17 mean something else, and the host spec still follows the R10000 meaning.
///
/// The table lies in one section of the read-only data with the perf backend's event names
/// (`backend::perf::names`), so that the two lie in one 64 KiB window of it (issue 48): a
/// libperfex first use without an event map reads both (an event number's host spec, then that
/// spec's name), and apart the names' window was a page fault (about 13k instructions in the
/// arm64 guest) that nothing else of that first use touched.
#[link_section = ".rodata.perfcompat_event_tables"]
pub static R10K_EVENTS: [R10kEvent; 32] = [
    // Every clock cycle.
    ev(0, "Cycles", "Cycles", Some("cycles")),
    // Issued (R10000) / decoded (R12000) instructions include speculative ones; Linux only has
    // retired instructions in its generic set, the closest count there is.
    ev(
        1,
        "Issued instructions",
        "Decoded instructions",
        Some("instructions"),
    ),
    // Issued loads; L1-dcache-loads counts load accesses to the data cache.
    ev(2, "Issued loads", "Decoded loads", Some("L1-dcache-loads")),
    // Issued stores; L1-dcache-stores counts store accesses to the data cache.
    ev(
        3,
        "Issued stores",
        "Decoded stores",
        Some("L1-dcache-stores"),
    ),
    // No generic event counts store-conditional (or LL/SC style) instructions.
    ev(
        4,
        "Issued store conditionals",
        "Miss handling table occupancy",
        None,
    ),
    // No generic event counts failed store conditionals.
    ev(
        5,
        "Failed store conditionals",
        "Failed store conditionals",
        None,
    ),
    // Decoded/resolved branches; `branches` counts branch instructions.
    ev(
        6,
        "Decoded branches (resolved branches on rev 3.x)",
        "Resolved conditional branches",
        Some("branches"),
    ),
    // Secondary cache write-backs to the system interface: no generic event.
    ev(
        7,
        "Quadwords written back from secondary cache",
        "Quadwords written back from secondary cache",
        None,
    ),
    // ECC corrections: no generic event.
    ev(
        8,
        "Correctable secondary cache data array ECC errors",
        "Correctable secondary cache data array ECC errors",
        None,
    ),
    // Primary instruction cache misses.
    ev(
        9,
        "Primary instruction cache misses",
        "Primary instruction cache misses",
        Some("L1-icache-load-misses"),
    ),
    // Secondary instruction cache misses: LLC-load-misses mixes in data misses (and usually
    // counts the last level, not L2), so it would overcount; no generic equivalent.
    ev(
        10,
        "Secondary instruction cache misses",
        "Secondary instruction cache misses",
        None,
    ),
    // Way prediction is specific to the R10000's secondary cache.
    ev(
        11,
        "Instruction misprediction from secondary cache way prediction table",
        "Instruction misprediction from secondary cache way prediction table",
        None,
    ),
    // Coherency traffic from other processors: no generic event.
    ev(12, "External interventions", "External interventions", None),
    // Coherency traffic from other processors: no generic event.
    ev(13, "External invalidations", "External invalidations", None),
    // Virtual coherency conditions / functional unit completion cycles: no generic event.
    ev(
        14,
        "Virtual coherency conditions (ALU/FPU forward progress cycles on rev 3.x)",
        "ALU/FPU progress cycles",
        None,
    ),
    // Graduated (retired) instructions.
    ev(
        15,
        "Graduated instructions",
        "Graduated instructions",
        Some("instructions"),
    ),
    // Every clock cycle, counted on counter 1 (R10000 only).
    ev(
        16,
        "Cycles",
        "Executed prefetch instructions",
        Some("cycles"),
    ),
    // Graduated instructions, counted on counter 1 (R10000 only).
    ev(
        17,
        "Graduated instructions",
        "Prefetch primary data cache misses",
        Some("instructions"),
    ),
    // Graduated loads (the man page includes prefetches and synchronisation).
    ev(
        18,
        "Graduated loads",
        "Graduated loads",
        Some("L1-dcache-loads"),
    ),
    // Graduated stores.
    ev(
        19,
        "Graduated stores",
        "Graduated stores",
        Some("L1-dcache-stores"),
    ),
    // No generic event counts store conditionals.
    ev(
        20,
        "Graduated store conditionals",
        "Graduated store conditionals",
        None,
    ),
    // Linux has no generic floating point event; the raw event differs on every CPU.
    ev(
        21,
        "Graduated floating point instructions",
        "Graduated floating point instructions",
        None,
    ),
    // Primary data cache write-backs: no generic event.
    ev(
        22,
        "Quadwords written back from primary data cache",
        "Quadwords written back from primary data cache",
        None,
    ),
    // The R10000 TLB is unified and refilled by software; data TLB misses dominate.
    ev(23, "TLB misses", "TLB misses", Some("dTLB-load-misses")),
    // Mispredicted branches.
    ev(
        24,
        "Mispredicted branches",
        "Mispredicted branches",
        Some("branch-misses"),
    ),
    // Primary data cache misses.
    ev(
        25,
        "Primary data cache misses",
        "Primary data cache misses",
        Some("L1-dcache-load-misses"),
    ),
    // Secondary data cache misses: the last level cache is the closest generic event.
    ev(
        26,
        "Secondary data cache misses",
        "Secondary data cache misses",
        Some("LLC-load-misses"),
    ),
    // Way prediction is specific to the R10000's secondary cache.
    ev(
        27,
        "Data misprediction from secondary cache way prediction table",
        "Data misprediction from secondary cache way prediction table",
        None,
    ),
    // Snoop hits: no generic event.
    ev(
        28,
        "External intervention hits in secondary cache",
        "State of external intervention hits in secondary cache",
        None,
    ),
    // Snoop hits: no generic event.
    ev(
        29,
        "External invalidation hits in secondary cache",
        "State of invalidation hits in secondary cache",
        None,
    ),
    // Cache line state transitions: no generic event.
    ev(
        30,
        "Store/prefetch exclusive to clean block in secondary cache",
        "Miss Handling Table entries accessing memory",
        None,
    ),
    // Cache line state transitions: no generic event.
    ev(
        31,
        "Store/prefetch exclusive to shared block in secondary cache",
        "Store/prefetch exclusive to shared block in secondary cache",
        None,
    ),
];

/// The R10000/R12000 event with number `n`, `None` unless `n` is 0-31.
pub fn r10k_event(n: u32) -> Option<&'static R10kEvent> {
    R10K_EVENTS.get(usize::try_from(n).ok()?)
}

/// Largest event map file accepted, in bytes.
const MAX_FILE_SIZE: usize = 1 << 20;

crate::base::sys::env_name! {
    /// The environment variable naming the event map file.
    const ENV_VAR = "PERFCOMPAT_EVENTS";
}

/// The process's map (see [`EventMap::global`]).
static GLOBAL: OnceLock<EventMap> = OnceLock::new();

/// The user's event mappings: overrides of the R10000 event numbers and names of his own, each
/// standing for a Linux perf event spec.
#[derive(Debug, Clone, Default)]
pub struct EventMap {
    /// Event number -> perf event spec.
    numbers: BTreeMap<u32, String>,
    /// User-defined name -> perf event spec.
    names: BTreeMap<String, String>,
    /// The file it was read from, and the line of each key (numbers in decimal): what
    /// [`EventMap::check`] names.
    file: String,
    lines: BTreeMap<String, usize>,
}

/// Two maps are equal when they map the same keys to the same specs, wherever they were read.
impl PartialEq for EventMap {
    fn eq(&self, other: &EventMap) -> bool {
        self.numbers == other.numbers && self.names == other.names
    }
}

impl Eq for EventMap {}

impl EventMap {
    /// A map without any user mapping: every number uses its built-in host event.
    pub fn new() -> EventMap {
        EventMap::default()
    }

    /// Parse the text of an event map file; `file` names it in errors.
    ///
    /// The whole text is rejected if any line is bad (see the [module documentation](self) for
    /// the syntax).
    pub fn parse(text: &str, file: &str) -> Result<EventMap> {
        if text.len() > MAX_FILE_SIZE {
            return Err(too_large(file));
        }
        let mut map = EventMap::new();
        // Key as stored (numbers normalised to decimal) -> line of its first mapping.
        let mut seen: BTreeMap<String, usize> = BTreeMap::new();
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            let bad = |reason: String| Error::BadFile {
                file: file.to_string(),
                line,
                reason,
            };
            let content = match raw.find('#') {
                Some(p) => &raw[..p],
                None => raw,
            }
            .trim();
            if content.is_empty() {
                continue;
            }
            let (key, spec) = content.split_once('=').ok_or_else(|| {
                bad(format!(
                    "missing '=' in '{content}' (expected '<event number or name> = <event spec>')"
                ))
            })?;
            let (key, spec) = (key.trim(), spec.trim());
            if key.is_empty() {
                return Err(bad("empty event number or name before '='".to_string()));
            }
            if spec.is_empty() {
                return Err(bad(format!("empty event spec after '{key} ='")));
            }
            if spec.chars().any(char::is_whitespace) {
                return Err(bad(format!(
                    "event spec '{spec}' contains whitespace (a spec is a single word such as \
                     'r01c2' or 'cpu/event=0x3c,umask=0x0/')"
                )));
            }
            let stored_key = if key.bytes().all(|b| b.is_ascii_digit()) {
                let n = match key.parse::<u32>() {
                    Ok(n) if n <= 31 => n,
                    _ => return Err(bad(format!("event number {key} is out of range 0-31"))),
                };
                decimal(n)
            } else {
                if !valid_name(key) {
                    return Err(bad(format!(
                        "bad event name '{key}': a name starts with a letter or '_' and \
                         continues with letters, digits, '_', '.', ':' or '-'"
                    )));
                }
                key.to_string()
            };
            if let Some(first) = seen.get(&stored_key) {
                return Err(bad(format!(
                    "duplicate mapping for '{stored_key}' (first on line {first})"
                )));
            }
            match stored_key.parse::<u32>() {
                Ok(n) => map.numbers.insert(n, spec.to_string()),
                Err(_) => map.names.insert(stored_key.clone(), spec.to_string()),
            };
            seen.insert(stored_key, line);
        }
        map.file = file.to_string();
        map.lines = seen;
        Ok(map)
    }

    /// Check every line's spec with `known` (the backend's answer: is this an event it
    /// knows?), in line order; the first unknown one is an [`Error::BadFile`] naming the file,
    /// the line and the reason (issue 46 item 9: a line `26 = no-such-event` once loaded
    /// silently and failed later, naming neither). A spec that is a name the map defines (an
    /// alias of an alias) is not the backend's to know and is not asked about.
    pub fn check(&self, known: &dyn Fn(&str) -> Result<()>) -> Result<()> {
        let mut lines: Vec<(usize, &str)> = self
            .numbers
            .iter()
            .map(|(n, spec)| (decimal(*n), spec))
            .chain(self.names.iter().map(|(k, spec)| (k.clone(), spec)))
            .map(|(k, spec)| (self.lines.get(&k).copied().unwrap_or(0), spec.as_str()))
            .collect();
        lines.sort_unstable();
        for (line, spec) in lines {
            if self.names.contains_key(spec) {
                continue;
            }
            if let Err(e) = known(spec) {
                return Err(Error::BadFile {
                    file: self.file.clone(),
                    line,
                    reason: e.to_string(),
                });
            }
        }
        Ok(())
    }

    /// Read and parse the event map file at `path`.
    ///
    /// A file that cannot be read is an [`Error::FileUnreadable`]; a file over 1 MiB is an
    /// [`Error::BadFile`] at line 0. Content that is not UTF-8 is reported at the line holding
    /// the first bad byte.
    pub fn load(path: &Path) -> Result<EventMap> {
        let text = read_config(path)?;
        EventMap::parse(&text, &path.display().to_string())
    }

    /// The map from the file named by `PERFCOMPAT_EVENTS`; an empty map when the variable is
    /// unset or empty.
    pub fn from_env() -> Result<EventMap> {
        match crate::base::sys::env_os(ENV_VAR) {
            Some(p) if !p.is_empty() => EventMap::load(Path::new(&p)),
            _ => Ok(EventMap::new()),
        }
    }

    /// The process-wide map, read from `PERFCOMPAT_EVENTS` on first use.
    ///
    /// If the file is bad, the error is printed once to stderr and the built-in mapping is used
    /// alone. The backend's first use ([`crate::backend::global`]) reads it through
    /// [`EventMap::init_global`], which checks every line's event too.
    pub fn global() -> &'static EventMap {
        EventMap::init_global(&|_| Ok(()))
    }

    /// [`EventMap::global`], read on this first use and every line's spec checked with
    /// `known` ([`EventMap::check`]); after the first use, the map already read.
    pub fn init_global(known: &dyn Fn(&str) -> Result<()>) -> &'static EventMap {
        GLOBAL.get_or_init(|| {
            EventMap::from_env()
                .and_then(|m| m.check(known).map(|()| m))
                .unwrap_or_else(|e| {
                    crate::stderr_line!("perfcompat: {e}; the {ENV_VAR} file is ignored");
                    EventMap::new()
                })
        })
    }

    /// The user's spec for event number `n`, if he mapped it.
    pub fn number(&self, n: u32) -> Option<&str> {
        self.numbers.get(&n).map(String::as_str)
    }

    /// The perf event spec to count R10000 event `n` on this host: the user's mapping if any,
    /// else the built-in one.
    ///
    /// Fails with [`Error::UnknownEvent`] if `n` is not 0-31 and with
    /// [`Error::EventUnavailable`] if the event has no host equivalent and the user did not map
    /// it.
    pub fn host_spec(&self, n: u32) -> Result<&str> {
        if let Some(spec) = self.number(n) {
            return Ok(spec);
        }
        let ev = r10k_event(n).ok_or_else(|| Error::UnknownEvent {
            event: n.to_string(),
            backend: "R10000 event table (events are 0-31)".into(),
        })?;
        ev.host_str().ok_or_else(|| Error::EventUnavailable {
            event: n.to_string(),
            reason: format!(
                "R10000 event {n} ({}) has no Linux equivalent; map it in a {ENV_VAR} file \
                 (a line '<number> = <Linux event>'; `perfex -l` lists the events that count \
                 here)",
                ev.r10000
            ),
        })
    }

    /// The spec the user defined for `name`, if any.
    pub fn alias(&self, name: &str) -> Option<&str> {
        self.names.get(name).map(String::as_str)
    }

    /// All user-defined names and their specs, sorted by name.
    pub fn aliases(&self) -> Vec<(&str, &str)> {
        self.names
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect()
    }
}

fn too_large(file: &str) -> Error {
    Error::BadFile {
        file: file.to_string(),
        line: 0,
        reason: format!("the file is larger than {MAX_FILE_SIZE} bytes (1 MiB)"),
    }
}

/// Read a configuration file (event map, cost table) as UTF-8 text of at most 1 MiB.
///
/// Only a regular file is read. It is opened with `O_NONBLOCK` and looked at before anything
/// is read, so that a FIFO (whose open would wait for a writer, and whose read would wait for
/// data) or a device cannot block the caller: a directory is an [`Error::FileUnreadable`]
/// with `EISDIR`, anything else not a regular file an [`Error::BadFile`] at line 0.
/// A file that cannot be read is an [`Error::FileUnreadable`] with the errno; a file over 1 MiB
/// is an [`Error::BadFile`] at line 0. Content that is not UTF-8 is reported at the line
/// holding the first bad byte.
pub(crate) fn read_config(path: &Path) -> Result<String> {
    let file = path.display().to_string();
    let unreadable = |errno: i32| Error::FileUnreadable {
        file: file.clone(),
        errno,
    };
    let f = ConfigFile::open(path).map_err(unreadable)?;
    let (mode, size) = f.kind_and_size().map_err(unreadable)?;
    if mode == libc::S_IFDIR {
        return Err(unreadable(libc::EISDIR));
    }
    if mode != libc::S_IFREG {
        let what = match mode {
            libc::S_IFIFO => "a FIFO",
            libc::S_IFCHR => "a character device",
            libc::S_IFBLK => "a block device",
            libc::S_IFSOCK => "a socket",
            _ => "not a file",
        };
        return Err(Error::BadFile {
            file: file.clone(),
            line: 0,
            reason: format!("not a regular file ({what}): only regular files are read"),
        });
    }
    let bytes = f
        .read_at_most(MAX_FILE_SIZE + 1, size)
        .map_err(unreadable)?;
    if bytes.len() > MAX_FILE_SIZE {
        return Err(too_large(&file));
    }
    String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let line = e.as_bytes()[..at].iter().filter(|&&b| b == b'\n').count() + 1;
        Error::BadFile {
            file: file.clone(),
            line,
            reason: format!("the file is not valid UTF-8 (bad byte at offset {at})"),
        }
    })
}

/// A configuration file open for reading, through system calls made inline
/// ([`crate::base::sys::syscall6`]): an event map is read on a first use, where the C library's
/// `open`, `statx` and `read` would each be looked up (the library is bound lazily; issue 48).
/// Opened non-blocking (a FIFO cannot block the caller), closed on drop (inline too).
struct ConfigFile(i32);

impl Drop for ConfigFile {
    fn drop(&mut self) {
        use std::os::fd::FromRawFd;
        // SAFETY: the descriptor `open` gave this value, closed once, here.
        crate::base::sys::close(unsafe { std::os::fd::OwnedFd::from_raw_fd(self.0) });
    }
}

impl ConfigFile {
    /// Open `path` read-only; the errno on failure (`EIO` for a path holding a NUL byte, as
    /// the standard library's error without an errno was reported).
    fn open(path: &Path) -> std::result::Result<ConfigFile, i32> {
        use std::os::fd::IntoRawFd;
        use std::os::unix::ffi::OsStrExt;
        let name = std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(|_| libc::EIO)?;
        let fd =
            crate::base::sys::openat(libc::AT_FDCWD, &name, libc::O_RDONLY | libc::O_NONBLOCK)?;
        Ok(ConfigFile(fd.into_raw_fd()))
    }

    /// The file's type (`S_IFMT` bits of its mode) and size.
    fn kind_and_size(&self) -> std::result::Result<(u32, u64), i32> {
        use crate::base::sys::{sys_result, syscall6};
        // SAFETY: statx writes the struct; zeroed is a valid value of it.
        let mut st: libc::statx = unsafe { std::mem::zeroed() };
        // The empty path on the stack, not a `c""` among the merged strings: the kernel's read
        // of it was a first use's only touch of their last 64 KB window (issue 48, i48u).
        let empty = 0u8;
        // SAFETY: the empty path with AT_EMPTY_PATH names the descriptor; `st` is writable.
        let r = unsafe {
            syscall6(
                libc::SYS_statx,
                [
                    self.0 as usize,
                    &empty as *const u8 as usize,
                    libc::AT_EMPTY_PATH as usize,
                    (libc::STATX_TYPE | libc::STATX_SIZE) as usize,
                    &mut st as *mut libc::statx as usize,
                    0,
                ],
            )
        };
        sys_result(r)?;
        Ok((u32::from(st.stx_mode) & libc::S_IFMT, st.stx_size))
    }

    /// Up to `limit` bytes of the regular file (`size`, its size, sizes the first read).
    fn read_at_most(&self, limit: usize, size: u64) -> std::result::Result<Vec<u8>, i32> {
        use crate::base::sys::sys_result;
        let mut bytes: Vec<u8> = Vec::with_capacity((size as usize).min(limit) + 1);
        while bytes.len() < limit {
            if bytes.len() == bytes.capacity() {
                bytes.reserve(bytes.capacity().max(64).min(limit - bytes.len()));
            }
            let room = (bytes.capacity() - bytes.len()).min(limit - bytes.len());
            // SAFETY: reads at most `room` bytes into the vector's spare capacity.
            let r = unsafe {
                crate::base::sys::read(self.0, bytes.as_mut_ptr().add(bytes.len()), room)
            };
            match sys_result(r) {
                Ok(0) => break,
                Ok(n) => {
                    // SAFETY: the kernel wrote `n` bytes there.
                    unsafe { bytes.set_len(bytes.len() + n) };
                    // A regular file read short once it holds its size is at its end: no
                    // further read to see 0 (issue 48, first use: one system call fewer).
                    if n < room && bytes.len() as u64 >= size {
                        break;
                    }
                }
                Err(libc::EINTR) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(bytes)
    }
}

/// `n` in decimal, written digit by digit: the map's number keys are normalised so on every
/// load, and `u32`'s `Display` reads its table of digit pairs from a 64 KiB window of the
/// library's read-only data that nothing else in a first use reads (issue 48, first use: one page
/// fault, about 14k instructions in the arm64 guest).
fn decimal(mut n: u32) -> String {
    let mut digits = [0u8; 10];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    digits[at..].iter().map(|&d| char::from(d)).collect()
}

/// Whether `key` may be the key of a map line: an event number 0-31 or a valid name.
pub fn valid_key(key: &str) -> bool {
    match key.parse::<u32>() {
        Ok(n) => n <= 31,
        Err(_) => valid_name(key),
    }
}

/// Whether `key` is a valid user-defined event name.
fn valid_name(key: &str) -> bool {
    let mut chars = key.chars();
    match chars.next() {
        Some(c) if c.is_ascii_alphabetic() || c == '_' => {}
        _ => return false,
    }
    chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A configuration file is read through system calls made inline (issue 48, first use: the
    /// C library's `open`, `statx` and `read` would each be looked up on a first use): seen as
    /// `errno`, which they leave alone, with the same errors.
    #[test]
    fn configuration_files_are_read_inline_leaving_errno_alone() {
        // SAFETY: the thread's own errno.
        unsafe { *libc::__errno_location() = 12345 };
        let dir = std::env::temp_dir().join(format!("perfcompat-inline-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let map = dir.join("ev.map");
        std::fs::write(&map, "0 = cycles\n").unwrap();
        assert_eq!(read_config(&map).unwrap(), "0 = cycles\n");
        match read_config(&dir.join("missing")) {
            Err(Error::FileUnreadable { errno, .. }) => assert_eq!(errno, libc::ENOENT),
            other => panic!("{other:?}"),
        }
        match read_config(&dir) {
            Err(Error::FileUnreadable { errno, .. }) => assert_eq!(errno, libc::EISDIR),
            other => panic!("{other:?}"),
        }
        // SAFETY: as above.
        assert_eq!(unsafe { *libc::__errno_location() }, 12345);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn bad(text: &str) -> (usize, String) {
        match EventMap::parse(text, "ev.map") {
            Err(Error::BadFile { file, line, reason }) => {
                assert_eq!(file, "ev.map");
                (line, reason)
            }
            other => panic!("expected BadFile for {text:?}, got {other:?}"),
        }
    }

    #[test]
    fn decimal_writes_what_display_writes() {
        for n in [0, 1, 9, 10, 16, 31, 99, 100, 4096, u32::MAX] {
            assert_eq!(decimal(n), n.to_string());
        }
    }

    #[test]
    fn table_is_indexed_by_number() {
        for (i, e) in R10K_EVENTS.iter().enumerate() {
            assert_eq!(e.number as usize, i);
            assert_eq!(e.counter, e.number / 16);
            assert!(!e.r10000.is_empty() && !e.r12000.is_empty());
            assert_eq!(r10k_event(i as u32), Some(e));
        }
        assert_eq!(r10k_event(32), None);
        assert_eq!(r10k_event(u32::MAX), None);
    }

    #[test]
    fn host_none_exactly_for_events_without_equivalent() {
        let none = [
            4, 5, 7, 8, 10, 11, 12, 13, 14, 20, 21, 22, 27, 28, 29, 30, 31,
        ];
        for e in &R10K_EVENTS {
            assert_eq!(
                e.host.is_none(),
                none.contains(&e.number),
                "event {}",
                e.number
            );
        }
        let host = |n: usize| R10K_EVENTS[n].host.unwrap();
        assert_eq!(host(0), "cycles");
        assert_eq!(host(16), "cycles");
        assert_eq!(host(15), "instructions");
        assert_eq!(host(17), "instructions");
        assert_eq!(host(25), "L1-dcache-load-misses");
        assert_eq!(host(26), "LLC-load-misses");
    }

    #[test]
    fn r12000_differences() {
        let r12 = |n: usize| R10K_EVENTS[n].r12000;
        assert_eq!(r12(1), "Decoded instructions");
        assert_eq!(r12(16), "Executed prefetch instructions");
        assert_eq!(r12(17), "Prefetch primary data cache misses");
        assert_eq!(r12(30), "Miss Handling Table entries accessing memory");
        for n in [
            0, 5, 7, 8, 9, 10, 11, 12, 13, 15, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 31,
        ] {
            assert_eq!(R10K_EVENTS[n].r10000, r12(n), "event {n}");
        }
    }

    #[test]
    fn parse_accepts_numbers_names_comments() {
        let text = "# header comment\n\
                    \n\
                    \t 21 = cpu/event=0xc7,umask=0xff/   # fp\n\
                    25=r01c2\n\
                    07 = page-faults\n\
                    _my.ev:x-1 = cycles:u\r\n\
                    Zed = instructions\n   \n";
        let m = EventMap::parse(text, "f").unwrap();
        assert_eq!(m.number(21), Some("cpu/event=0xc7,umask=0xff/"));
        assert_eq!(m.number(25), Some("r01c2"));
        assert_eq!(m.number(7), Some("page-faults"));
        assert_eq!(m.number(0), None);
        assert_eq!(m.alias("_my.ev:x-1"), Some("cycles:u"));
        assert_eq!(m.alias("Zed"), Some("instructions"));
        assert_eq!(m.alias("zed"), None);
        assert_eq!(
            m.aliases(),
            vec![("Zed", "instructions"), ("_my.ev:x-1", "cycles:u")]
        );
    }

    #[test]
    fn parse_empty_and_comment_only() {
        assert_eq!(EventMap::parse("", "f").unwrap(), EventMap::new());
        assert_eq!(
            EventMap::parse("# nothing\n\n   # more\n", "f").unwrap(),
            EventMap::new()
        );
        assert!(EventMap::new().aliases().is_empty());
    }

    #[test]
    fn parse_missing_equals() {
        let (line, reason) = bad("# c\n21 cycles\n");
        assert_eq!(line, 2);
        assert!(reason.contains("missing '='"), "{reason}");
    }

    #[test]
    fn parse_empty_key() {
        let (line, reason) = bad("\n\n = cycles\n");
        assert_eq!(line, 3);
        assert!(reason.contains("empty event number or name"), "{reason}");
    }

    #[test]
    fn parse_empty_spec() {
        let (line, reason) = bad("1 = cycles\n2 =   # nothing\n");
        assert_eq!(line, 2);
        assert!(reason.contains("empty event spec"), "{reason}");
    }

    #[test]
    fn parse_spec_with_whitespace() {
        let (line, reason) = bad("1 = cpu/event=0x3c, umask=0/\n");
        assert_eq!(line, 1);
        assert!(reason.contains("contains whitespace"), "{reason}");
    }

    #[test]
    fn parse_number_out_of_range() {
        let (line, reason) = bad("0 = cycles\n40 = cycles\n");
        assert_eq!(line, 2);
        assert_eq!(reason, "event number 40 is out of range 0-31");
        let (line, reason) = bad("99999999999999999999 = cycles");
        assert_eq!(line, 1);
        assert!(reason.contains("out of range 0-31"), "{reason}");
        assert_eq!(bad("32=x").0, 1);
    }

    #[test]
    fn parse_bad_name() {
        for (text, want) in [
            ("1abc = x", 1),
            ("a = y\n-1 = x", 2),
            ("\nna$me = x", 2),
            ("\n\nname with space = x", 3),
            ("é = x", 1),
            ("a/b = x", 1),
        ] {
            let (line, reason) = bad(text);
            assert_eq!(line, want, "{text:?}");
            assert!(reason.contains("bad event name"), "{reason}");
        }
    }

    #[test]
    fn parse_duplicates() {
        let (line, reason) = bad("\n\n25 = r01c2\n\n025 = r02c2\n");
        assert_eq!(line, 5);
        assert_eq!(reason, "duplicate mapping for '25' (first on line 3)");
        let (line, reason) = bad("x = cycles\ny = cycles\nx = instructions\n");
        assert_eq!(line, 3);
        assert_eq!(reason, "duplicate mapping for 'x' (first on line 1)");
    }

    #[test]
    fn parse_is_all_or_nothing() {
        // Good lines before and after the bad one: nothing of the file is returned.
        let r = EventMap::parse("1 = cycles\nfoo = bar\n40 = x\n2 = instructions\n", "f");
        assert!(matches!(r, Err(Error::BadFile { line: 3, .. })));
    }

    #[test]
    fn parse_too_large() {
        let text = "# padding\n".repeat(MAX_FILE_SIZE / 10 + 1);
        let (line, reason) = bad(&text);
        assert_eq!(line, 0);
        assert!(reason.contains("1 MiB"), "{reason}");
    }

    fn tmpfile(name: &str, content: &[u8]) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("perfcompat-eventmap-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join(name);
        std::fs::write(&p, content).unwrap();
        p
    }

    #[test]
    fn load_reads_file() {
        let p = tmpfile(
            "good",
            b"21 = fp_arith_inst_retired.scalar_double\nx = cycles\n",
        );
        let m = EventMap::load(&p).unwrap();
        assert_eq!(
            m.host_spec(21).unwrap(),
            "fp_arith_inst_retired.scalar_double"
        );
        assert_eq!(m.alias("x"), Some("cycles"));
    }

    #[test]
    fn load_errors() {
        let missing = std::env::temp_dir().join("perfcompat-no-such-dir/none.map");
        match EventMap::load(&missing) {
            Err(e @ Error::FileUnreadable { .. }) => {
                assert_eq!(e.errno(), libc::ENOENT);
                let msg = e.to_string();
                assert!(msg.starts_with(&missing.display().to_string()), "{msg}");
                assert!(msg.contains("No such file"), "{msg}");
            }
            other => panic!("{other:?}"),
        }
        let p = tmpfile("latin1", b"1 = cycles\n2 = caf\xe9\n");
        match EventMap::load(&p) {
            Err(Error::BadFile { line, reason, .. }) => {
                assert_eq!(line, 2);
                assert!(reason.contains("UTF-8"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
        let p = tmpfile("big", &vec![b'#'; MAX_FILE_SIZE + 1]);
        match EventMap::load(&p) {
            Err(Error::BadFile { line, reason, .. }) => {
                assert_eq!(line, 0);
                assert!(reason.contains("1 MiB"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
        let p = tmpfile("bad", b"1 = cycles\n2 = a b\n");
        let e = EventMap::load(&p).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "{}:2: event spec 'a b' contains whitespace (a spec is a single word such as \
                 'r01c2' or 'cpu/event=0x3c,umask=0x0/')",
                p.display()
            )
        );
    }

    #[test]
    fn host_spec_builtin_override_and_errors() {
        let m = EventMap::new();
        assert_eq!(m.host_spec(0).unwrap(), "cycles");
        assert_eq!(m.host_spec(26).unwrap(), "LLC-load-misses");
        assert_eq!(
            m.host_spec(21),
            Err(Error::EventUnavailable {
                event: "21".into(),
                reason: "R10000 event 21 (Graduated floating point instructions) has no Linux \
                         equivalent; map it in a PERFCOMPAT_EVENTS file (a line '<number> = \
                         <Linux event>'; `perfex -l` lists the events that count here)"
                    .into(),
            })
        );
        assert_eq!(
            m.host_spec(32),
            Err(Error::UnknownEvent {
                event: "32".into(),
                backend: "R10000 event table (events are 0-31)".into(),
            })
        );
        let m = EventMap::parse("21 = r01c7\n0 = ref-cycles", "f").unwrap();
        assert_eq!(m.host_spec(21).unwrap(), "r01c7");
        assert_eq!(m.host_spec(0).unwrap(), "ref-cycles");
        assert_eq!(m.host_spec(16).unwrap(), "cycles");
    }

    #[test]
    fn check_names_the_file_and_line_of_an_unknown_spec() {
        let m =
            EventMap::parse("# c\n5 = r0105\nx = y\ny = bogus\n\n26 = nope\n", "ev.map").unwrap();
        let known = |spec: &str| match spec {
            "bogus" | "nope" => Err(Error::UnknownEvent {
                event: spec.into(),
                backend: "test".into(),
            }),
            _ => Ok(()),
        };
        // Line 4 comes first; `x = y` names a name of the map and is not asked about.
        match m.check(&known) {
            Err(Error::BadFile { file, line, reason }) => {
                assert_eq!((file.as_str(), line), ("ev.map", 4));
                assert!(reason.contains("'bogus'"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
        assert!(EventMap::parse("5 = r0105\nx = y\n", "f")
            .unwrap()
            .check(&known)
            .is_ok());
        assert!(valid_key("25") && valid_key("PF_BRANCHMISS") && !valid_key("32"));
    }

    #[test]
    fn from_env_and_global() {
        // The only test touching PERFCOMPAT_EVENTS, so no other test races with it.
        std::env::remove_var(ENV_VAR);
        assert_eq!(EventMap::from_env().unwrap(), EventMap::new());
        std::env::set_var(ENV_VAR, "");
        assert_eq!(EventMap::from_env().unwrap(), EventMap::new());
        let p = tmpfile("env", b"5 = r0105\n");
        std::env::set_var(ENV_VAR, &p);
        assert_eq!(EventMap::from_env().unwrap().number(5), Some("r0105"));
        let g = EventMap::global();
        assert_eq!(g.number(5), Some("r0105"));
        assert!(std::ptr::eq(g, EventMap::global()));
        std::env::set_var(ENV_VAR, p.with_file_name("missing"));
        assert!(matches!(
            EventMap::from_env(),
            Err(Error::FileUnreadable { .. })
        ));
        std::env::remove_var(ENV_VAR);
    }
}
