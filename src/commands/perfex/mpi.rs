//! Counting MPI jobs: one record per rank, merged into one report.
//!
//! Each rank of a job counts itself (the PMPI layer `libperfcompat-mpi.so`, between
//! `MPI_Init` and `MPI_Finalize`) or is counted by its own `perfex --mpi` (the whole rank
//! process). Either way the rank's counts become a [`RankRecord`]: a few lines of text, the
//! same whether MPI gathers them to rank 0 in fixed-size buffers ([`RECORD_BYTES`]) or
//! `perfex --mpi PREFIX` writes them to `PREFIX.<rank>`. [`merge`] checks that the records
//! belong together and [`Merged`] prints the job's report: one line per rank, then per event
//! the minimum and maximum (with their ranks), mean, sum and the imbalance `max / mean`.
//!
//! The record format (version 1), one `key<TAB>value` line each, events last (the tabs shown
//! here as spaces):
//!
//! ```text
//! perfcompat-rank 1
//! rank            3
//! host            node17
//! backend         perf
//! elapsed_s       0.512
//! event           0   task-clock  123456  -
//! ```
//!
//! An `event` line holds the R10000 event number, the Linux event it was counted as (`-`
//! when none), the count, and flags: `m` when the kernel multiplexed the counter (the count is
//! scaled), `-` otherwise.

use std::fmt::Write as _;

use super::{json_num, json_str, Options, Outcome, SelfCount, Status};
use crate::api::costs::Flavor;
use crate::base::error::{Error, Result};

/// The size of one rank's record when ranks exchange them in fixed-size buffers (the PMPI
/// layer's gather): enough for all 32 events with long names.
pub const RECORD_BYTES: usize = 8192;

/// The variables that name the events of a job's ranks, in the order they are read.
pub const EVENT_VARS: [&str; 3] = ["PERFCOMPAT_PRELOAD_EVENTS", "T5_EVENT0", "T5_EVENT1"];

/// The first line of a record.
const MAGIC: &str = "perfcompat-rank\t1";

/// One event of a rank.
#[derive(Debug, Clone, PartialEq)]
pub struct RankEvent {
    /// R10000 event number.
    pub event: u32,
    /// The Linux event it was counted as.
    pub linux_event: Option<String>,
    /// The count (scaled to the whole interval when multiplexed).
    pub count: f64,
    /// Whether the kernel multiplexed the counter, so the count is an estimate.
    pub multiplexed: bool,
}

/// What one rank counted.
#[derive(Debug, Clone, PartialEq)]
pub struct RankRecord {
    /// Its rank in `MPI_COMM_WORLD`.
    pub rank: u32,
    /// The host it ran on.
    pub host: String,
    /// The backend that counted.
    pub backend: String,
    /// Seconds it counted.
    pub elapsed_s: f64,
    /// Its counts, in event order.
    pub events: Vec<RankEvent>,
}

/// This host's name (`gethostname`), `?` if it has none.
pub fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most `buf.len()` bytes into `buf`.
    let r = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    if r != 0 || end == 0 {
        return "?".into();
    }
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// The rank of this process in its MPI job, from the environment its launcher sets (Open MPI
/// `OMPI_COMM_WORLD_RANK`, PMIx `PMIX_RANK`, MPICH/Hydra `PMI_RANK`, Slurm `SLURM_PROCID`).
pub fn rank_from_env() -> Result<u32> {
    for var in [
        "OMPI_COMM_WORLD_RANK",
        "PMIX_RANK",
        "PMI_RANK",
        "SLURM_PROCID",
    ] {
        if let Some(v) = crate::base::sys::env_var(var) {
            return v
                .trim()
                .parse()
                .map_err(|_| Error::InvalidArgument(format!("{var}={v:?} is not a rank number")));
        }
    }
    Err(Error::InvalidArgument(
        "not started by an MPI launcher: none of OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK or \
         SLURM_PROCID is set (run it as mpirun ... perfex --mpi PREFIX ...)"
            .into(),
    ))
}

fn clean(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_whitespace() { '_' } else { c })
        .collect()
}

