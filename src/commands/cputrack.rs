//! The engine of `cputrack`: counting each LWP (thread) of a process, or of a family of
//! processes, and sampling the counts at intervals (cputrack(1)).
//!
//! [`run`] starts a command under process control ([`Pctx::create`]) or takes a running
//! process ([`Pctx::capture`]), and a [`Tracker`] (the [`Observer`]) binds the current set to
//! every thread before it runs ([`Target::Thread`]). Every interval each thread is sampled and
//! a [`Record`] of kind [`Kind::Tick`] carries its counts over the interval; with several sets
//! each thread moves to the next set after each of its samples (rebinding counts from zero).
//! What happens to the process is reported too: a thread created ([`Kind::LwpCreate`], on the
//! creator's LWP with a new LWP's counts: zero), a thread ending before its process
//! ([`Kind::LwpExit`], its totals, once a tick has sampled it), a `fork` (with `follow_fork` the child is tracked by a copy
//! of the controller, as the original ran one controlling process per tracked process), an
//! `exec` (its totals so far; with `follow_exec` counting goes on in the new program, else the
//! process is no longer counted) and the process's end ([`Kind::Exit`], the totals of all its
//! threads, per set). With `verbose`, [`Kind::InitLwp`] and [`Kind::FiniLwp`] frame each
//! thread. Formatting the records is the command's (`tools/cputrack.rs`).
//!
//! The emulated backends count only what their own process injects, so they cannot count
//! another program: [`run`] refuses them. [`Tracker`] itself works on any backend for threads
//! the backend can bind (the emulated ones: threads of the calling process), which is how its
//! records are tested exactly.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::api::pctx::{Follow, Observer, Pctx, Status};
use crate::backend::{self, Backend};
use crate::base::error::{Error, Result};
use crate::{bind_with, Binding, CounterSet, Target};

/// What to count and how (the options of cputrack(1)).
#[derive(Debug, Clone)]
pub struct Options {
    /// The sets (`-c`), counted in turn, one per sample.
    pub sets: Vec<CounterSet>,
    /// The sampling interval (`-T`); `None` (`-T 0`) samples only when something happens.
    pub interval: Option<Duration>,
    /// Samples per process before cputrack stops (`-N`); 0: no limit.
    pub samples: u32,
    /// Track the children created by `fork` (`-f`).
    pub follow_fork: bool,
    /// Go on counting a process across `exec` (`-e`).
    pub follow_exec: bool,
    /// Report `init_lwp` and `fini_lwp` for each thread too (`-v`).
    pub verbose: bool,
    /// Report each thread's CPU time in cycles with each sample (`-t`).
    pub cycles: bool,
}

/// What a [`Record`] reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A thread's counts over the last interval.
    Tick,
    /// A thread begins to be counted (`-v`): its counts so far (zero).
    InitLwp,
    /// A thread stops being counted (`-v`): its totals.
    FiniLwp,
    /// A thread ended before its process: its totals (only for a thread a tick sampled).
    LwpExit,
    /// A thread created a thread: a new LWP's counts (zero), on the creator's line.
    LwpCreate,
    /// The process created a child process (the note is its id).
    Fork,
    /// The process executed a new program: its totals so far (and, with `follow_exec`, a
    /// second record with the new command line as the note and no counts).
    Exec,
    /// The process ended: the totals of all its threads, one record per set that counted.
    Exit,
}

impl Kind {
    /// The name in cputrack's `event` column.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Tick => "tick",
            Kind::InitLwp => "init_lwp",
            Kind::FiniLwp => "fini_lwp",
            Kind::LwpExit => "lwp_exit",
            Kind::LwpCreate => "lwp_create",
            Kind::Fork => "fork",
            Kind::Exec => "exec",
            Kind::Exit => "exit",
        }
    }
}

/// One line of cputrack's output.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// Seconds since the start.
    pub time: f64,
    /// The process.
    pub pid: i32,
    /// The LWP number within the process: 1 for its first thread, then 2, 3, ... in the
    /// order the threads were first seen.
    pub lwp: u32,
    /// What happened.
    pub kind: Kind,
    /// The set the values belong to (index into [`Options::sets`]).
    pub set: usize,
    /// The counts, one per request of the set; empty for [`Kind::Fork`] and the command line
    /// record of an [`Kind::Exec`].
    pub values: Vec<u64>,
    /// With [`Options::cycles`]: the thread's CPU time over the same span, in cycles.
    pub cycles: Option<u64>,
    /// A comment: the child's id (fork), the new command line (exec).
    pub note: Option<String>,
}

