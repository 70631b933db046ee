//! Helpers shared by the integration tests.
#![allow(dead_code)]

/// A three-argument signal handler.
pub type SigInfoHandler = extern "C" fn(i32, *mut libc::siginfo_t, *mut libc::c_void);

/// Install `handler` for signal `sig` (63 is SIGEMT) with `SA_SIGINFO | SA_RESTART` and an
/// empty mask.
pub fn on_signal(sig: i32, handler: SigInfoHandler) {
    // SAFETY: installing a handler with a zeroed, then filled-in, sigaction.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = handler as *const () as usize;
        sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        assert_eq!(libc::sigaction(sig, &sa, std::ptr::null_mut()), 0);
    }
}

/// Anonymous memory without huge pages: each page faults exactly once on its first touch.
pub struct Pages {
    pub p: *mut u8,
    pub n: usize,
}

/// Keep what the process has mapped so far resident once it is touched: `mlockall` with
/// `MCL_CURRENT | MCL_ONFAULT`, once per process, best effort. Some hosts reclaim memory that
/// has not been used for a while on their own (this VM runs a DAMON `pageout` scheme, which
/// had paged out about 100 GB when looked at); a test process that waits long enough could
/// fault its own code back in inside an interval that a test counts exactly. Mappings made
/// afterwards, like [`Pages`], are not locked: their first touches still fault.
pub fn keep_code_resident() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // MCL_ONFAULT (Linux 4.4): lock pages as they are faulted in, without populating all.
        const MCL_ONFAULT: libc::c_int = 4;
        // SAFETY: a plain system call; failure (no privilege, RLIMIT_MEMLOCK) is harmless.
        unsafe { libc::mlockall(libc::MCL_CURRENT | MCL_ONFAULT) };
    });
}

impl Pages {
    pub fn new(n: usize) -> Pages {
        keep_code_resident();
        // SAFETY: a fresh private anonymous mapping.
        let p = unsafe {
            let p = libc::mmap(
                std::ptr::null_mut(),
                n * 4096,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            assert_ne!(p, libc::MAP_FAILED);
            libc::madvise(p, n * 4096, libc::MADV_NOHUGEPAGE);
            p as *mut u8
        };
        Pages { p, n }
    }

    pub fn touch(&self, i: usize) {
        assert!(i < self.n);
        // SAFETY: in bounds of the mapping.
        unsafe { std::ptr::write_volatile(self.p.add(i * 4096), 1) };
    }
}

impl Drop for Pages {
    fn drop(&mut self) {
        // SAFETY: our mapping.
        unsafe { libc::munmap(self.p.cast(), self.n * 4096) };
    }
}

// SAFETY: the mapping is plain memory.
unsafe impl Send for Pages {}

/// All values of a binding.
pub fn sample(b: &perfcompat::Binding) -> Vec<u64> {
    let mut v = vec![0; b.len()];
    b.sample(&mut v).unwrap();
    v
}

/// Say why a test was skipped where the user sees it: straight to fd 2, which the test
/// harness does not capture (it captures only the print macros).
pub fn skip(msg: &str) {
    let line = format!("SKIPPED: {msg}\n");
    // SAFETY: write(2) of a local buffer.
    unsafe { libc::write(2, line.as_ptr().cast(), line.len()) };
}

/// A command whose program is killed (`SIGKILL`) when the thread that started it ends: a test
/// that returns, panics or is killed with its whole suite (a run stopped at its time limit)
/// leaves no program of its own running. The signal is set in the child between fork and exec
/// (`PR_SET_PDEATHSIG`); the kernel clears it when the child changes its credentials, so a
/// command that drops privileges sets it again afterwards.
pub trait Guarded {
    /// Kill the program with the thread that starts it (see the trait).
    fn guarded(&mut self) -> &mut Self;
}

impl Guarded for std::process::Command {
    fn guarded(&mut self) -> &mut Self {
        use std::os::unix::process::CommandExt;
        // SAFETY: one system call between fork and exec.
        unsafe {
            self.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            })
        }
    }
}

/// Whether `tool` can be run (`tool --version`). Without it the tests that need it are skipped
/// with a message, except in CI (`CI` set), where they fail: CI must install `package`.
pub fn have_tool(tool: &str, package: &str) -> bool {
    if std::process::Command::new(tool)
        .arg("--version")
        .output()
        .is_ok()
    {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "{tool} not found: CI must install it (apt-get install {package}; .ci/run does)"
    );
    skip(&format!("{tool} not found (apt-get install {package})"));
    false
}