/// The events a rank counts, from its environment: `PERFCOMPAT_PRELOAD_EVENTS` (R10000
/// numbers separated by commas, mapped as for `perfex -e`, or `all`), else `T5_EVENT0` and
/// `T5_EVENT1` (one number each), else event 0 (cycles), as `perfex` without `-e`.
pub fn options_from_env(command: Vec<std::ffi::OsString>) -> Result<Options> {
    let mut opts = Options {
        command,
        ..Options::default()
    };
    let get = |v: &str| crate::base::sys::env_var(v).filter(|s| !s.trim().is_empty());
    if let Some(list) = get(EVENT_VARS[0]) {
        if list.trim() == "all" {
            opts.all = true;
        } else {
            for item in list.split(',') {
                opts.events
                    .push(crate::api::perfex::parse_event(item).map_err(|e| {
                        Error::InvalidArgument(format!("{}={list:?}: {e}", EVENT_VARS[0]))
                    })?);
            }
        }
    } else {
        for var in &EVENT_VARS[1..] {
            if let Some(v) = get(var) {
                opts.events.push(
                    crate::api::perfex::parse_event(&v)
                        .map_err(|e| Error::InvalidArgument(format!("{var}={v:?}: {e}")))?,
                );
            }
        }
    }
    if opts.events.is_empty() && !opts.all {
        opts.events.push(0);
    }
    Ok(opts)
}

/// One rank's counting between `MPI_Init` and `MPI_Finalize` (the PMPI layer).
pub struct RankCount {
    count: SelfCount,
}

impl RankCount {
    /// Start counting the calling process (every thread and child it creates from now on) for
    /// the events of [`options_from_env`].
    pub fn start() -> Result<RankCount> {
        let opts = options_from_env(vec!["MPI rank".into()])?;
        Ok(RankCount {
            count: SelfCount::start(&opts)?,
        })
    }

    /// Read the counts into rank `rank`'s record.
    pub fn finish(&self, rank: u32) -> Result<RankRecord> {
        let outcome = self.count.finish(Status::Exited(0))?;
        Ok(RankRecord::from_outcome(rank, &hostname(), &outcome))
    }
}

/// This process's counting, between [`start_rank`] and [`finish_rank`] (the PMPI layer's
/// `perfcompat_mpi_start` and `perfcompat_mpi_finish`).
static RANK: std::sync::Mutex<Option<RankCount>> = std::sync::Mutex::new(None);

/// Start counting this rank ([`RankCount::start`]); a counting started before is dropped
/// first. On failure the rank runs uncounted.
pub fn start_rank() -> Result<()> {
    let mut slot = RANK.lock().unwrap_or_else(|p| p.into_inner());
    *slot = None;
    *slot = Some(RankCount::start()?);
    Ok(())
}

/// Stop counting this rank and write its record into `out`, NUL-padded (zeroed first, so a
/// rank that fails leaves a record of zeros, which [`merge_buffers`] reports as missing).
/// [`Error::NotCounting`] when [`start_rank`] failed or was not called, [`Error::RecordTooSmall`]
/// when the record and its NUL do not fit.
pub fn finish_rank(rank: u32, out: &mut [u8]) -> Result<()> {
    out.fill(0);
    let count = RANK
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take()
        .ok_or(Error::NotCounting)?;
    let text = count.finish(rank)?.encode();
    if text.len() >= out.len() {
        return Err(Error::RecordTooSmall {
            need: text.len() + 1,
            len: out.len(),
        });
    }
    out[..text.len()].copy_from_slice(text.as_bytes());
    Ok(())
}