/// Where records go (the command formats and writes them).
pub trait Sink {
    /// Take one record; an error ends the run.
    fn record(&mut self, r: &Record) -> Result<()>;
}

/// One counted thread.
struct Lwp {
    pid: i32,
    lwp: u32,
    set: usize,
    binding: Option<Binding>,
    /// The binding's values at the last sample.
    last: Vec<u64>,
    /// Everything counted per set, previous bindings included.
    totals: Vec<Vec<u64>>,
    /// CPU time (ns) at the last sample, for cycles.
    cpu_ns: u64,
    /// With [`Options::cycles`]: its CPU time in cycles, every sample's added up.
    cycles: u64,
    /// A tick sampled it (else its end gives no `lwp_exit` line, as with Sun's cputrack).
    ticked: bool,
}

/// One tracked process.
struct Proc {
    next_lwp: u32,
    /// Per set: the totals of its threads that have ended.
    totals: Vec<Vec<u64>>,
    /// Whether each set counted at all (for the exit records).
    used: Vec<bool>,
    /// Not counted any more (an exec without `follow_exec`).
    dropped: bool,
    /// With [`Options::cycles`]: the CPU time in cycles of its threads that have ended.
    cycles: u64,
}

/// The [`Observer`] that counts each thread and reports [`Record`]s to a [`Sink`].
pub struct Tracker<'a> {
    backend: &'static dyn Backend,
    opts: Options,
    sink: &'a mut dyn Sink,
    clock: Box<dyn FnMut() -> f64 + 'a>,
    lwps: BTreeMap<i32, Lwp>,
    procs: BTreeMap<i32, Proc>,
    /// The set new threads start with: the one the latest sample moved to.
    current: usize,
    /// Sampling is over (`-N` reached): nothing is counted or reported any more.
    done: bool,
    stop: Option<&'static AtomicBool>,
    /// In a copy of the controller made for a followed child.
    copy: bool,
}

fn zeros(sets: &[CounterSet]) -> Vec<Vec<u64>> {
    sets.iter().map(|s| vec![0; s.len()]).collect()
}

fn add(into: &mut [u64], v: &[u64]) {
    for (t, d) in into.iter_mut().zip(v) {
        *t = t.wrapping_add(*d);
    }
}

/// A thread's CPU time so far in nanoseconds (`/proc/<pid>/task/<tid>/schedstat`), 0 when it
/// cannot be read.
fn cpu_ns(pid: i32, tid: i32) -> u64 {
    crate::base::sys::thread_cpu_ns(pid, tid).unwrap_or(0)
}

