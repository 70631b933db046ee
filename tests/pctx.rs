//! Process control under ptrace (`perfcompat::api::pctx`): what an observer is told, counters bound
//! per thread from the callbacks, capture of a running process, ticks and release.

mod common;
use common::Guarded;

use std::ffi::OsString;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::workload;
use perfcompat::api::pctx::{Follow, Observer, Pctx, Status};
use perfcompat::{bind, Binding, CounterSet, Request, Target};

/// Records every callback, and counts page faults per thread from init_lwp to fini_lwp.
#[derive(Default)]
struct Log {
    events: Vec<String>,
    live: Vec<(i32, Binding)>,
    faults: Vec<(i32, i32, u64)>,
    ticks: usize,
}

impl Observer for Log {
    fn init_lwp(&mut self, pid: i32, tid: i32) -> perfcompat::Result<()> {
        self.events.push(format!("init {}", pid == tid));
        let set = CounterSet::new().with(Request::new("page-faults"))?;
        self.live.push((tid, bind(&set, Target::Thread(tid))?));
        Ok(())
    }
    fn fini_lwp(&mut self, pid: i32, tid: i32) -> perfcompat::Result<()> {
        self.events.push(format!("fini {}", pid == tid));
        let i = self
            .live
            .iter()
            .position(|l| l.0 == tid)
            .expect("init before fini");
        let (_, b) = self.live.remove(i);
        let mut v = [0u64];
        b.sample(&mut v)?;
        self.faults.push((pid, tid, v[0]));
        Ok(())
    }
    fn lwp_create(&mut self, _pid: i32, _tid: i32, _new: i32) -> perfcompat::Result<()> {
        self.events.push("lwp_create".into());
        Ok(())
    }
    fn lwp_exit(&mut self, _pid: i32, _tid: i32) -> perfcompat::Result<()> {
        self.events.push("lwp_exit".into());
        Ok(())
    }
    fn fork(&mut self, _pid: i32, _tid: i32, _child: i32) -> Follow {
        self.events.push("fork".into());
        Follow::Here
    }
    fn exec(&mut self, _pid: i32, _tid: i32) -> perfcompat::Result<()> {
        self.events.push("exec".into());
        Ok(())
    }
    fn exit(&mut self, _pid: i32, status: Status) {
        self.events.push(format!("exit {status:?}"));
    }
    fn tick(&mut self, _pid: i32, _tid: i32) -> perfcompat::Result<()> {
        self.ticks += 1;
        Ok(())
    }
}