/// Merge the fixed-size records that rank 0 gathered ([`RECORD_BYTES`] or another size, one
/// per rank in rank order). A record of zeros is a rank that could not count (it said why on
/// its own standard error): it is reported missing.
pub fn merge_buffers(buffers: &[u8], record_len: usize) -> Result<Merged> {
    if record_len == 0 {
        return Err(Error::InvalidArgument("record size 0".into()));
    }
    let mut records = Vec::new();
    for (k, chunk) in buffers.chunks(record_len).enumerate() {
        if chunk.iter().all(|&b| b == 0) {
            continue;
        }
        let text = std::str::from_utf8(chunk)
            .map_err(|_| Error::InvalidArgument(format!("the record of rank {k} is not text")))?;
        records.push(RankRecord::decode(
            text,
            &format!("the record of rank {k}"),
        )?);
    }
    let ranks = buffers.len().div_ceil(record_len) as u32;
    let mut m = merge(records)?;
    m.missing = (0..ranks)
        .filter(|k| !m.ranks.iter().any(|r| r.rank == *k))
        .collect();
    Ok(m)
}

/// Write a job's report where `PERFCOMPAT_MPI_OUTPUT` says (a file, created or truncated;
/// standard error when unset), as JSON when `PERFCOMPAT_MPI_FORMAT` is `json`, else as text.
pub fn write_report(m: &Merged) -> Result<()> {
    let json =
        crate::base::sys::env_var("PERFCOMPAT_MPI_FORMAT").is_some_and(|f| f.trim() == "json");
    let mut text = if json { m.json() } else { m.text() };
    if json {
        text.push('\n');
    }
    match crate::base::sys::env_os("PERFCOMPAT_MPI_OUTPUT").filter(|p| !p.is_empty()) {
        Some(path) => std::fs::write(&path, text).map_err(|e| {
            Error::InvalidArgument(format!(
                "PERFCOMPAT_MPI_OUTPUT={}: {}",
                path.to_string_lossy(),
                crate::base::error::io_text(&e)
            ))
        }),
        None => {
            use std::io::Write as _;
            let _ = std::io::stderr().write_all(text.as_bytes());
            Ok(())
        }
    }
}

impl RankRecord {
    /// The record of rank `rank` on `host` from what the perfex engine counted.
    pub fn from_outcome(rank: u32, host: &str, outcome: &Outcome) -> RankRecord {
        RankRecord {
            rank,
            host: host.to_string(),
            backend: outcome.backend.clone(),
            elapsed_s: outcome.counting_s,
            events: outcome
                .counts
                .iter()
                .map(|c| RankEvent {
                    event: c.event,
                    // A stand-in is named as what was counted, flagged (issue 46 item 1).
                    linux_event: match &c.stand_in {
                        Some(s) => Some(format!("{s}(STAND-IN)")),
                        None => c.linux_event.clone(),
                    },
                    count: c.count,
                    multiplexed: c.scaled(),
                })
                .collect(),
        }
    }

    /// The record as text (see the module documentation).
    pub fn encode(&self) -> String {
        let mut s = format!(
            "{MAGIC}\nrank\t{}\nhost\t{}\nbackend\t{}\nelapsed_s\t{}\n",
            self.rank,
            clean(&self.host),
            clean(&self.backend),
            self.elapsed_s
        );
        for e in &self.events {
            let _ = writeln!(
                s,
                "event\t{}\t{}\t{}\t{}",
                e.event,
                e.linux_event.as_deref().map_or("-".into(), clean),
                e.count,
                if e.multiplexed { "m" } else { "-" }
            );
        }
        s
    }

