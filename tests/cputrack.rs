//! The `cputrack` command (tools/cputrack.rs over perfcompat::commands::cputrack): exact lines on an
//! emulated PMU (the engine's observer driven by hand for threads of this process, counts
//! injected), real page-fault counts on perf, -f and -e, -p on a running process, -o and -n,
//! and the refusals.

mod common;
use common::unread_pipe;
use common::Guarded;

#[path = "../tools/cputrack_out.rs"]
#[allow(dead_code)]
mod cputrack_out;

use std::process::{Command, Output, Stdio};
use std::sync::mpsc;

use perfcompat::api::pctx::{Observer, Status};
use perfcompat::backend::{self, sim::SimBackend, Backend};
use perfcompat::commands::cputrack::{Options, Tracker};
use perfcompat::commands::eventspec;

fn cputrack(args: &[&str]) -> Output {
    cputrack_command(args).output().unwrap()
}

/// The `Command` of [`cputrack`], to be given its standard streams.
fn cputrack_command(args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_cputrack"));
    c.guarded().args(args).env_remove("PERFCOMPAT_BACKEND");
    c
}

/// tests/c/cputrack_pages.c, built once.
fn pages() -> &'static str {
    static BIN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    BIN.get_or_init(|| build("cputrack_pages"))
}

/// tests/c/cputrack_seccomp.c (a program with a seccomp filter of its own), built once.
fn seccomp_prog() -> &'static str {
    static BIN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    BIN.get_or_init(|| build("cputrack_seccomp"))
}

/// Compile tests/c/`name`.c into the target's temporary directory.
fn build(name: &str) -> String {
    let out = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let st = Command::new("cc")
        .args(["-std=c99", "-O1", "-Wall", "-Wextra", "-Werror", "-o"])
        .arg(&out)
        .arg(format!("{}/tests/c/{name}.c", env!("CARGO_MANIFEST_DIR")))
        .status()
        .expect("a C compiler (cc) is installed");
    assert!(st.success(), "compiling {name}.c failed");
    out.to_string_lossy().into_owned()
}

/// A line: time, pid (with -f), lwp, event, values, note.
#[derive(Debug)]
struct Line {
    pid: Option<i32>,
    lwp: u32,
    event: String,
    values: Vec<u64>,
    note: String,
}

fn lines(text: &str, pid_col: bool) -> Vec<Line> {
    text.lines()
        .filter(|l| !l.trim_start().starts_with("time"))
        .map(|l| {
            let (l, note) = l.split_once(" # ").unwrap_or((l, ""));
            let f: Vec<&str> = l.split_whitespace().collect();
            let k = usize::from(pid_col);
            f[0].parse::<f64>().unwrap();
            Line {
                pid: pid_col.then(|| f[1].parse().unwrap()),
                lwp: f[1 + k].parse().unwrap(),
                event: f[2 + k].to_string(),
                values: f[3 + k..].iter().map(|v| v.parse().unwrap()).collect(),
                note: note.to_string(),
            }
        })
        .collect()
}

/// Whether `v` is a multiple of 100 pages, give or take the few faults of the program's own
/// calls (its stack, the C library's first use of a page).
fn hundreds(v: u64) -> bool {
    let r = v % 100;
    r <= 5 || r >= 95
}

// ---- exact lines on the emulated UltraSPARC -------------------------------------------------