impl<'a> Tracker<'a> {
    /// A tracker counting with `backend` as `opts` says, reporting to `sink`; times are
    /// seconds since now.
    pub fn new(
        backend: &'static dyn Backend,
        opts: Options,
        sink: &'a mut dyn Sink,
    ) -> Result<Tracker<'a>> {
        let start = Instant::now();
        Tracker::with_clock(backend, opts, sink, move || start.elapsed().as_secs_f64())
    }

    /// [`Tracker::new`] with another time source (seconds since the start), for exact tests.
    pub fn with_clock(
        backend: &'static dyn Backend,
        opts: Options,
        sink: &'a mut dyn Sink,
        clock: impl FnMut() -> f64 + 'a,
    ) -> Result<Tracker<'a>> {
        if opts.sets.is_empty() || opts.sets.iter().any(CounterSet::is_empty) {
            return Err(Error::InvalidArgument("no event specification".into()));
        }
        Ok(Tracker {
            backend,
            opts,
            sink,
            clock: Box::new(clock),
            lwps: BTreeMap::new(),
            procs: BTreeMap::new(),
            current: 0,
            done: false,
            stop: None,
            copy: false,
        })
    }

    /// End [`Pctx::run`] (leaving the processes under control) once `flag` is set, e.g. by a
    /// SIGINT handler.
    pub fn stop_on(&mut self, flag: &'static AtomicBool) {
        self.stop = Some(flag);
    }

    /// Stop counting and reporting (the sample count is reached); the bindings are dropped.
    pub fn finish(&mut self) {
        self.done = true;
        self.lwps.clear();
    }

    fn emit(&mut self, r: Record) -> Result<()> {
        self.sink.record(&r)
    }

    fn record(&mut self, pid: i32, lwp: u32, kind: Kind, set: usize, values: Vec<u64>) -> Record {
        Record {
            time: (self.clock)(),
            pid,
            lwp,
            kind,
            set,
            values,
            cycles: None,
            note: None,
        }
    }

    fn bind(&self, set: usize, tid: i32) -> Result<Binding> {
        bind_with(self.backend, &self.opts.sets[set], Target::Thread(tid))
    }

    /// The values of thread `tid` since its binding's start, added into its totals since the
    /// last sample; returns the deltas and the CPU time delta in cycles.
    fn sample(&mut self, tid: i32) -> Result<(Vec<u64>, Option<u64>)> {
        let cycles = self.opts.cycles;
        let Some(l) = self.lwps.get_mut(&tid) else {
            return Ok((Vec::new(), None));
        };
        let Some(b) = &l.binding else {
            return Ok((vec![0; l.last.len()], None));
        };
        let mut v = vec![0u64; b.len()];
        b.sample(&mut v)?;
        let deltas: Vec<u64> = v
            .iter()
            .zip(&l.last)
            .map(|(a, b)| a.wrapping_sub(*b))
            .collect();
        add(&mut l.totals[l.set], &deltas);
        l.last = v;
        let cyc = cycles.then(|| {
            let now = cpu_ns(l.pid, tid);
            let d = now.saturating_sub(l.cpu_ns);
            l.cpu_ns = now;
            let c = (d as f64 * backend::nominal_mhz() / 1000.0).round() as u64;
            l.cycles = l.cycles.wrapping_add(c);
            c
        });
        Ok((deltas, cyc))
    }

    /// Thread `tid` of `pid` ended or stops being counted: its totals go to its process.
    fn retire(&mut self, pid: i32, tid: i32) -> Result<Option<Lwp>> {
        if !self.lwps.contains_key(&tid) {
            return Ok(None);
        }
        self.sample(tid)?;
        let Some(l) = self.lwps.remove(&tid) else {
            return Ok(None);
        };
        if let Some(p) = self.procs.get_mut(&pid) {
            for (k, t) in l.totals.iter().enumerate() {
                add(&mut p.totals[k], t);
            }
            p.cycles = p.cycles.wrapping_add(l.cycles);
        }
        Ok(Some(l))
    }

    fn proc_mut(&mut self, pid: i32) -> &mut Proc {
        let n = self.opts.sets.len();
        let sets = &self.opts.sets;
        self.procs.entry(pid).or_insert_with(|| Proc {
            next_lwp: 1,
            totals: zeros(sets),
            used: vec![false; n],
            dropped: false,
            cycles: 0,
        })
    }

    fn counted(&self, pid: i32) -> bool {
        !self.done && self.procs.get(&pid).is_none_or(|p| !p.dropped)
    }

    /// The records of a process's totals (one per set that counted).
    fn totals_records(&mut self, pid: i32, lwp: u32, kind: Kind) -> Vec<Record> {
        let Some(p) = self.procs.get(&pid) else {
            return Vec::new();
        };
        let cycles = self.opts.cycles.then_some(p.cycles);
        let sets: Vec<(usize, Vec<u64>)> = p
            .totals
            .iter()
            .enumerate()
            .filter(|(k, _)| p.used[*k])
            .map(|(k, t)| (k, t.clone()))
            .collect();
        sets.into_iter()
            .map(|(k, t)| {
                let mut r = self.record(pid, lwp, kind, k, t);
                r.cycles = cycles;
                r
            })
            .collect()
    }

    /// A line of `kind` for thread `tid` of `pid` with its counts since its last line; the
    /// thread's set, or `None` when it is not counted.
    fn sample_line(&mut self, pid: i32, tid: i32, kind: Kind) -> Result<Option<usize>> {
        if !self.counted(pid) {
            return Ok(None);
        }
        let Some(l) = self.lwps.get(&tid) else {
            return Ok(None);
        };
        let (lwp, set) = (l.lwp, l.set);
        let (values, cycles) = self.sample(tid)?;
        let mut r = self.record(pid, lwp, kind, set, values);
        r.cycles = cycles;
        self.emit(r)?;
        Ok(Some(set))
    }

    /// Adopted as a followed child in a copy of the controller: forget the parent's state
    /// without touching its counters (the copy shares their file descriptors).
    fn forget_inherited(&mut self) {
        for (_, l) in std::mem::take(&mut self.lwps) {
            std::mem::forget(l.binding);
        }
        self.procs.clear();
        self.copy = true;
    }
}