    /// Read a record written by [`RankRecord::encode`]; `what` names it in errors (a file
    /// name, a rank). Trailing NUL bytes (a fixed-size buffer) are ignored.
    pub fn decode(text: &str, what: &str) -> Result<RankRecord> {
        let bad = |why: String| Error::InvalidArgument(format!("{what}: {why}"));
        let text = text.trim_end_matches('\0');
        let mut lines = text.lines();
        if lines.next() != Some(MAGIC) {
            return Err(bad(
                "not a perfcompat rank record (perfex --mpi writes them)".into(),
            ));
        }
        let mut r = RankRecord {
            rank: u32::MAX,
            host: String::new(),
            backend: String::new(),
            elapsed_s: 0.0,
            events: Vec::new(),
        };
        for (n, line) in lines.enumerate() {
            let f: Vec<&str> = line.split('\t').collect();
            let num = |s: &str| -> Result<f64> {
                s.parse::<f64>()
                    .ok()
                    .filter(|v| v.is_finite() && *v >= 0.0)
                    .ok_or_else(|| bad(format!("line {}: {s:?} is not a count", n + 2)))
            };
            match f.as_slice() {
                ["rank", v] => {
                    r.rank = v
                        .parse()
                        .map_err(|_| bad(format!("line {}: bad rank {v:?}", n + 2)))?
                }
                ["host", v] => r.host = v.to_string(),
                ["backend", v] => r.backend = v.to_string(),
                ["elapsed_s", v] => r.elapsed_s = num(v)?,
                ["event", ev, linux, count, flags] => r.events.push(RankEvent {
                    event: ev
                        .parse()
                        .map_err(|_| bad(format!("line {}: bad event {ev:?}", n + 2)))?,
                    linux_event: (*linux != "-").then(|| linux.to_string()),
                    count: num(count)?,
                    multiplexed: flags.contains('m'),
                }),
                [""] => {}
                _ => return Err(bad(format!("line {}: unexpected {line:?}", n + 2))),
            }
        }
        if r.rank == u32::MAX {
            return Err(bad("no rank line".into()));
        }
        Ok(r)
    }
}

/// One event over the job.
#[derive(Debug, Clone, PartialEq)]
pub struct EventSummary {
    /// R10000 event number.
    pub event: u32,
    /// Its name (the Linux event, else the R10000 name).
    pub name: String,
    /// The smallest count and its rank (the lowest rank among equal counts).
    pub min: (f64, u32),
    /// The largest count and its rank (the lowest rank among equal counts).
    pub max: (f64, u32),
    /// The mean over the ranks.
    pub mean: f64,
    /// The sum over the ranks.
    pub sum: f64,
    /// `max / mean` (1 when balanced; 0 when the mean is 0).
    pub imbalance: f64,
}

/// The records of a job, merged.
#[derive(Debug, Clone, PartialEq)]
pub struct Merged {
    /// The ranks' records, by rank.
    pub ranks: Vec<RankRecord>,
    /// Per event, over the ranks.
    pub events: Vec<EventSummary>,
    /// Ranks below the highest one that sent no record (a rank that died before it could).
    pub missing: Vec<u32>,
}

fn event_name(e: &RankEvent) -> String {
    e.linux_event
        .clone()
        .unwrap_or_else(|| Flavor::R10000.event_name(e.event as usize).to_string())
}

/// Merge the records of one job. They must count the same events, and no rank may appear
/// twice.
pub fn merge(mut records: Vec<RankRecord>) -> Result<Merged> {
    if records.is_empty() {
        return Err(Error::InvalidArgument("no rank records to merge".into()));
    }
    records.sort_by_key(|r| r.rank);
    for w in records.windows(2) {
        if w[0].rank == w[1].rank {
            return Err(Error::InvalidArgument(format!(
                "rank {} has two records: are they from two jobs?",
                w[0].rank
            )));
        }
    }
    let first = &records[0];
    let evs: Vec<u32> = first.events.iter().map(|e| e.event).collect();
    for r in &records[1..] {
        let these: Vec<u32> = r.events.iter().map(|e| e.event).collect();
        if these != evs {
            return Err(Error::InvalidArgument(format!(
                "rank {} counted events {these:?} but rank {} counted {evs:?}: every rank must \
                 count the same events",
                r.rank, first.rank
            )));
        }
    }
    let n = records.len() as f64;
    let events = first
        .events
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let vals = records.iter().map(|r| (r.events[i].count, r.rank));
            let min = vals
                .clone()
                .fold((f64::INFINITY, 0), |a, v| if v.0 < a.0 { v } else { a });
            let max = vals
                .clone()
                .fold((f64::NEG_INFINITY, 0), |a, v| if v.0 > a.0 { v } else { a });
            let sum: f64 = vals.map(|v| v.0).sum();
            let mean = sum / n;
            EventSummary {
                event: e.event,
                name: event_name(e),
                min,
                max,
                mean,
                sum,
                imbalance: if mean > 0.0 { max.0 / mean } else { 0.0 },
            }
        })
        .collect();
    let top = records.last().map_or(0, |r| r.rank);
    let missing = (0..top)
        .filter(|k| !records.iter().any(|r| r.rank == *k))
        .collect();
    Ok(Merged {
        ranks: records,
        events,
        missing,
    })
}

