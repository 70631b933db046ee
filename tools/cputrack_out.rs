//! cputrack's output: the column titles and one line per record of `perfcompat::commands::cputrack`.
//!
//! ```text
//!    time lwp      event      pic0      pic1
//!   1.007   1       tick    765308    219233
//! ```
//! `-f` adds a `pid` column after the time, `-t` a `tsc` column after the event. The new
//! command line of an `exec` leaves the counter columns blank; a `fork` line has two blank
//! columns of counts and no `tsc`, whatever the set, as Sun's cputrack prints it
//! (`"%9s %9s # %d"`); notes follow a `#`, and with several sets each line with counts names
//! its set the same way.

use std::io::Write;

use perfcompat::commands::cputrack::{Kind, Record, Sink};
use perfcompat::CounterSet;

/// The output format and where it goes.
pub struct Out<W: Write> {
    /// Where the lines go.
    pub w: W,
    /// A `pid` column (`-f`).
    pub pid: bool,
    /// A `tsc` column (`-t`).
    pub tsc: bool,
    /// The specification of each set, named on the lines when there are several.
    pub specs: Vec<String>,
    /// The number of requests of each set.
    pub widths: Vec<usize>,
    /// Column titles still to print before the first line.
    pub pending_title: Option<String>,
    /// What the output is, for the message when a write fails: the `-o` file's name, else
    /// "the standard output".
    pub name: String,
    /// A write failed (and was reported on standard error): nothing more is written, and the
    /// command exits with status 1.
    pub failed: bool,
}

impl<W: Write> Out<W> {
    /// The output of `sets`, given as `specs`, into `w`.
    pub fn new(w: W, sets: &[CounterSet], specs: &[String], pid: bool, tsc: bool) -> Out<W> {
        Out {
            w,
            pid,
            tsc,
            specs: specs.to_vec(),
            widths: sets.iter().map(CounterSet::len).collect(),
            pending_title: None,
            name: "the standard output".into(),
            failed: false,
        }
    }

    /// The column titles, for the first set's counters (printed by [`Sink::record`] before
    /// the first line when put in `pending_title`).
    pub fn title(&self, first: &CounterSet) -> String {
        let mut s = format!("{:>7}", "time");
        if self.pid {
            s.push_str(&format!("{:>7}", "pid"));
        }
        s.push_str(&format!("{:>4}{:>11}", "lwp", "event"));
        if self.tsc {
            s.push_str(&format!("{:>10}", "tsc"));
        }
        for r in first.requests() {
            s.push_str(&format!("{:>10}", format!("pic{}", r.counter.unwrap_or(0))));
        }
        s + "\n"
    }

    /// The line of one record.
    pub fn line(&self, r: &Record) -> String {
        let mut s = format!("{:>7.3}", r.time);
        if self.pid {
            s.push_str(&format!("{:>7}", r.pid));
        }
        s.push_str(&format!("{:>4}{:>11}", r.lwp, r.kind.name()));
        if r.kind == Kind::Fork {
            // Sun's fork line: two blank 9-character fields, then the child's id.
            s.push_str(&" ".repeat(20));
            if let Some(n) = &r.note {
                s.push_str(&format!(" # {n}"));
            }
            return s + "\n";
        }
        if self.tsc {
            match r.cycles {
                Some(c) => s.push_str(&format!("{c:>10}")),
                None => s.push_str(&format!("{:>10}", "")),
            }
        }
        if r.values.is_empty() {
            let n = self.widths.get(r.set).copied().unwrap_or(0);
            s.push_str(&" ".repeat(10 * n));
        }
        for v in &r.values {
            s.push_str(&format!("{v:>10}"));
        }
        if let Some(n) = &r.note {
            s.push_str(&format!(" # {n}"));
        } else if self.specs.len() > 1 {
            if let Some(spec) = self.specs.get(r.set) {
                s.push_str(&format!(" # {spec}"));
            }
        }
        s.truncate(s.trim_end().len());
        s + "\n"
    }

    /// Write `text` at once and flush it, so that lines of several controllers (one per
    /// followed process) do not mix, and nothing is left buffered when one is copied by fork.
    /// The first failure is reported on standard error, naming the output (a copy following a
    /// child reports its own); after it nothing more is written.
    pub fn put(&mut self, text: &str) -> perfcompat::Result<()> {
        let failed = |e: Option<i32>| perfcompat::Error::Os {
            op: "writing the output",
            errno: e.unwrap_or(libc::EIO),
        };
        if self.failed {
            return Err(failed(None));
        }
        self.w
            .write_all(text.as_bytes())
            .and_then(|()| self.w.flush())
            .map_err(|e| {
                self.failed = true;
                // Standard error may be gone too (a closed pipe): then nothing can tell.
                perfcompat::base::notice::write_stderr(&format!(
                    "cputrack: cannot write {}: {}\n",
                    self.name,
                    perfcompat::base::error::io_text(&e)
                ));
                failed(e.raw_os_error())
            })
    }
}

impl<W: Write> Sink for Out<W> {
    fn record(&mut self, r: &Record) -> perfcompat::Result<()> {
        let mut l = self.pending_title.take().unwrap_or_default();
        l.push_str(&self.line(r));
        self.put(&l)
    }
}