impl Observer for Tracker<'_> {
    fn init_lwp(&mut self, pid: i32, tid: i32) -> Result<()> {
        if !self.counted(pid) {
            return Ok(());
        }
        let set = self.current;
        let binding = self.bind(set, tid)?;
        let p = self.proc_mut(pid);
        let lwp = if tid == pid && p.next_lwp == 1 {
            p.next_lwp = 2;
            1
        } else {
            let n = p.next_lwp.max(2);
            p.next_lwp = n + 1;
            n
        };
        p.used[set] = true;
        let n = binding.len();
        self.lwps.insert(
            tid,
            Lwp {
                pid,
                lwp,
                set,
                binding: Some(binding),
                last: vec![0; n],
                totals: zeros(&self.opts.sets),
                cpu_ns: if self.opts.cycles {
                    cpu_ns(pid, tid)
                } else {
                    0
                },
                cycles: 0,
                ticked: false,
            },
        );
        if self.opts.verbose {
            let mut r = self.record(pid, lwp, Kind::InitLwp, set, vec![0; n]);
            r.cycles = self.opts.cycles.then_some(0);
            self.emit(r)?;
        }
        Ok(())
    }

    fn fini_lwp(&mut self, pid: i32, tid: i32) -> Result<()> {
        if let Some(l) = self.retire(pid, tid)? {
            if self.opts.verbose && !self.done {
                let mut r = self.record(pid, l.lwp, Kind::FiniLwp, l.set, l.totals[l.set].clone());
                r.cycles = self.opts.cycles.then_some(l.cycles);
                self.emit(r)?;
            }
        }
        Ok(())
    }

    fn lwp_exit(&mut self, pid: i32, tid: i32) -> Result<()> {
        // Only for a thread that ends before its process (the engine does not call it for the
        // threads ending with the process: their end is the exit line), LWP 1 included.
        if !self.counted(pid) {
            return Ok(());
        }
        let Some(l) = self.lwps.get(&tid) else {
            return Ok(());
        };
        if !l.ticked {
            // As Sun's cputrack: no line for an LWP no tick sampled (its counts still go to
            // the process's totals, at its fini_lwp).
            return Ok(());
        }
        let (lwp, set) = (l.lwp, l.set);
        if self.sample(tid).is_err() {
            return Ok(());
        }
        let totals = self
            .lwps
            .get(&tid)
            .map(|l| (l.totals[set].clone(), l.cycles));
        if let Some((values, cycles)) = totals {
            let mut r = self.record(pid, lwp, Kind::LwpExit, set, values);
            r.cycles = self.opts.cycles.then_some(cycles);
            // A write error shows again at the next record, which can return it.
            let _ = self.emit(r);
        }
        Ok(())
    }

    fn lwp_create(&mut self, pid: i32, tid: i32, _new: i32) -> Result<()> {
        // As Sun's cputrack: a line on the creating LWP with a new LWP's counts, zero. Nothing
        // is sampled: the creator's counts since its last line are its next line's.
        if !self.counted(pid) {
            return Ok(());
        }
        let Some(l) = self.lwps.get(&tid) else {
            return Ok(());
        };
        let (lwp, set, n) = (l.lwp, l.set, l.last.len());
        let mut r = self.record(pid, lwp, Kind::LwpCreate, set, vec![0; n]);
        r.cycles = self.opts.cycles.then_some(0);
        self.emit(r)
    }

    fn fork(&mut self, pid: i32, tid: i32, child: i32) -> Follow {
        if self.counted(pid) && (self.opts.follow_fork || self.opts.verbose) {
            let lwp = self.lwps.get(&tid).map_or(1, |l| l.lwp);
            let mut r = self.record(pid, lwp, Kind::Fork, self.current, Vec::new());
            r.note = Some(child.to_string());
            let _ = self.emit(r);
        }
        if self.opts.follow_fork && !self.done {
            Follow::Copy
        } else {
            Follow::No
        }
    }

    fn adopt(&mut self, child: Result<Pctx>, _pid: i32, _tid: i32) {
        self.forget_inherited();
        let Ok(mut p) = child else {
            return;
        };
        let (interval, samples) = (self.opts.interval, self.opts.samples);
        if let Ok(Some(_)) = p.run(self, interval, samples) {
            let _ = p.release(self);
            return;
        }
        self.finish();
        let _ = p.release(self);
    }

    fn exec(&mut self, pid: i32, _tid: i32) -> Result<()> {
        if !self.counted(pid) {
            return Ok(());
        }
        // The old program's threads are retired (fini_lwp) by now: report its totals.
        for r in self.totals_records(pid, 1, Kind::Exec) {
            self.emit(r)?;
        }
        let sets = zeros(&self.opts.sets);
        let follow = self.opts.follow_exec;
        let p = self.proc_mut(pid);
        p.totals = sets;
        p.used.iter_mut().for_each(|u| *u = false);
        p.next_lwp = 1;
        p.cycles = 0;
        p.dropped = !follow;
        if follow {
            let mut r = self.record(pid, 1, Kind::Exec, self.current, Vec::new());
            let args = crate::api::pctx::psargs(pid);
            r.note = Some(format!("'{}'", String::from_utf8_lossy(&args)));
            self.emit(r)?;
        }
        Ok(())
    }

    fn exit(&mut self, pid: i32, _status: Status) {
        if self.counted(pid) {
            for r in self.totals_records(pid, 1, Kind::Exit) {
                let _ = self.emit(r);
            }
        }
        self.procs.remove(&pid);
    }

    fn tick(&mut self, pid: i32, tid: i32) -> Result<()> {
        let Some(set) = self.sample_line(pid, tid, Kind::Tick)? else {
            return Ok(());
        };
        if let Some(l) = self.lwps.get_mut(&tid) {
            l.ticked = true;
        }
        let n = self.opts.sets.len();
        if n > 1 {
            let next = (set + 1) % n;
            let b = self.bind(next, tid)?;
            self.current = next;
            if let Some(p) = self.procs.get_mut(&pid) {
                p.used[next] = true;
            }
            if let Some(l) = self.lwps.get_mut(&tid) {
                l.last = vec![0; b.len()];
                l.binding = Some(b);
                l.set = next;
            }
        }
        Ok(())
    }

    fn stop_requested(&mut self) -> bool {
        self.stop.is_some_and(|s| s.load(Ordering::SeqCst))
    }
}