fn hosts(ranks: &[RankRecord]) -> usize {
    let mut h: Vec<&str> = ranks.iter().map(|r| r.host.as_str()).collect();
    h.sort_unstable();
    h.dedup();
    h.len()
}

impl Merged {
    /// The report as text: one line per rank, then the per-event summary.
    pub fn text(&self) -> String {
        let backend = &self.ranks[0].backend;
        let mut s = format!(
            "MPI job: {} rank{} on {} host{} ({backend} backend)\n\n",
            self.ranks.len(),
            if self.ranks.len() == 1 { "" } else { "s" },
            hosts(&self.ranks),
            if hosts(&self.ranks) == 1 { "" } else { "s" },
        );
        let hw = self
            .ranks
            .iter()
            .map(|r| r.host.len())
            .max()
            .unwrap_or(4)
            .max(4);
        let cols: Vec<String> = self
            .events
            .iter()
            .map(|e| format!("{} {}", e.event, e.name))
            .collect();
        let cw: Vec<usize> = cols.iter().map(|c| c.len().max(14)).collect();
        let _ = write!(s, "{:>6}  {:<hw$}", "rank", "host");
        for (c, w) in cols.iter().zip(&cw) {
            let _ = write!(s, "  {c:>w$}");
        }
        s.push_str("  flags\n");
        for r in &self.ranks {
            let _ = write!(s, "{:>6}  {:<hw$}", r.rank, r.host);
            for (e, w) in r.events.iter().zip(&cw) {
                let _ = write!(s, "  {:>w$}", format!("{:.0}", e.count));
            }
            let m = r.events.iter().any(|e| e.multiplexed);
            let _ = writeln!(s, "  {}", if m { "multiplexed (scaled)" } else { "-" });
        }
        let _ = writeln!(
            s,
            "\n{:<24}  {:>14} {:>6}  {:>14} {:>6}  {:>16}  {:>16}  {:>8}",
            "event", "min", "rank", "max", "rank", "mean", "sum", "max/mean"
        );
        for e in &self.events {
            let _ = writeln!(
                s,
                "{:<24}  {:>14.0} {:>6}  {:>14.0} {:>6}  {:>16.1}  {:>16.0}  {:>8.3}",
                format!("{} {}", e.event, e.name),
                e.min.0,
                e.min.1,
                e.max.0,
                e.max.1,
                e.mean,
                e.sum,
                e.imbalance
            );
        }
        if !self.missing.is_empty() {
            let list: Vec<String> = self.missing.iter().map(u32::to_string).collect();
            let _ = writeln!(s, "\nNo record from rank(s) {}", list.join(", "));
        }
        s
    }

