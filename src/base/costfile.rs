//! The perfex cost file: its format, its parser, and the host calibration cache (a cost file
//! `perfex --calibrate` writes) with the clock it records.
//!
//! A leaf below the backends: the perf backend estimates `cycles` without a PMU from the clock
//! a valid calibration cache records ([`calibrated_mhz`]), and the cost tables
//! ([`crate::api::costs`]) lay parsed files over their built-in tables.
//!
//! # File format
//! Exactly what [`crate::api::costs::CostTable::dump`] (`perfex -t`) prints, so a user dumps the
//! table, edits it and deletes the lines he does not want to change:
//!
//! ```text
//! # comment (also after any line)
//! clock 195 MHz
//! 26 Secondary data cache misses ................   313.00    78.25  1000.00 nsec
//! 25 1 0.25 25 clks
//! ```
//!
//! An event line is the event number (0-31), an optional name (ignored: the dump's dotted
//! name), then the typical, minimum and maximum cost and the unit `clks` or `nsec`. Costs are
//! finite, non-negative and `minimum <= typical <= maximum`. The optional `clock <MHz> MHz`
//! line (0.001 to 10^6 MHz) sets the clock used to turn cycles into time. A file with no
//! entry, an event or clock given twice, or any bad line is rejected as a whole
//! ([`Error::BadFile`] names the file, the line and the reason).

use std::path::{Path, PathBuf};

use crate::base::error::{Error, Result};
use crate::base::eventmap::read_config;

/// Number of events in a cost table (R10000 event numbers 0-31).
pub const EVENTS: usize = 32;

/// The unit of a cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Machine cycles at the table's clock.
    Clks,
    /// Nanoseconds.
    Nsec,
}

impl Unit {
    /// Its name in a cost file: `clks` or `nsec`.
    pub fn name(self) -> &'static str {
        match self {
            Unit::Clks => "clks",
            Unit::Nsec => "nsec",
        }
    }
}

/// The cost of one occurrence of an event.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cost {
    /// Typical cost.
    pub typical: f64,
    /// Minimum cost.
    pub minimum: f64,
    /// Maximum cost.
    pub maximum: f64,
    /// Unit of the three figures.
    pub unit: Unit,
}

impl Cost {
    /// Seconds for `count` occurrences at `clock_mhz`: (typical, minimum, maximum).
    pub fn seconds(&self, count: f64, clock_mhz: f64) -> (f64, f64, f64) {
        let per = match self.unit {
            Unit::Clks => 1e-6 / clock_mhz,
            Unit::Nsec => 1e-9,
        };
        (
            count * self.typical * per,
            count * self.minimum * per,
            count * self.maximum * per,
        )
    }
}

/// The largest cost a file may give (clks or nsec). A time is count x cost x (1e-6 / clock)
/// seconds, with a count below 2^64 and a clock of at least 0.001 MHz: at this cost it stays
/// below 2e296 s, finite with room for sums, where a cost of 1e308 made it `inf`.
pub const MAX_COST: f64 = 1e280;

/// A parsed cost file: the entries it gives, to be laid over a complete table.
#[derive(Debug, Clone, PartialEq)]
pub struct CostOverlay {
    /// The file it came from.
    pub file: String,
    /// The clock it sets, if any.
    pub clock_mhz: Option<f64>,
    /// The costs it sets, by event number.
    pub costs: [Option<Cost>; EVENTS],
}