/// A fresh directory under the system temp dir, removed on drop.
pub struct TempDir(pub std::path::PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let d = std::env::temp_dir().join(format!("perfcompat-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        TempDir(d)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The workload program of the perfex and pctx tests (tests/c/perfex_workload.c), built once
/// into the target's temporary directory.
pub fn workload() -> &'static std::path::Path {
    static BIN: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    BIN.get_or_init(|| {
        let out = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("perfex_workload");
        let st = std::process::Command::new("cc")
            .args([
                "-std=c99", "-O1", "-Wall", "-Wextra", "-Werror", "-pthread", "-o",
            ])
            .arg(&out)
            .arg(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/perfex_workload.c"))
            .status()
            .expect("a C compiler (cc) is installed");
        assert!(st.success(), "compiling perfex_workload.c failed");
        out
    })
}

/// Define this test crate's global allocator: it forwards to the system allocator and counts
/// allocations (and reallocations) per thread; `allocs()` returns the calling thread's count.
/// For the tests that show a path allocates nothing.
#[allow(unused_macros)]
macro_rules! counting_allocator {
    () => {
        struct Counting;
        thread_local! {
            static ALLOCS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
        }
        // SAFETY: forwards to the system allocator; only counts.
        unsafe impl std::alloc::GlobalAlloc for Counting {
            unsafe fn alloc(&self, l: std::alloc::Layout) -> *mut u8 {
                let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
                // SAFETY: forwarded.
                unsafe { std::alloc::System.alloc(l) }
            }
            unsafe fn dealloc(&self, p: *mut u8, l: std::alloc::Layout) {
                // SAFETY: forwarded.
                unsafe { std::alloc::System.dealloc(p, l) }
            }
            unsafe fn realloc(&self, p: *mut u8, l: std::alloc::Layout, n: usize) -> *mut u8 {
                let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
                // SAFETY: forwarded.
                unsafe { std::alloc::System.realloc(p, l, n) }
            }
        }
        #[global_allocator]
        static A: Counting = Counting;

        /// Allocations made by the calling thread so far.
        fn allocs() -> u64 {
            ALLOCS.with(|c| c.get())
        }
    };
}

/// Write `msg` to standard error directly: a test's own output is captured by the test
/// harness, and threads it spawns inherit that capture, so what they print before the
/// process ends is lost.
pub fn say(msg: &str) {
    // SAFETY: a plain write of a valid buffer.
    unsafe { libc::write(2, msg.as_ptr().cast(), msg.len()) };
}

/// For tests whose worker threads meet at barriers: a panic on a worker (an unnamed thread;
/// the harness names test threads) is printed and ends the process at once, instead of
/// leaving the others waiting at the next barrier until a watchdog fires; and the watchdog
/// (`secs` after the first call) says so on standard error before it ends the process.
pub fn fail_fast(what: &'static str, secs: u64) {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if std::thread::current().name().is_none() {
                say(&format!("{what}: a worker thread panicked: {info}\n"));
                std::process::exit(101);
            }
            prev(info);
        }));
        std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_secs(secs));
            say(&format!(
                "{what}: still running after {secs} s: deadlock?\n"
            ));
            std::process::exit(101);
        });
    });
}

/// The Rust source files under `dir`, recursively, sorted.
pub fn rust_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    fn walk(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, &mut out);
    out.sort();
    out
}

/// Touches the next `k` fresh pages of 4000 (one page fault each).
pub struct Faults {
    pages: Pages,
    next: usize,
}

impl Faults {
    /// 4000 fresh pages to fault on.
    pub fn new() -> Faults {
        Faults {
            pages: Pages::new(4000),
            next: 0,
        }
    }

    /// Touch the next `k` pages.
    pub fn take(&mut self, k: usize) {
        for _ in 0..k {
            self.pages.touch(self.next);
            self.next += 1;
        }
    }
}