/// What cputrack tracks.
#[derive(Debug, Clone)]
pub enum Subject {
    /// A command to run (searched in `PATH`).
    Command(Vec<OsString>),
    /// A running process (`-p`).
    Pid(i32),
}

/// Refuse the emulated backends, which cannot count another process.
fn refuse_emulation(b: &dyn Backend) -> Result<()> {
    let name = b.shape_unmeasured().kind;
    if name.is_emulated() {
        return Err(Error::Unsupported(format!(
            "the emulated {name} backend counts only events its own process injects, so it \
             cannot count another program; run cputrack on the perf backend (unset \
             PERFCOMPAT_BACKEND or set it to perf)"
        )));
    }
    Ok(())
}

/// Track `subject` as `opts` says, reporting to `sink`, until the command (or the process)
/// ends, `stop` is set, or `opts.samples` samples were taken. Returns how the command (or the
/// captured process) ended, `None` when it was let go still running. A command reaching the
/// sample count is waited for (not counted any more), so that its status is known; a
/// captured process is let go. Children followed with `follow_fork` are tracked to their
/// end before this returns.
pub fn run(
    opts: &Options,
    subject: &Subject,
    sink: &mut dyn Sink,
    stop: Option<&'static AtomicBool>,
) -> Result<Option<Status>> {
    let b = backend::global()?;
    refuse_emulation(b)?;
    // Check every set as a bind to this thread before anything runs: an event this host
    // cannot count (or a conflict, or a refused mode) is an error before the command starts,
    // not after. Checked, not bound (issue 48): the bind's errors come from its plan and its
    // opens, which `check_bind` makes alike; the pages, descriptor moves and start of a
    // binding dropped at once were most of cputrack's fixed cost over its floor.
    for s in &opts.sets {
        crate::engine::check_bind(b, s, Target::CurrentThread)?;
    }
    let mut p = match subject {
        Subject::Command(c) => {
            let mut p = Pctx::create_for_cpc(c)?;
            p.ignore_interrupts();
            p
        }
        Subject::Pid(pid) => Pctx::capture(*pid)?,
    };
    // cputrack's process runs no thread but this one while it tracks (its binds notify on no
    // overflow, so no watcher thread; a measurement of the PMU's counters runs on a thread
    // joined before the bind returns): nothing else can take SIGCHLD (issue 48).
    p.sole_sigchld_taker();
    let mut t = Tracker::new(b, opts.clone(), sink)?;
    if let Some(s) = stop {
        t.stop_on(s);
    }
    let status = match p.run(&mut t, opts.interval, opts.samples)? {
        Some(s) => Some(s),
        None if matches!(subject, Subject::Command(_)) && !t.stop_requested() => {
            // The samples are taken: wait for the command without counting it.
            t.finish();
            p.run(&mut t, None, 0)?
        }
        None => None,
    };
    t.finish();
    p.release(&mut t)?;
    Ok(status)
}