    /// The report as one JSON object.
    pub fn json(&self) -> String {
        let q = json_str;
        let num = json_num;
        let mut s = format!(
            "{{\"ranks\":{},\"hosts\":{},\"backend\":{},\"per_rank\":[",
            self.ranks.len(),
            hosts(&self.ranks),
            q(&self.ranks[0].backend)
        );
        for (i, r) in self.ranks.iter().enumerate() {
            if i > 0 {
                s.push(',');
            }
            let _ = write!(
                s,
                "{{\"rank\":{},\"host\":{},\"elapsed_s\":{},\"events\":[",
                r.rank,
                q(&r.host),
                num(r.elapsed_s)
            );
            for (j, e) in r.events.iter().enumerate() {
                if j > 0 {
                    s.push(',');
                }
                let _ = write!(
                    s,
                    "{{\"event\":{},\"name\":{},\"count\":{},\"multiplexed\":{}}}",
                    e.event,
                    q(&event_name(e)),
                    num(e.count),
                    e.multiplexed
                );
            }
            s.push_str("]}");
        }
        s.push_str("],\"events\":[");
        for (i, e) in self.events.iter().enumerate() {
            if i > 0 {
                s.push(',');
            }
            let _ = write!(
                s,
                "{{\"event\":{},\"name\":{},\"min\":{},\"min_rank\":{},\"max\":{},\
                 \"max_rank\":{},\"mean\":{},\"sum\":{},\"imbalance\":{}}}",
                e.event,
                q(&e.name),
                num(e.min.0),
                e.min.1,
                num(e.max.0),
                e.max.1,
                num(e.mean),
                num(e.sum),
                num(e.imbalance)
            );
        }
        let missing: Vec<String> = self.missing.iter().map(u32::to_string).collect();
        let _ = write!(s, "],\"missing_ranks\":[{}]}}", missing.join(","));
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(rank: u32, counts: &[f64]) -> RankRecord {
        RankRecord {
            rank,
            host: format!("node{}", rank / 2),
            backend: "perf".into(),
            elapsed_s: 1.5,
            events: counts
                .iter()
                .enumerate()
                .map(|(i, c)| RankEvent {
                    event: i as u32 * 25,
                    linux_event: Some(if i == 0 { "page-faults" } else { "cycles" }.into()),
                    count: *c,
                    multiplexed: rank == 2,
                })
                .collect(),
        }
    }

    #[test]
    fn records_round_trip_through_text_and_fixed_buffers() {
        let r = rec(3, &[1234.0, 5e9]);
        let mut buf = r.encode().into_bytes();
        assert!(buf.len() < RECORD_BYTES);
        buf.resize(RECORD_BYTES, 0);
        let back = RankRecord::decode(std::str::from_utf8(&buf).unwrap(), "rank 3").unwrap();
        assert_eq!(back, r);
        let e = RankRecord::decode("hello\n", "x.3")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("x.3") && e.contains("not a perfcompat rank record"),
            "{e}"
        );
        let e = RankRecord::decode(&r.encode().replace("1234", "12x4"), "f")
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a count"), "{e}");
    }

    #[test]
    fn merge_names_the_extreme_ranks_and_sums() {
        let m = merge(vec![
            rec(2, &[300.0, 7.0]),
            rec(0, &[100.0, 9.0]),
            rec(3, &[400.0, 7.0]),
            rec(1, &[200.0, 8.0]),
        ])
        .unwrap();
        assert_eq!(
            m.ranks.iter().map(|r| r.rank).collect::<Vec<_>>(),
            [0, 1, 2, 3]
        );
        let pf = &m.events[0];
        assert_eq!(
            (pf.min, pf.max, pf.sum, pf.mean),
            ((100.0, 0), (400.0, 3), 1000.0, 250.0)
        );
        assert!((pf.imbalance - 1.6).abs() < 1e-12);
        // Ties go to the lowest rank.
        assert_eq!((m.events[1].min, m.events[1].max), ((7.0, 2), (9.0, 0)));
        let t = m.text();
        assert!(t.contains("4 ranks on 2 hosts"), "{t}");
        assert!(t.contains("multiplexed (scaled)"), "{t}");
        let j = m.json();
        assert!(
            j.contains("\"min_rank\":0") && j.contains("\"max_rank\":3"),
            "{j}"
        );
        assert!(m.missing.is_empty());
    }

    #[test]
    fn merge_refuses_mixed_jobs_and_names_missing_ranks() {
        let e = merge(vec![rec(0, &[1.0]), rec(0, &[2.0])]).unwrap_err();
        assert!(e.to_string().contains("rank 0 has two records"), "{e}");
        let e = merge(vec![rec(0, &[1.0]), rec(1, &[1.0, 2.0])]).unwrap_err();
        assert!(e.to_string().contains("same events"), "{e}");
        let m = merge(vec![rec(0, &[1.0]), rec(3, &[2.0])]).unwrap();
        assert_eq!(m.missing, [1, 2]);
        assert!(m.text().contains("No record from rank(s) 1, 2"));
        assert!(merge(Vec::new()).is_err());
    }
}