/// Touch 256 KiB of stack below the caller's frame, so that the signal handlers run later
/// from frames no deeper take no page fault there. Never inlined: its frame must lie below
/// the caller's.
#[inline(never)]
pub fn prefault_stack() {
    let mut stack = [0u8; 256 * 1024];
    for i in (0..stack.len()).step_by(4096) {
        // SAFETY: in bounds.
        unsafe { std::ptr::write_volatile(stack.as_mut_ptr().add(i), 1) };
    }
    std::hint::black_box(&stack);
}

/// A set of one request: page faults, notifying from `preset` (its overflow comes after
/// `u64::MAX - preset + 1` faults).
pub fn notifying_page_faults(preset: u64) -> perfcompat::CounterSet {
    perfcompat::CounterSet::new()
        .with(
            perfcompat::Request::new("page-faults")
                .preset(preset)
                .notify(),
        )
        .unwrap()
}

/// Run this test binary again for test `test` alone, with `env` set: a child process for a
/// test that changes process-wide state (limits, signal queues). Not `fork`: a fork of a
/// process whose other test threads hold a lock (a `OnceLock` being initialised, the engine's
/// tables) can hang the child forever.
pub fn run_as_child(test: &str, env: &str) -> std::process::Output {
    std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--test-threads=1", "--nocapture"])
        .env(env, "1")
        .output()
        .unwrap()
}

/// A standard stream for a child that is a pipe nobody reads (its reading end is closed here
/// at once, as after `| true`): each write to it fails with EPIPE.
pub fn unread_pipe() -> std::process::Stdio {
    use std::os::fd::{FromRawFd, OwnedFd};
    let mut p = [0; 2];
    // SAFETY: pipe2 returns two new descriptors; the reading one is closed, the writing one
    // owned by the Stdio.
    unsafe {
        assert_eq!(libc::pipe2(p.as_mut_ptr(), libc::O_CLOEXEC), 0);
        libc::close(p[0]);
        std::process::Stdio::from(OwnedFd::from_raw_fd(p[1]))
    }
}

/// Run `cmd` (standard output and error piped, guarded), killed after `limit`: its output, or
/// `None` when it was still running then and had to be killed.
pub fn output_within(
    cmd: &mut std::process::Command,
    limit: std::time::Duration,
) -> Option<std::process::Output> {
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .guarded()
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    Some(child.wait_with_output().unwrap())
}

/// Block (`true`) or unblock the overflow signal on this thread.
pub fn block_overflow_signal(block: bool) {
    // SAFETY: a mask change on the calling thread.
    unsafe {
        let mut s: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut s);
        libc::sigaddset(&mut s, perfcompat::base::signal::overflow_signal());
        let how = if block {
            libc::SIG_BLOCK
        } else {
            libc::SIG_UNBLOCK
        };
        assert_eq!(libc::pthread_sigmask(how, &s, std::ptr::null_mut()), 0);
    }
}

/// Whether the overflow signal is pending on this thread.
pub fn overflow_signal_pending() -> bool {
    // SAFETY: reads this thread's pending set into a local.
    unsafe {
        let mut s: libc::sigset_t = std::mem::zeroed();
        assert_eq!(libc::sigpending(&mut s), 0);
        libc::sigismember(&s, perfcompat::base::signal::overflow_signal()) == 1
    }
}

/// A libcpc set of `events` on `be`, added as `cpc_set_add_request` adds them (user mode),
/// leaked: the tests of the perf backend over the kernel model (`perf_pmu_counters.rs`,
/// `perf_kept.rs`).
pub fn cpc_set(
    be: &dyn perfcompat::backend::Backend,
    events: &[&str],
) -> &'static perfcompat::api::cpc::set::Set {
    use perfcompat::api::cpc::set::Set;
    let s: &'static Set = Box::leak(Box::new(Set::new()));
    for e in events {
        s.reqs
            .add(
                be,
                e.as_bytes(),
                0,
                perfcompat::api::cpc::COUNT_USER,
                Vec::new(),
            )
            .unwrap_or_else(|err| panic!("{e}: {err}"));
    }
    s
}

/// No libcpc sets to look up or walk: for `Set::bind_curlwp` in tests that do not fork.
pub struct NoSets;

impl perfcompat::api::cpc::set::Sets for NoSets {
    fn by_key(_: usize) -> Option<&'static perfcompat::api::cpc::set::Set> {
        None
    }

    fn each(_: &mut dyn FnMut(&perfcompat::api::cpc::set::Set)) {}
}