/// Wait until the spawned `pid` runs the workload (spawn returns as soon as the exec has
/// begun; a capture before its end would see that exec, with its fini_lwp and init_lwp).
fn wait_exec(pid: u32) {
    let want = std::fs::canonicalize(workload()).unwrap();
    for _ in 0..5000 {
        if std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|p| p == want) {
            // The exe link changes inside the exec: give it time to end.
            std::thread::sleep(Duration::from_millis(20));
            return;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    panic!("process {pid} did not exec the workload");
}

fn args(a: &[&str]) -> Vec<OsString> {
    let mut v = vec![OsString::from(workload())];
    v.extend(a.iter().map(OsString::from));
    v
}

#[test]
fn created_command_threads_are_observed_from_start_to_exit() {
    let mut p = Pctx::create(&args(&["threads", "700"])).unwrap();
    let mut log = Log::default();
    let st = p.run(&mut log, None, 0).unwrap();
    assert_eq!(st, Some(Status::Exited(0)));
    // The command's own thread first, then two threads each created, started, exiting.
    assert_eq!(log.events[0], "init true");
    assert_eq!(log.events.iter().filter(|e| *e == "lwp_create").count(), 2);
    assert_eq!(log.events.iter().filter(|e| *e == "init false").count(), 2);
    assert_eq!(log.events.iter().filter(|e| *e == "fini false").count(), 2);
    // lwp_exit only for the two threads that end before the process (issue 30): the first
    // thread ends with the process and gets fini_lwp alone.
    assert_eq!(log.events.iter().filter(|e| *e == "lwp_exit").count(), 2);
    let n = log.events.len();
    assert_eq!(
        log.events[n - 3..],
        ["fini false", "fini true", "exit Exited(0)"],
        "{:?}",
        log.events
    );
    assert_eq!(
        log.events.last().unwrap(),
        "exit Exited(0)",
        "{:?}",
        log.events
    );
    assert!(log.live.is_empty(), "every thread got fini_lwp");
    // Counters bound in init_lwp saw each thread's own 700 page faults, no more.
    let workers: Vec<u64> = log
        .faults
        .iter()
        .filter(|f| f.0 != f.1)
        .map(|f| f.2)
        .collect();
    assert_eq!(workers.len(), 2);
    assert!(
        workers.iter().all(|&n| (700..800).contains(&n)),
        "{workers:?}"
    );
    p.release(&mut log).unwrap();
}

#[test]
fn forks_and_execs_are_reported() {
    let mut p = Pctx::create(&[
        OsString::from("sh"),
        OsString::from("-c"),
        OsString::from(format!("{} touch 10; exit 7", workload().display())),
    ])
    .unwrap();
    let mut log = Log::default();
    assert_eq!(
        p.run(&mut log, None, 0).unwrap(),
        Some(Status::Exited(7)),
        "{:?}",
        log.events
    );
    assert!(log.events.iter().any(|e| e == "fork"), "{:?}", log.events);
    // sh's own start is not an exec event; its child execs the workload.
    assert!(
        log.events.iter().filter(|e| *e == "exec").count() >= 1,
        "{:?}",
        log.events
    );
    assert_eq!(
        log.events.iter().filter(|e| e.starts_with("exit")).count(),
        2
    );
}

#[test]
fn a_running_process_can_be_captured_ticked_and_released() {
    let mut child = Command::new(workload())
        .guarded()
        .args(["stdin", "500"])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    wait_exec(child.id());
    let mut p = Pctx::capture(child.id() as i32).unwrap();
    assert_eq!(p.pid(), child.id() as i32);
    let mut log = Log::default();
    // Ticks while it waits on its input: one tick per observed thread (just one so far).
    assert_eq!(
        p.run(&mut log, Some(Duration::from_millis(5)), 3).unwrap(),
        None
    );
    assert_eq!(log.ticks, 3);
    assert_eq!(log.events, ["init true"]);
    // Let it create its threads: they are observed from their first instruction.
    child.stdin.take().unwrap().write_all(b"x").unwrap();
    let st = p.run(&mut log, None, 0).unwrap();
    assert_eq!(st, Some(Status::Exited(0)), "{:?}", log.events);
    let workers: Vec<u64> = log
        .faults
        .iter()
        .filter(|f| f.0 != f.1)
        .map(|f| f.2)
        .collect();
    assert_eq!(workers.len(), 2, "{:?}", log.events);
    assert!(
        workers.iter().all(|&n| (500..600).contains(&n)),
        "{workers:?}"
    );
    p.release(&mut log).unwrap();
    let _ = child.wait(); // already reaped by the tracer: ECHILD is fine
}

#[test]
fn release_lets_the_process_go_on_untraced() {
    let mut child = Command::new(workload())
        .guarded()
        .args(["sleep", "300", "5"])
        .spawn()
        .unwrap();
    wait_exec(child.id());
    let mut p = Pctx::capture(child.id() as i32).unwrap();
    let mut log = Log::default();
    assert_eq!(
        p.run(&mut log, Some(Duration::from_millis(10)), 2).unwrap(),
        None
    );
    p.release(&mut log).unwrap();
    assert_eq!(log.events, ["init true", "fini true"]);
    // Detached, it finishes normally and its parent sees its status.
    assert_eq!(child.wait().unwrap().code(), Some(5));
}

#[test]
fn errors_name_the_cause() {
    let e = Pctx::capture(-5).err().unwrap();
    assert!(e.to_string().contains("no such process"), "{e}");
    let e = Pctx::capture(i32::MAX).err().unwrap();
    assert!(e.to_string().contains("no such process"), "{e}");
    // A command that is nowhere is refused before anything is forked.
    for cmd in ["/nonexistent/cmd", "no-such-command-anywhere"] {
        let e = Pctx::create(&[OsString::from(cmd)]).err().unwrap();
        assert!(
            e.to_string().contains(&format!("cannot run '{cmd}'")),
            "{e}"
        );
        assert_eq!(e.errno(), libc::ENOENT);
    }
    // So is one that exists but cannot be executed (it failed in the child, at run).
    let e = Pctx::create(&[OsString::from("/")]).err().unwrap();
    assert!(e.to_string().contains("cannot run '/'"), "{e}");
    assert_eq!(e.errno(), libc::EACCES);
    // A created command that never ran is killed when dropped, without hanging.
    drop(Pctx::create(&args(&["touch", "1"])).unwrap());
}