impl CostOverlay {
    /// Parse the text of a cost file named `file` (see the module documentation).
    pub fn parse(text: &str, file: &str) -> Result<CostOverlay> {
        let bad = |line: usize, reason: String| Error::BadFile {
            file: file.to_string(),
            line,
            reason,
        };
        let mut o = CostOverlay {
            file: file.to_string(),
            clock_mhz: None,
            costs: [None; EVENTS],
        };
        let mut entries = 0;
        for (i, raw) in text.lines().enumerate() {
            let lineno = i + 1;
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let words: Vec<&str> = line.split_whitespace().collect();
            if words[0].eq_ignore_ascii_case("clock") {
                let [_, mhz, unit] = words[..] else {
                    return Err(bad(lineno, "expected 'clock <number> MHz'".into()));
                };
                if !unit.eq_ignore_ascii_case("mhz") {
                    return Err(bad(lineno, format!("clock unit '{unit}' is not MHz")));
                }
                let v = mhz
                    .parse::<f64>()
                    .ok()
                    // At least 0.001 MHz: `dump` writes the clock to 3 decimals, and a smaller
                    // one was written as 0, which no longer loaded (found by fuzz/cost_file).
                    .filter(|v| v.is_finite() && *v >= 0.001 && *v <= 1e6)
                    .ok_or_else(|| {
                        bad(
                            lineno,
                            format!("clock '{mhz}' is not a number of MHz in [0.001, 1e6]"),
                        )
                    })?;
                if o.clock_mhz.replace(v).is_some() {
                    return Err(bad(lineno, "the clock is given twice".into()));
                }
                entries += 1;
                continue;
            }
            let n = words[0]
                .parse::<usize>()
                .ok()
                .filter(|&n| n < EVENTS)
                .ok_or_else(|| {
                    bad(
                        lineno,
                        format!(
                            "'{}' is not an event number in 0..31 (nor 'clock')",
                            words[0]
                        ),
                    )
                })?;
            if words.len() < 5 {
                return Err(bad(
                    lineno,
                    format!(
                        "event {n}: expected typical, minimum and maximum cost and a unit \
                         (clks or nsec) after the event number"
                    ),
                ));
            }
            let tail = &words[words.len() - 4..];
            let unit = match tail[3] {
                u if u.eq_ignore_ascii_case("clks") => Unit::Clks,
                u if u.eq_ignore_ascii_case("nsec") => Unit::Nsec,
                u => {
                    return Err(bad(
                        lineno,
                        format!("event {n}: unit '{u}' is neither clks nor nsec"),
                    ))
                }
            };
            let mut v = [0.0f64; 3];
            for (k, what) in ["typical", "minimum", "maximum"].iter().enumerate() {
                v[k] = tail[k]
                    .parse::<f64>()
                    .ok()
                    .filter(|x| x.is_finite() && *x >= 0.0)
                    .ok_or_else(|| {
                        bad(
                            lineno,
                            format!(
                                "event {n}: {what} cost '{}' is not a non-negative number",
                                tail[k]
                            ),
                        )
                    })?;
                if v[k] > MAX_COST {
                    return Err(bad(
                        lineno,
                        format!(
                            "event {n}: {what} cost '{}' is too large: at most {MAX_COST:e}, \
                             or the time of a 64-bit count would overflow",
                            tail[k]
                        ),
                    ));
                }
            }
            let [typical, minimum, maximum] = v;
            if !(minimum <= typical && typical <= maximum) {
                return Err(bad(
                    lineno,
                    format!(
                        "event {n}: costs must satisfy minimum <= typical <= maximum \
                         (got {typical} {minimum} {maximum})"
                    ),
                ));
            }
            let cost = Cost {
                typical,
                minimum,
                maximum,
                unit,
            };
            if o.costs[n].replace(cost).is_some() {
                return Err(bad(lineno, format!("event {n} is given twice")));
            }
            entries += 1;
        }
        if entries == 0 {
            return Err(bad(0, "the file has no cost entry".into()));
        }
        Ok(o)
    }

    /// Read and parse the cost file at `path`.
    pub fn load(path: &Path) -> Result<CostOverlay> {
        let text = read_config(path)?;
        CostOverlay::parse(&text, &path.display().to_string())
    }
}

/// The environment variable naming the host calibration cache file.
pub const HOST_CACHE_ENV: &str = "PERFCOMPAT_HOST_COSTS";

/// Where `perfex --calibrate` caches the host table: `$PERFCOMPAT_HOST_COSTS`, else
/// `$XDG_CACHE_HOME/perfcompat/<hostname>.costs`, else `~/.cache/perfcompat/<hostname>.costs`.
pub fn host_cache_path() -> Option<PathBuf> {
    if let Some(p) = crate::base::sys::env_os(HOST_CACHE_ENV).filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    let dir = crate::base::sys::env_os("XDG_CACHE_HOME")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            crate::base::sys::env_os("HOME")
                .filter(|p| !p.is_empty())
                .map(|h| PathBuf::from(h).join(".cache"))
        })?;
    Some(dir.join("perfcompat").join(format!("{}.costs", hostname())))
}

/// This machine's host name, made safe for a file name (`localhost` when unknown).
pub(crate) fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname NUL-terminates on success.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    let name = if rc == 0 {
        let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
        String::from_utf8_lossy(&buf[..end]).into_owned()
    } else {
        String::new()
    };
    let clean: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if clean.is_empty() {
        "localhost".into()
    } else {
        clean
    }
}

/// The core clock `perfex --calibrate` measured, from the host cost cache
/// ([`host_cache_path`]) when it exists and parses as a whole (a cache with any bad line is
/// not used, as the cost tables do not use it either).
pub fn calibrated_mhz() -> Option<f64> {
    let path = host_cache_path().filter(|p| p.exists())?;
    CostOverlay::load(&path).ok()?.clock_mhz
}