/// A thread of this process that injects emulated events when told (the emulated PMU counts
/// only the calling process's threads: these stand for the LWPs of a tracked process).
struct Lwp {
    tid: i32,
    tx: mpsc::Sender<Option<(&'static str, u64)>>,
    done: mpsc::Receiver<()>,
    join: std::thread::JoinHandle<()>,
}

impl Lwp {
    fn spawn(b: &'static dyn Backend) -> Lwp {
        let (tx, rx) = mpsc::channel::<Option<(&'static str, u64)>>();
        let (dtx, done) = mpsc::channel();
        let (ttx, trx) = mpsc::channel();
        let join = std::thread::spawn(move || {
            ttx.send(perfcompat::engine::gettid()).unwrap();
            let sim = b.as_any().downcast_ref::<SimBackend>().unwrap();
            while let Ok(Some((event, n))) = rx.recv() {
                sim.advance(event, n).unwrap();
                dtx.send(()).unwrap();
            }
        });
        Lwp {
            tid: trx.recv().unwrap(),
            tx,
            done,
            join,
        }
    }

    fn advance(&self, event: &'static str, n: u64) {
        self.tx.send(Some((event, n))).unwrap();
        self.done.recv().unwrap();
    }

    fn end(self) {
        self.tx.send(None).unwrap();
        self.join.join().unwrap();
    }
}

fn ultrasparc() -> &'static dyn Backend {
    Box::leak(backend::from_name("sim:ultrasparc").unwrap())
}

/// Drive a tracker of `specs` through `script` and return its output; times are 0.001, 0.002,
/// ... (one per line), so every line is exact.
fn golden(
    specs: &[&str],
    verbose: bool,
    script: impl FnOnce(&mut Tracker, &'static dyn Backend),
) -> String {
    golden_with(specs, verbose, false, script)
}

/// [`golden`], with `follow_fork` (`-f`: the `pid` column, and the `fork` lines) when asked.
fn golden_with(
    specs: &[&str],
    verbose: bool,
    follow_fork: bool,
    script: impl FnOnce(&mut Tracker, &'static dyn Backend),
) -> String {
    let b = ultrasparc();
    let sets: Vec<_> = specs
        .iter()
        .map(|s| eventspec::parse(s, b).unwrap())
        .collect();
    let specs: Vec<String> = specs.iter().map(|s| s.to_string()).collect();
    let mut out = cputrack_out::Out::new(Vec::new(), &sets, &specs, follow_fork, false);
    out.pending_title = Some(out.title(&sets[0]));
    let opts = Options {
        sets,
        interval: None,
        samples: 0,
        follow_fork,
        follow_exec: false,
        verbose,
        cycles: false,
    };
    {
        let mut n = 0;
        let mut t = Tracker::with_clock(b, opts, &mut out, move || {
            n += 1;
            f64::from(n) / 1000.0
        })
        .unwrap();
        script(&mut t, b);
    }
    String::from_utf8(out.w).unwrap()
}

#[test]
fn golden_ticks_lwp_create_lwp_exit_and_exit_on_ultrasparc() {
    let text = golden(&["pic0=Cycle_cnt,pic1=Instr_cnt"], false, |t, b| {
        let first = Lwp::spawn(b);
        let second = Lwp::spawn(b);
        // The first LWP's id doubles as the process id: it is LWP 1.
        let pid = first.tid;
        t.init_lwp(pid, first.tid).unwrap();
        first.advance("Cycle_cnt", 765308);
        first.advance("Instr_cnt", 219233);
        t.tick(pid, first.tid).unwrap();
        first.advance("Cycle_cnt", 20);
        t.lwp_create(pid, first.tid, second.tid).unwrap();
        t.init_lwp(pid, second.tid).unwrap();
        first.advance("Cycle_cnt", 50);
        second.advance("Cycle_cnt", 7);
        second.advance("Instr_cnt", 3);
        t.tick(pid, first.tid).unwrap();
        t.tick(pid, second.tid).unwrap();
        second.advance("Cycle_cnt", 5);
        t.lwp_exit(pid, second.tid).unwrap();
        t.fini_lwp(pid, second.tid).unwrap();
        first.advance("Instr_cnt", 1);
        t.tick(pid, first.tid).unwrap();
        // The first LWP ends with the process: fini_lwp alone, as the engine calls it.
        t.fini_lwp(pid, first.tid).unwrap();
        t.exit(pid, Status::Exited(0));
        first.end();
        second.end();
    });
    // The lwp_create line is on the creating LWP with a new LWP's counts, zero, as Sun's
    // cputrack prints it (issue 30: no lwp_create line was printed; issue 45 item 10: it took
    // the creator's counts since its last line, which its next tick now has).
    let want = "   time lwp      event      pic0      pic1
  0.001   1       tick    765308    219233
  0.002   1 lwp_create         0         0
  0.003   1       tick        70         0
  0.004   2       tick         7         3
  0.005   2   lwp_exit        12         3
  0.006   1       tick         0         1
  0.007   1       exit    765390    219237
";
    assert_eq!(text, want);
}

/// Against Sun's cputrack on the same library (issue 45 item 10; the totals were already the
/// same): `lwp_create` prints a new LWP's counts (0), not the creator's; an LWP that no tick
/// sampled ends without an `lwp_exit` line (its counts are in the `exit` totals); the `fork`
/// line's `# pid` comes after two blank count columns (`"%9s %9s # %d"`) whatever the set.
#[test]
fn golden_lwp_create_lwp_exit_and_fork_as_suns_cputrack() {
    let mut pid = 0;
    let text = golden_with(&["pic0=Cycle_cnt"], false, true, |t, b| {
        let first = Lwp::spawn(b);
        let second = Lwp::spawn(b);
        pid = first.tid;
        t.init_lwp(pid, first.tid).unwrap();
        first.advance("Cycle_cnt", 100);
        t.tick(pid, first.tid).unwrap();
        first.advance("Cycle_cnt", 20);
        t.lwp_create(pid, first.tid, second.tid).unwrap();
        t.init_lwp(pid, second.tid).unwrap();
        second.advance("Cycle_cnt", 7);
        // LWP 2 ends before any tick sampled it.
        t.lwp_exit(pid, second.tid).unwrap();
        t.fini_lwp(pid, second.tid).unwrap();
        assert_eq!(
            t.fork(pid, first.tid, 4242),
            perfcompat::api::pctx::Follow::Copy
        );
        first.advance("Cycle_cnt", 10);
        t.tick(pid, first.tid).unwrap();
        t.fini_lwp(pid, first.tid).unwrap();
        t.exit(pid, Status::Exited(0));
        first.end();
        second.end();
    });
    let want = format!(
        "   time    pid lwp      event      pic0
  0.001{p}   1       tick       100
  0.002{p}   1 lwp_create         0
  0.003{p}   1       fork                     # 4242
  0.004{p}   1       tick        30
  0.005{p}   1       exit       137
",
        p = format!("{pid:>7}")
    );
    assert_eq!(text, want);
}

#[test]
fn golden_sets_take_turns_verbose_on_ultrasparc() {
    let text = golden(&["pic0=Cycle_cnt", "pic1=Instr_cnt"], true, |t, b| {
        let lwp = Lwp::spawn(b);
        let pid = lwp.tid;
        t.init_lwp(pid, lwp.tid).unwrap();
        lwp.advance("Cycle_cnt", 10);
        lwp.advance("Instr_cnt", 20);
        t.tick(pid, lwp.tid).unwrap();
        lwp.advance("Cycle_cnt", 5);
        lwp.advance("Instr_cnt", 7);
        t.tick(pid, lwp.tid).unwrap();
        assert_eq!(
            t.fork(pid, lwp.tid, 4242),
            perfcompat::api::pctx::Follow::No
        );
        lwp.advance("Cycle_cnt", 3);
        t.fini_lwp(pid, lwp.tid).unwrap();
        t.exit(pid, Status::Exited(0));
        lwp.end();
    });
    let want = "   time lwp      event      pic0
  0.001   1   init_lwp         0 # pic0=Cycle_cnt
  0.002   1       tick        10 # pic0=Cycle_cnt
  0.003   1       tick         7 # pic1=Instr_cnt
  0.004   1       fork                     # 4242
  0.005   1   fini_lwp        13 # pic0=Cycle_cnt
  0.006   1       exit        13 # pic0=Cycle_cnt
  0.007   1       exit         7 # pic1=Instr_cnt
";
    assert_eq!(text, want);
}

#[test]
fn the_command_refuses_emulated_backends_with_the_reason() {
    let out = Command::new(env!("CARGO_BIN_EXE_cputrack"))
        .guarded()
        .args(["-c", "Cycle_cnt", "true"])
        .env("PERFCOMPAT_BACKEND", "sim:ultrasparc")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot count another program"), "{err}");
    assert!(out.stdout.is_empty(), "no titles before the refusal");
}

// ---- real counts on perf --------------------------------------------------------------------

#[test]
fn page_faults_each_interval_and_the_commands_status() {
    let out = cputrack(&[
        "-c",
        "page-faults",
        "-T",
        "0.1",
        "-N",
        "5",
        pages(),
        "bursts",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(3),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        text.lines()
            .next()
            .unwrap()
            .split_whitespace()
            .collect::<Vec<_>>(),
        ["time", "lwp", "event", "pic0"]
    );
    let l = lines(&text, false);
    assert_eq!(l.len(), 5, "five samples, then none (-N 5): {text}");
    assert!(l.iter().all(|l| l.event == "tick" && l.lwp == 1), "{text}");
    // 100 pages in the middle of the 2nd, 3rd and 4th intervals: each interval after the
    // first (which has the program's start-up) counts whole hundreds, 300 in all.
    let later: Vec<u64> = l[1..].iter().map(|l| l.values[0]).collect();
    assert!(later.iter().all(|&v| hundreds(v)), "{text}");
    let sum: u64 = later.iter().sum();
    assert!(
        (295..=310).contains(&sum),
        "300 page faults expected: {text}"
    );
}

#[test]
fn follows_fork_and_exec() {
    let script = format!("{p} touch 200; exec {p} touch 300", p = pages());
    let out = cputrack(&["-fe", "-T", "0", "-c", "page-faults", "sh", "-c", &script]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    let l = lines(&text, true);
    let sh = l[0].pid.unwrap();
    let fork = l
        .iter()
        .find(|l| l.event == "fork" && l.pid == Some(sh))
        .unwrap_or_else(|| panic!("a fork line: {text}"));
    let child: i32 = fork.note.parse().unwrap();
    let of = |pid: i32, event: &str| -> Vec<&Line> {
        l.iter()
            .filter(|l| l.pid == Some(pid) && l.event == event)
            .collect()
    };
    // The child: forked by sh, executes `touch 200` (-e follows it), exits.
    let exec = of(child, "exec");
    assert!(
        exec.iter()
            .any(|e| e.note == format!("'{} touch 200'", pages())),
        "{text}"
    );
    let exit = of(child, "exit");
    assert_eq!(exit.len(), 1, "{text}");
    assert!((200..600).contains(&exit[0].values[0]), "{text}");
    // sh itself executes `touch 300` and exits.
    assert!(
        of(sh, "exec")
            .iter()
            .any(|e| e.note == format!("'{} touch 300'", pages())),
        "{text}"
    );
    let exit = of(sh, "exit");
    assert_eq!(exit.len(), 1, "{text}");
    assert!((300..700).contains(&exit[0].values[0]), "{text}");

    // Without -f the child is not tracked; without -e sh is not counted after its exec.
    let out = cputrack(&["-T", "0", "-c", "page-faults", "sh", "-c", &script]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    let l = lines(&text, false);
    let events: Vec<&str> = l.iter().map(|l| l.event.as_str()).collect();
    assert_eq!(events, ["exec"], "{text}");
}

#[test]
fn attaches_to_a_running_process_and_lets_it_go() {
    let mut child = Command::new(pages())
        .guarded()
        .arg("loop")
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id().to_string();
    // Past its start-up (the loader's page faults).
    std::thread::sleep(std::time::Duration::from_millis(300));
    let out = cputrack(&["-c", "page-faults", "-T", "0.1", "-N", "3", "-p", &pid]);
    let text = String::from_utf8_lossy(&out.stdout);
    let alive = child.try_wait().unwrap().is_none();
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let l = lines(&text, false);
    assert_eq!(l.len(), 3, "{text}");
    assert!(l.iter().all(|l| l.event == "tick" && l.lwp == 1), "{text}");
    // 100 pages every 100 ms, in bursts that a sample may split (the attach comes at any
    // point of the program's cycle, and a busy machine may preempt it in a burst): over three
    // samples, at least one whole burst and at most a few.
    let sum: u64 = l.iter().map(|l| l.values[0]).sum();
    assert!((100..=600).contains(&sum), "{text}");
    assert!(alive, "the process goes on after cputrack let it go");
}

#[test]
fn output_file_and_no_titles() {
    let dir = common::TempDir::new("cputrack-o");
    let file = dir.0.join("out.txt");
    let out = cputrack(&[
        "-n",
        "-T",
        "0",
        "-o",
        file.to_str().unwrap(),
        "-c",
        "page-faults",
        pages(),
        "touch",
        "150",
    ]);
    assert!(out.status.success());
    assert!(out.stdout.is_empty());
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(!text.contains("time"), "-n: {text}");
    let l = lines(&text, false);
    assert_eq!(l.len(), 1, "{text}");
    assert_eq!(l[0].event, "exit");
    assert!((150..500).contains(&l[0].values[0]), "{text}");
}

#[test]
fn refusals_name_the_cause() {
    for args in [
        &["true"][..],
        &["-c", "page-faults"],
        &["-c", "page-faults", "-x", "true"],
        &["-c", "page-faults", "-T", "-1", "true"],
        &["-c", "page-faults", "-N", "0", "true"],
        &["-c", "page-faults", "-p", "1", "true"],
    ] {
        let out = cputrack(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
    }
    let out = cputrack(&["-c", "no-such-event", "true"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no-such-event"));
    // Requests that conflict on the counters: a usage error (issue 46 item 11).
    let out = cputrack(&["-c", "pic0=page-faults,pic0=task-clock", "true"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("repeated 'pic0' token"));
    let out = cputrack(&["-c", "page-faults", "/no/such/command"]);
    assert_eq!(out.status.code(), Some(127));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot run '/no/such/command'"));
    assert!(out.stdout.is_empty());
    let out = cputrack(&["-c", "page-faults", "-p", "2147483647"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no such process"));
    // -h: the events of the backend in force.
    let out = cputrack(&["-h"]);
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("usage: cputrack"), "{help}");
    assert!(
        help.contains("page-faults") && help.contains("PAPI_"),
        "{help}"
    );
}

/// A process that is already traced (here by another cputrack) cannot be tracked: the
/// message says why.
#[test]
fn a_process_traced_already_is_refused() {
    let mut child = Command::new(pages())
        .guarded()
        .arg("loop")
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id().to_string();
    let mut first = Command::new(env!("CARGO_BIN_EXE_cputrack"))
        .guarded()
        .args(["-c", "page-faults", "-T", "0.1", "-p", &pid])
        .env_remove("PERFCOMPAT_BACKEND")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the first one has attached (its first line).
    let mut rd = std::io::BufReader::new(first.stdout.take().unwrap());
    let mut l = String::new();
    std::io::BufRead::read_line(&mut rd, &mut l).unwrap();
    let out = cputrack(&["-c", "page-faults", "-p", &pid]);
    // SAFETY: signalling our own child: SIGINT lets the first cputrack release the process.
    unsafe { libc::kill(first.id() as i32, libc::SIGINT) };
    let st = first.wait().unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("tracing process {pid}")), "{err}");
    assert!(st.success(), "the first cputrack ends cleanly on SIGINT");
}

// ---- a program with a seccomp filter of its own (issue 44 item 5) ---------------------------

/// `prog args` alone, then under `cputrack -T 0 -c page-faults -o <file>`: each one's status
/// and standard output, and cputrack's one `exit` line's count.
fn alone_and_tracked(prog: &str, args: &[&str]) -> [(Option<i32>, String); 2] {
    let alone = Command::new(prog).guarded().args(args).output().unwrap();
    // One directory per mode: the tests run in parallel in this process.
    let dir = common::TempDir::new(&format!("cputrack-seccomp-{}", args[0]));
    let file = dir.0.join("out.txt");
    let mut a = vec![
        "-T",
        "0",
        "-c",
        "page-faults",
        "-o",
        file.to_str().unwrap(),
        prog,
    ];
    a.extend_from_slice(args);
    let tracked = cputrack(&a);
    let text = std::fs::read_to_string(&file).unwrap_or_default();
    let out = |o: &Output| String::from_utf8_lossy(&o.stdout).into_owned();
    [
        (alone.status.code(), out(&alone)),
        (tracked.status.code(), format!("{}{text}", out(&tracked))),
    ]
}

/// The count of cputrack's `exit` line in `text` (the program's own lines come first).
fn exit_count(text: &str) -> u64 {
    let l = lines(
        &text
            .lines()
            .filter(|l| l.starts_with(' ') && l.contains(" exit "))
            .collect::<Vec<_>>()
            .join("\n"),
        false,
    );
    assert_eq!(l.len(), 1, "one exit line: {text}");
    l[0].values[0]
}

/// `seccomp_prog args` alone and under cputrack: both exit 0 and print the same lines; its
/// output alone and cputrack's `exit` count.
fn same_as_alone(args: &[&str]) -> (String, u64) {
    let [alone, tracked] = alone_and_tracked(seccomp_prog(), args);
    assert_eq!(alone.0, Some(0), "alone: {}", alone.1);
    assert_eq!(tracked.0, Some(0), "under cputrack: {}", tracked.1);
    assert!(
        tracked.1.starts_with(&alone.1),
        "the same lines as alone ({}): {}",
        alone.1,
        tracked.1
    );
    (alone.1, exit_count(&tracked.1))
}

/// A program whose own filter returns `SECCOMP_RET_TRACE` with data 1 and 2 (getppid,
/// getpgrp) sees both fail with `ENOSYS` under cputrack as alone, and all its page faults are
/// counted. Before: the calls succeeded under cputrack (libpctx took the stops for its own
/// cpc_disable/cpc_enable) and counting stopped at getppid (54 faults of 3000).
#[test]
fn a_programs_own_seccomp_trace_stops_fail_with_enosys_as_without_cputrack() {
    let (alone, n) = same_as_alone(&["trace", "3000"]);
    let enosys = alone
        .lines()
        .filter(|l| l.ends_with(" -1 Function not implemented"));
    assert_eq!(enosys.count(), 4, "{alone}");
    assert!((3000..3300).contains(&n), "3000 pages touched, {n} counted");
}

/// A program whose own filter traces every `prctl` (data 7), libcpc's private one included:
/// its cpc_disable/cpc_enable are still heard (the 2000 pages between them are not counted),
/// and the calls fail with `ENOSYS` as they do alone under that filter. Before: not heard
/// (2558 counted) and `EINVAL`.
#[test]
fn cpc_disable_is_heard_through_a_programs_filter_that_traces_prctl() {
    let (alone, n) = same_as_alone(&["prctl", "2000", "500"]);
    let enosys = "disable -1 Function not implemented\nenable -1 Function not implemented\n";
    assert_eq!(alone, enosys);
    assert!((500..1000).contains(&n), "500 pages counted of 2500, {n}");
}

/// The `status` line of `name` in `text`.
fn status_field<'a>(text: &'a str, name: &str) -> &'a str {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .unwrap_or_else(|| panic!("no {name} line: {text}"))
        .trim()
}

/// What a program sees of cputrack, as docs/commands.md says: `TracerPid` is cputrack's pid
/// (its parent's), `Seccomp` 2 with one filter more than alone, `no_new_privs` set unless the
/// caller has CAP_SYS_ADMIN, and its own `PTRACE_TRACEME` fails with EPERM.
#[test]
fn a_tracked_program_sees_its_tracer_and_the_filter() {
    let own = std::fs::read_to_string("/proc/self/status").unwrap();
    let filters: u32 = status_field(&own, "Seccomp_filters").parse().unwrap();
    let cap_sys_admin = u64::from_str_radix(status_field(&own, "CapEff"), 16).unwrap() & 1 << 21;
    let [alone, tracked] = alone_and_tracked(seccomp_prog(), &["status"]);
    assert_eq!(alone.0, Some(0), "alone: {}", alone.1);
    assert_eq!(status_field(&alone.1, "TracerPid"), "0", "{}", alone.1);
    assert_eq!(
        status_field(&alone.1, "Seccomp"),
        status_field(&own, "Seccomp")
    );
    assert_eq!(status_field(&alone.1, "PTRACE_TRACEME"), "0", "{}", alone.1);
    assert_eq!(tracked.0, Some(0), "under cputrack: {}", tracked.1);
    let t = &tracked.1;
    let tracer = status_field(t, "TracerPid");
    assert_eq!(
        tracer,
        status_field(t, "PPid"),
        "cputrack, its parent, traces it: {t}"
    );
    assert_ne!(tracer, std::process::id().to_string(), "{t}");
    assert_eq!(status_field(t, "Seccomp"), "2", "{t}");
    assert_eq!(
        status_field(t, "Seccomp_filters"),
        (filters + 1).to_string(),
        "{t}"
    );
    let nnp = if cap_sys_admin != 0 {
        status_field(&own, "NoNewPrivs")
    } else {
        "1"
    };
    assert_eq!(status_field(t, "NoNewPrivs"), nnp, "{t}");
    assert_eq!(status_field(t, "PTRACE_TRACEME"), "-1 EPERM", "{t}");
}

// ---- write errors and SIGPIPE ---------------------------------------------------------------

/// The last lines (`exit`) cannot be written: a message naming the output and status 1 (on
/// the original code: status 0, the line silently lost). With standard error gone too, status
/// 1 all the same, and no panic.
#[test]
fn a_lost_exit_line_is_a_failure_with_a_message() {
    let run = |args: &[&str], stdout: Stdio, stderr: Stdio| {
        cputrack_command(args)
            .stdout(stdout)
            .stderr(stderr)
            .output()
            .unwrap()
    };
    let out = run(
        &["-c", "page-faults", "-o", "/dev/full", "true"],
        Stdio::null(),
        Stdio::piped(),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "-o /dev/full: {err}");
    assert!(err.contains("cputrack: cannot write /dev/full:"), "{err}");
    let full = std::fs::File::create("/dev/full").unwrap();
    for (what, stdout) in [
        ("> /dev/full", Stdio::from(full)),
        ("| (closed)", unread_pipe()),
    ] {
        let out = run(&["-c", "page-faults", "true"], stdout, Stdio::piped());
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{what}: {err}");
        assert!(
            err.contains("cputrack: cannot write the standard output:"),
            "{what}: {err}"
        );
    }
    let args = ["-c", "page-faults", "true"];
    let out = run(&args, unread_pipe(), unread_pipe());
    assert_eq!(out.status.code(), Some(1), "stdout and stderr closed");
    let out = run(&["-h"], unread_pipe(), unread_pipe());
    assert_eq!(out.status.code(), Some(1), "-h, stdout and stderr closed");
    let out = run(&["-c"], Stdio::null(), unread_pipe());
    assert_eq!(out.status.code(), Some(2), "usage error, stderr closed");
}

/// cputrack ignores no signal on its command's behalf: a command sent SIGPIPE dies of it, as
/// without cputrack (on the original code it inherited Rust's ignored SIGPIPE and went on).
#[test]
fn the_command_dies_of_sigpipe_as_without_cputrack() {
    let out = cputrack(&[
        "-o",
        "/dev/null",
        "-c",
        "page-faults",
        "sh",
        "-c",
        "kill -PIPE $$; echo survived",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(128 + libc::SIGPIPE), "{text}");
    assert!(!text.contains("survived"), "{text}");
}

// ---- the documented format, line by line ----------------------------------------------------

/// Whether `field` is `n` right-aligned in a column of `width` characters (blank-padded).
fn right_aligned(field: &str, width: usize, ok: impl Fn(&str) -> bool) -> bool {
    field.len() == width && {
        let t = field.trim_start();
        !t.is_empty() && !t.contains(' ') && ok(t)
    }
}

fn digits(s: &str) -> bool {
    s.bytes().all(|b| b.is_ascii_digit())
}

/// The kind of one line of cputrack's output if it has cputrack(1)'s documented layout (the
/// reference's formats: `"%7.3f "`, [`"%6d "` pid with -f], `"%3d %10s "` lwp and event,
/// [`"%9d "` tsc with -t], `"%9d "` per request, then `# note`; a fork line `"%9s %9s # %d"`
/// after the event; the title the same widths),
/// else why not. `requests` is the number of counter columns.
fn cputrack_line_kind(line: &str, pid: bool, tsc: bool, requests: usize) -> Result<String, String> {
    const KINDS: [&str; 8] = [
        "tick",
        "init_lwp",
        "fini_lwp",
        "lwp_create",
        "lwp_exit",
        "exec",
        "exit",
        "fork",
    ];
    let mut title = format!("{:>7}", "time");
    if pid {
        title += &format!(" {:>6}", "pid");
    }
    title += &format!(" {:>3} {:>10}", "lwp", "event");
    if tsc {
        title += &format!(" {:>9}", "tsc");
    }
    if line.starts_with(&title) {
        let rest = &line[title.len()..];
        let cols: Vec<&str> = rest.split_whitespace().collect();
        let ok = cols.len() == requests
            && cols.iter().all(|c| c.starts_with("pic"))
            && rest.len() == 10 * requests;
        return ok
            .then(|| "title".into())
            .ok_or(format!("bad title {line:?}"));
    }
    let bad = |what: &str| format!("{what} in {line:?}");
    let (body, note) = match line.split_once(" # ") {
        Some((b, n)) => (b.trim_end(), Some(n)),
        None => (line, None),
    };
    let mut at = 0;
    let mut take = |w: usize| -> Option<&str> {
        let f = body.get(at..at + w);
        at += w;
        f
    };
    let time = take(7).ok_or_else(|| bad("no time"))?;
    if !right_aligned(time, 7, |t| {
        t.split_once('.')
            .is_some_and(|(a, b)| digits(a) && b.len() == 3 && digits(b))
    }) {
        return Err(bad("time not %7.3f"));
    }
    if pid && !take(7).is_some_and(|f| right_aligned(f, 7, digits)) {
        return Err(bad("pid not %6d"));
    }
    if !take(4).is_some_and(|f| right_aligned(f, 4, digits)) {
        return Err(bad("lwp not %3d"));
    }
    let event = take(11).ok_or_else(|| bad("no event"))?;
    let kind = event.trim_start();
    if !right_aligned(event, 11, |e| KINDS.contains(&e)) {
        return Err(bad("event not one of cputrack's"));
    }
    let counts = kind != "fork" && !(kind == "exec" && note.is_some_and(|n| n.starts_with('\'')));
    if tsc {
        let f = body.get(at..(at + 10).min(body.len())).unwrap_or("");
        at += 10;
        // Filled on every line with counts; blank on the fork and exec-command lines.
        if counts && !right_aligned(f, 10, digits) {
            return Err(bad("tsc not %9d"));
        }
    }
    let rest = body.get(at.min(body.len())..).unwrap_or("");
    if counts {
        if rest.len() != 10 * requests
            || !(0..requests).all(|k| right_aligned(&rest[10 * k..10 * k + 10], 10, digits))
        {
            return Err(bad("counts not %9d per request"));
        }
    } else if !rest.trim().is_empty() {
        return Err(bad("a fork or exec-command line with counts"));
    }
    // Sun's fork line: `"%9s %9s # %d"` after the event, whatever the set and -t.
    let fork_note_at = 7 + if pid { 7 } else { 0 } + 4 + 11 + 20;
    if kind == "fork" && line.find(" # ") != Some(fork_note_at) {
        return Err(bad("fork's '# pid' not after two blank %9s fields"));
    }
    match (kind, note) {
        ("fork", Some(n)) if digits(n) => {}
        ("fork", _) => return Err(bad("fork without '# pid'")),
        ("exec", Some(n))
            if !counts && n.len() >= 2 && n.starts_with('\'') && n.ends_with('\'') => {}
        (_, None) => {}
        (_, Some(_)) => return Err(bad("a note where none belongs")),
    }
    Ok(kind.to_string())
}

/// Side by side with cputrack(1): every line of a run on a program that forks, executes and
/// starts threads has the documented layout for its kind; and the lines the documentation
/// promises are there: `lwp_create` when a thread starts (issue 30: never printed), `lwp_exit`
/// when a thread a tick sampled ends before its process, the `tsc`
/// column on the `exit` line with -t (issue 30: blank), `exec # 'cmd'`, small LWP ids.
#[test]
fn every_line_has_the_documented_format() {
    let w = common::workload().display().to_string();
    // The first program's threads touch 20000 pages each, so that ticks sample them before
    // they end: an LWP no tick sampled has no lwp_exit line, as with Sun's cputrack.
    let script = format!("{w} threads 20000; exec {w} threads 60");
    let out = cputrack(&[
        "-fevt",
        "-T",
        "0.005",
        "-c",
        "page-faults",
        "sh",
        "-c",
        &script,
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    let mut kinds = Vec::new();
    for (i, line) in text.lines().enumerate() {
        match cputrack_line_kind(line, true, true, 1) {
            Ok(k) => kinds.push(k),
            Err(e) => panic!("line {}: {e}\n{text}", i + 1),
        }
    }
    assert_eq!(kinds[0], "title", "{text}");
    for k in [
        "fork",
        "exec",
        "lwp_create",
        "lwp_exit",
        "init_lwp",
        "fini_lwp",
        "exit",
    ] {
        assert!(kinds.iter().any(|x| x == k), "no {k} line:\n{text}");
    }
    let l = lines(&text, true);
    // Two processes, each with its LWP 1 and the workload's two threads: small ids only.
    assert!(l.iter().all(|l| (1..=3).contains(&l.lwp)), "{text}");
    // Both exits (sh's child and sh after its exec) carry their CPU time in cycles.
    let exits: Vec<&str> = text
        .lines()
        .filter(|l| cputrack_line_kind(l, true, true, 1).is_ok_and(|k| k == "exit"))
        .collect();
    assert_eq!(exits.len(), 2, "{text}");
    assert!(
        exits
            .iter()
            .all(|e| e.split_whitespace().nth(3).is_some_and(|t| t != "0")),
        "{text}"
    );
    assert!(
        l.iter()
            .any(|l| l.event == "exec" && l.note == format!("'{w} threads 60'")),
        "{text}"
    );
    // Several sets: the same layout, each line with counts naming its set.
    let out = cputrack(&[
        "-T",
        "0.05",
        "-c",
        "page-faults",
        "-c",
        "task-clock,page-faults",
        &w,
        "threads",
        "50",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    for (i, line) in text.lines().enumerate().skip(1) {
        let (body, spec) = line.rsplit_once(" # ").unwrap_or_else(|| panic!("{line}"));
        let n = if spec == "page-faults" { 1 } else { 2 };
        assert!(
            spec == "page-faults" || spec == "task-clock,page-faults",
            "line {}: {line}",
            i + 1
        );
        if let Err(e) = cputrack_line_kind(body, false, false, n) {
            panic!("line {}: {e}\n{text}", i + 1);
        }
    }
}

/// As Solaris's getopt: the first operand ends cputrack's options, the rest is the command's
/// (`cputrack -c ev printf %s: -v` runs `printf %s: -v`, it does not take `-v` itself).
#[test]
fn options_stop_at_the_command() {
    let out = cputrack_command(&[
        "-o",
        "/dev/null",
        "-c",
        "page-faults",
        "printf",
        "%s:",
        "-v",
    ])
    .env_remove("POSIXLY_CORRECT")
    .output()
    .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "-v:");
}

/// The strace of `cputrack ARGS` alone (it traces its command itself): its lines, or `None`
/// (the test skipped) without strace.
fn cputrack_traced(name: &str, args: &[&str]) -> Option<String> {
    if Command::new("strace").arg("-V").output().is_err() {
        assert!(
            std::env::var_os("CI").is_none(),
            "strace not found: CI must install it (.ci/run does)"
        );
        common::skip("strace not found (apt-get install strace): cputrack not traced");
        return None;
    }
    let trace = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}.strace"));
    let out = Command::new("strace")
        .guarded()
        .args(["-qq", "-o"])
        .arg(&trace)
        .arg(env!("CARGO_BIN_EXE_cputrack"))
        .args(args)
        .env_remove("PERFCOMPAT_BACKEND")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    Some(std::fs::read_to_string(&trace).unwrap())
}

/// Issue 48: cputrack, whose process has no other thread to take SIGCHLD, waits for it
/// rather than waking every 10 ms to look at its command (each wakeup two context switches):
/// over a command of 0.3 s without ticks (`-T 0`) it waits a few times, not about 30.
#[test]
fn cputrack_waits_for_its_command_without_waking_every_10_ms() {
    let Some(trace) = cputrack_traced(
        "cputrack-waits",
        &["-T", "0", "-c", "page-faults", "sleep", "0.3"],
    ) else {
        return;
    };
    let waits: Vec<&str> = trace
        .lines()
        .filter(|l| l.starts_with("rt_sigtimedwait("))
        .collect();
    assert!(
        !waits.is_empty() && waits.len() <= 6,
        "{} waits for SIGCHLD: {waits:#?}",
        waits.len()
    );
}

/// Issue 48: cputrack checks each set before the command runs without binding it (its trial
/// binds were most of its fixed cost over its floor): traced with strace, before the command's
/// process is created each event of each set is opened once, as the bind opens it, and no
/// descriptor is moved up (`F_DUPFD_CLOEXEC`), no counter's id asked, enabled, read or mapped.
#[test]
fn the_sets_are_checked_before_the_command_runs_not_bound() {
    let Some(trace) = cputrack_traced(
        "cputrack-check",
        &[
            "-T",
            "0",
            "-c",
            "page-faults,task-clock",
            "-c",
            "page-faults",
            "true",
        ],
    ) else {
        return;
    };
    let before: Vec<&str> = trace
        .lines()
        .take_while(|l| {
            !["clone(", "clone3(", "fork(", "vfork("]
                .iter()
                .any(|c| l.contains(c))
        })
        .collect();
    // The sets' opens (the backend's probes ask for no read format, but for its probe of the
    // PMU, opened as a set's leader to be kept for a bind, issue 48: here, without a PMU, it
    // fails).
    let opens = before
        .iter()
        .filter(|l| {
            l.contains("perf_event_open(")
                && l.contains("read_format=PERF_FORMAT")
                && !l.contains(") = -1 ")
        })
        .count();
    assert_eq!(opens, 3, "each event of each set opened once: {before:#?}");
    for word in [
        "F_DUPFD_CLOEXEC",
        "PERF_EVENT_IOC_ID",
        "PERF_EVENT_IOC_ENABLE",
        "PERF_EVENT_IOC_DISABLE",
        "mmap(NULL, 4096, PROT_READ, MAP_SHARED",
    ] {
        let hits: Vec<&&str> = before.iter().filter(|l| l.contains(word)).collect();
        assert!(hits.is_empty(), "{word} before the command runs: {hits:#?}");
    }
}

/// Issue 48: cputrack lets its command go and waits for the command's exec stop alone: it
/// does not first wait on the pipe that reports an exec failure (the exec's close of that pipe
/// woke it before the stop: two context switches more). The pipe is read only if the command
/// ends before its exec (`refusals_name_the_cause`, `errors_name_the_cause` in pctx.rs).
#[test]
fn the_command_is_let_go_and_its_exec_stop_awaited_alone() {
    let Some(trace) = cputrack_traced("cputrack-go", &["-T", "0", "-c", "page-faults", "true"])
    else {
        return;
    };
    let lines: Vec<&str> = trace.lines().collect();
    let go = lines
        .iter()
        .position(|l| l.starts_with("write(") && l.contains(", \"g\", 1)"))
        .unwrap_or_else(|| panic!("no go-ahead written: {trace}"));
    let stop = go
        + lines[go..]
            .iter()
            .position(|l| l.starts_with("wait4("))
            .unwrap_or_else(|| panic!("no wait after the go-ahead: {trace}"));
    let reads: Vec<&&str> = lines[go..stop]
        .iter()
        .filter(|l| l.starts_with("read("))
        .collect();
    assert!(
        reads.is_empty(),
        "waited on the status pipe first: {:#?}",
        &lines[go..=stop]
    );
}

/// The path of `true` found in `PATH`.
fn true_in_path() -> std::path::PathBuf {
    std::env::split_paths(&std::env::var_os("PATH").unwrap())
        .map(|d| d.join("true"))
        .find(|p| p.is_file())
        .expect("true in PATH")
}

/// Issue 48: the command's path is looked up once before it is started (pctx checks that
/// `execvp` can run it; the fork used to look again).
#[test]
fn the_commands_path_is_looked_up_once() {
    let path = true_in_path();
    let path = path.to_str().unwrap();
    let Some(trace) = cputrack_traced("cputrack-path", &["-T", "0", "-c", "page-faults", path])
    else {
        return;
    };
    let looked: Vec<&str> = trace
        .lines()
        .take_while(|l| !l.starts_with("clone"))
        .filter(|l| l.contains(&format!("\"{path}\"")))
        .filter(|l| !l.starts_with("execve(") && !l.starts_with("access("))
        .collect();
    assert_eq!(looked.len(), 1, "{path} looked up: {looked:#?}");
}

/// Issue 48: cputrack creates its command sharing its memory until the exec
/// (`clone(CLONE_VM)`, as `posix_spawn` does), not as a copy of itself (`fork`): the copy's
/// page tables, the copy-on-write faults of every page cputrack wrote while the command ran,
/// and the exec's teardown of the copy were ~0.3 M instructions of its fixed cost in the arm64
/// guest.
#[test]
fn the_command_is_created_without_copying_cputrack() {
    let Some(trace) = cputrack_traced("cputrack-clone", &["-T", "0", "-c", "page-faults", "true"])
    else {
        return;
    };
    let created: Vec<&str> = trace
        .lines()
        .filter(|l| {
            ["clone(", "clone3(", "fork(", "vfork("]
                .iter()
                .any(|c| l.starts_with(c))
        })
        .collect();
    assert_eq!(created.len(), 1, "{trace}");
    assert!(created[0].contains("CLONE_VM"), "a copy: {created:?}");
}

/// The command created sharing cputrack's memory waits for its exec with every signal
/// blocked (no handler of cputrack's may run in it): it still starts with the signal mask and
/// the ignored signals it would have alone (here SIGUSR2 blocked and SIGHUP ignored by the
/// caller).
#[test]
fn the_command_starts_with_the_callers_signal_mask_and_dispositions() {
    use std::os::unix::process::CommandExt;
    fn caller(c: &mut Command) -> &mut Command {
        // SAFETY: (the child, before exec) two async-signal-safe calls.
        unsafe {
            c.pre_exec(|| {
                let mut s: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut s);
                libc::sigaddset(&mut s, libc::SIGUSR2);
                libc::pthread_sigmask(libc::SIG_SETMASK, &s, std::ptr::null_mut());
                libc::signal(libc::SIGHUP, libc::SIG_IGN);
                Ok(())
            })
        }
    }
    let fields = |text: &str| -> Vec<String> {
        ["SigBlk", "SigIgn"]
            .iter()
            .map(|f| format!("{f} {}", status_field(text, f)))
            .collect()
    };
    let cat = ["cat", "/proc/self/status"];
    let alone = caller(Command::new(cat[0]).guarded().arg(cat[1]))
        .output()
        .unwrap();
    let dir = common::TempDir::new("cputrack-mask");
    let file = dir.0.join("out.txt");
    let tracked = caller(&mut cputrack_command(&[
        "-T",
        "0",
        "-c",
        "page-faults",
        "-o",
    ]))
    .arg(&file)
    .args(cat)
    .output()
    .unwrap();
    assert!(tracked.status.success(), "{tracked:?}");
    let (alone, tracked) = (
        String::from_utf8_lossy(&alone.stdout),
        String::from_utf8_lossy(&tracked.stdout),
    );
    assert_eq!(fields(&tracked), fields(&alone), "{tracked}");
    assert!(fields(&alone)[0].ends_with("0000000000000800"), "{alone}");
}

/// The command created sharing cputrack's memory is looked for as `execvp` does (the child
/// makes glibc's search itself, with system calls that leave its creator's `errno` alone):
/// past a file in `PATH` it cannot execute to the next one, and a file without `#!` run by
/// `/bin/sh`, named by its path or found in `PATH`.
#[test]
fn the_command_is_searched_and_run_as_execvp_does() {
    use std::os::unix::fs::PermissionsExt;
    let dir = common::TempDir::new("cputrack-execvp");
    let (first, second) = (dir.0.join("a"), dir.0.join("b"));
    for d in [&first, &second] {
        std::fs::create_dir(d).unwrap();
    }
    // Not executable in the first directory; a script without `#!` in the second.
    std::fs::write(first.join("tool"), "echo wrong\n").unwrap();
    std::fs::write(second.join("tool"), "echo ran \"$1\"\n").unwrap();
    std::fs::set_permissions(second.join("tool"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", first.display(), second.display());
    let script = second.join("tool");
    for (cmd, path) in [
        ("tool", path.as_str()),
        (script.to_str().unwrap(), "/usr/bin:/bin"),
    ] {
        let out = cputrack_command(&[
            "-T",
            "0",
            "-n",
            "-c",
            "page-faults",
            "-o",
            "/dev/null",
            cmd,
            "x",
        ])
        .env("PATH", path)
        .output()
        .unwrap();
        assert!(out.status.success(), "{cmd}: {out:?}");
        assert_eq!(String::from_utf8_lossy(&out.stdout), "ran x\n", "{cmd}");
    }
}

/// A command that exists and is executable but whose exec fails in the child (here its ELF
/// interpreter is missing: `ENOENT`) is reported as with `execvp`: "cannot run", status 127.
/// The child says why on the status pipe, which cputrack reads once the child has ended.
#[test]
fn an_exec_that_fails_in_the_child_is_reported() {
    use std::os::unix::fs::PermissionsExt;
    let path = true_in_path();
    let mut elf = std::fs::read(path).unwrap();
    let Some(at) = elf.windows(8).position(|w| w == b"ld-linux") else {
        common::skip("true has no ELF interpreter to break");
        return;
    };
    elf[at..at + 2].copy_from_slice(b"xx");
    let dir = common::TempDir::new("cputrack-noexec");
    let bin = dir.0.join("broken");
    std::fs::write(&bin, &elf).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let bin = bin.to_str().unwrap();
    let out = cputrack(&["-T", "0", "-c", "page-faults", bin]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(127), "{err}");
    assert!(err.contains(&format!("cannot run '{bin}'")), "{err}");
    assert!(out.stdout.is_empty(), "{out:?}");
}
