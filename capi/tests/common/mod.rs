//! Helpers shared by the tests that build C and Fortran programs against the C ABI: the freshly
//! built library, running the programs, golden files, cost files and event maps, gfortran.
#![allow(dead_code)]

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

// The engine tests' helpers, for `skip`.
#[path = "../../../tests/common/mod.rs"]
mod engine;
#[allow(unused_imports)]
pub use engine::{fail_fast, have_tool, output_within, say, skip, Guarded};

/// The repository's root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// This test crate's scratch directory (stable across runs, under target/).
pub fn tmp() -> &'static Path {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
}

/// Build the shared library fresh (plain `cargo test` builds only the rlib, and a `.so` left in
/// target/ could be stale) into a target directory of its own, and return where it is.
pub fn lib_dir() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let target = tmp().join("capi-build");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let st = Command::new(cargo)
            .args([
                "build",
                "--quiet",
                "-p",
                "perfcompat-capi",
                "--lib",
                "--target-dir",
            ])
            .arg(&target)
            .current_dir(repo())
            .status()
            .expect("cargo runs");
        assert!(st.success(), "building the perfcompat-capi cdylib failed");
        let dir = target.join("debug");
        assert!(
            dir.join("libperfcompat_capi.so").exists(),
            "cargo did not build the cdylib in {}",
            dir.display()
        );
        dir
    })
    .clone()
}

/// The `perfex` command, built fresh next to [`lib_dir`]'s library (same target directory).
pub fn perfex_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| command_bin("perfex")).clone()
}

/// The `cputrack` command, built the same way.
pub fn cputrack_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| command_bin("cputrack")).clone()
}

/// One of the engine crate's commands, built into [`lib_dir`]'s target directory.
fn command_bin(name: &str) -> PathBuf {
    let target = lib_dir().join("..");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let st = Command::new(cargo)
        .args(["build", "--quiet", "-p", "perfcompat", "--bin", name])
        .arg("--target-dir")
        .arg(&target)
        .current_dir(repo())
        .status()
        .expect("cargo runs");
    assert!(st.success(), "building the {name} command failed");
    lib_dir().join(name)
}

/// The linker arguments that link against the built library only, found again at run time
/// through the rpath.
pub fn link_args() -> Vec<String> {
    let lib = lib_dir();
    vec![
        format!("-L{}", lib.display()),
        format!("-Wl,-rpath,{}", lib.display()),
        "-lperfcompat_capi".into(),
    ]
}

/// libpfcntr, the library that interposes `open`/`ioctl`/`read`/`close` for `/dev/pfcntr`
/// (`capi/pfcntr/pfcntr.c`), built fresh against [`lib_dir`]'s library as `tools/install.sh`
/// builds it (the anonymous version script `capi/pfcntr/pfcntr.map`, soname `libpfcntr.so.1`)
/// but with an rpath to [`lib_dir`]. Returns its directory: `libpfcntr.so.1` and the link
/// `libpfcntr.so`.
pub fn pfcntr_dir() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = c_library("pfcntr", "libpfcntr.so.1");
        let link = dir.join("libpfcntr.so");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink("libpfcntr.so.1", &link).unwrap();
        dir
    })
    .clone()
}

/// libperfcompat-preload, the library that `LD_PRELOAD` names with `PERFCOMPAT_PRELOAD_EVENTS`
/// (`capi/preload/preload.c`: `_exit`, `_Exit` and the `exec` functions), built fresh against
/// [`lib_dir`]'s library as [`pfcntr_dir`] builds libpfcntr. Returns its path.
pub fn preload_lib() -> PathBuf {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(|| {
        c_library("preload", "libperfcompat-preload.so.1").join("libperfcompat-preload.so.1")
    })
    .clone()
}

/// Build `capi/<name>/<name>.c` with its version script `<name>.map` as the shared library
/// `soname`, against [`lib_dir`]'s library (found through the rpath), into a directory of
/// its own; returns that directory.
fn c_library(name: &str, soname: &str) -> PathBuf {
    let dir = tmp().join(format!("{name}-build"));
    std::fs::create_dir_all(&dir).unwrap();
    // Written under another name and renamed: a program of an earlier test binary that still
    // runs keeps the file it loaded.
    let part = dir.join(format!("{soname}.part-{}", std::process::id()));
    let src = format!("capi/{name}/{name}.c");
    compile(
        Command::new("cc")
            .args(["-std=c99", "-O2", "-shared", "-fPIC"])
            .args(["-Wall", "-Wextra", "-Wpedantic", "-Werror", "-o"])
            .arg(&part)
            .arg(repo().join(&src))
            .arg(format!("-Wl,-soname,{soname}"))
            .arg("-Wl,--no-undefined")
            .arg(format!(
                "-Wl,--version-script={}",
                repo().join(format!("capi/{name}/{name}.map")).display()
            ))
            .args(link_args())
            .arg("-ldl"),
        &src,
    );
    std::fs::rename(&part, dir.join(soname)).unwrap();
    dir
}

/// The linker arguments of a program that uses `/dev/pfcntr`: `-lpfcntr` ([`pfcntr_dir`]) and
/// then the library ([`link_args`]: `perfcompat_sim_advance`), found again through the rpaths.
pub fn pfcntr_link_args() -> Vec<String> {
    let dir = pfcntr_dir();
    let mut args = vec![
        format!("-L{}", dir.display()),
        format!("-Wl,-rpath,{}", dir.display()),
        "-lpfcntr".into(),
    ];
    args.extend(link_args());
    args
}

/// What to preload for `/dev/pfcntr` in a program linked with neither library: [`pfcntr_dir`]'s
/// `libpfcntr.so.1`, which brings the library in.
pub fn pfcntr_preload() -> String {
    pfcntr_dir()
        .join("libpfcntr.so.1")
        .to_str()
        .unwrap()
        .to_string()
}

/// Install perfcompat with the README's install command (`bash tools/install.sh --prefix P`)
/// into `<tmp>/prefix`, once per test binary, building into a target directory of its own;
/// returns the prefix. Test binaries run one after another, so they can share it.
pub fn installed_prefix() -> &'static Path {
    static PREFIX: OnceLock<PathBuf> = OnceLock::new();
    PREFIX.get_or_init(|| {
        let prefix = tmp().join("prefix");
        let out = Command::new("bash")
            .arg(repo().join("tools/install.sh"))
            .arg("--prefix")
            .arg(&prefix)
            .env("CARGO_TARGET_DIR", tmp().join("install-build"))
            .env_remove("DESTDIR")
            .output()
            .expect("bash runs");
        assert!(
            out.status.success(),
            "tools/install.sh --prefix {} failed:\n{}",
            prefix.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        prefix
    })
}

/// The compiler flags of `pkg-config --cflags --libs lib<lib>` for the installed `prefix`
/// (`-I<prefix>/include -L<prefix>/lib -l<lib>` without pkg-config, outside CI, and
/// `-lperfcompat` after `-lpfcntr` as libpfcntr.pc has it).
pub fn pkg_config(prefix: &Path, lib: &str) -> Vec<String> {
    if !have_tool("pkg-config", "pkg-config") {
        let mut flags = vec![
            format!("-I{}", prefix.join("include").display()),
            format!("-L{}", prefix.join("lib").display()),
            format!("-l{lib}"),
        ];
        if lib == "pfcntr" {
            flags.push("-lperfcompat".into());
        }
        return flags;
    }
    let out = Command::new("pkg-config")
        .args(["--cflags", "--libs", &format!("lib{lib}")])
        .env("PKG_CONFIG_PATH", prefix.join("lib/pkgconfig"))
        .output()
        .expect("pkg-config runs");
    assert!(
        out.status.success(),
        "pkg-config --cflags --libs lib{lib} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

/// `compiler <flags> <src> $(pkg-config --cflags --libs lib<lib>) -Wl,-rpath,<prefix>/lib`
/// (`src` from the repository's root), built as `<tmp>/<out>`: a program built the way a user
/// builds against an installed perfcompat.
pub fn build_installed(
    compiler: &str,
    flags: &[&str],
    src: &str,
    prefix: &Path,
    lib: &str,
    out: &str,
) -> PathBuf {
    let out = tmp().join(out);
    compile(
        Command::new(compiler)
            .args(flags)
            .arg(repo().join(src))
            .args(pkg_config(prefix, lib))
            .arg(format!("-Wl,-rpath,{}", prefix.join("lib").display()))
            .arg("-o")
            .arg(&out),
        src,
    );
    out
}

/// Run a compiler command; fail the test if it fails.
pub fn compile(cmd: &mut Command, what: &str) {
    let st = cmd
        .status()
        .unwrap_or_else(|e| panic!("cannot run {:?} for {what}: {e}", cmd.get_program()));
    assert!(st.success(), "compiling {what} failed: {cmd:?}");
}

/// Compile the test program `tests/c/<name>.c` into `tmp()/<name>`: C99, warnings as errors,
/// `flags` added, the library's headers, linked with the library ([`link_args`]). Returns its
/// path. Tests that run in parallel keep the result in a `OnceLock`, so that one does not run
/// the program while another writes it.
pub fn c_program(name: &str, flags: &[&str]) -> PathBuf {
    let out = tmp().join(name);
    let src = format!("tests/c/{name}.c");
    compile(
        Command::new("cc")
            .args(["-std=c99", "-Wall", "-Wextra", "-Werror"])
            .args(flags)
            .arg("-o")
            .arg(&out)
            .arg(repo().join(&src))
            .arg(format!("-I{}", repo().join("include").display()))
            .args(link_args()),
        &src,
    );
    out
}

/// Run `bin` on `backend` with `args` and the extra environment `env`.
pub fn run_output(bin: &Path, backend: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(bin);
    // cargo test puts target/debug/deps on LD_LIBRARY_PATH, which would win over the rpath and
    // load whatever (possibly stale) libperfcompat_capi.so the main build left there.
    cmd.env_remove("LD_LIBRARY_PATH")
        .args(args)
        .env("PERFCOMPAT_BACKEND", backend)
        .envs(env.iter().copied());
    output_one_fault_per_page(&mut cmd)
}

/// Run `cmd` (killed with the test if it outlives it) with transparent huge pages off for it
/// and its descendants, and return its output. The programs count page faults of pages they
/// touch once: with transparent huge pages ("always" on some distributions) one fault could
/// map many of them.
pub fn output_one_fault_per_page(cmd: &mut Command) -> Output {
    // SAFETY: prctl is a system call, safe between fork and exec; the setting survives exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
            Ok(())
        })
    };
    cmd.guarded()
        .output()
        .unwrap_or_else(|e| panic!("cannot run {:?}: {e}", cmd.get_program()))
}

/// [`run_output`] on perf for a program that traces another (libpctx, cputrack): `None`, after
/// a SKIPPED line, where tracing is not allowed; otherwise its standard output and error.
pub fn run_traced(bin: &Path, args: &[&str]) -> Option<(String, String, Output)> {
    let out = run_output(bin, "perf", args, &[]);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    if stderr.contains("ptrace") && stderr.contains("permission denied") {
        skip("tracing a child is not allowed here (kernel.yama.ptrace_scope)");
        return None;
    }
    Some((stdout, stderr, out))
}

/// Run a test program: it must succeed and print "0 failures"; returns its standard error.
pub fn run_env(bin: &Path, backend: &str, args: &[&str], env: &[(&str, &str)]) -> String {
    let out = run_output(bin, backend, args, env);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{} under {backend} failed:\n{stdout}\n{}",
        bin.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("0 failures"), "{stdout}");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// [`run_env`] without extra environment.
pub fn run(bin: &Path, backend: &str, args: &[&str]) -> String {
    run_env(bin, backend, args, &[])
}

/// Compare with a golden file (`path` from the repository's root); `PERFCOMPAT_BLESS=1` rewrites
/// it.
pub fn golden(path: &str, got: &str) {
    let path = repo().join(path);
    if std::env::var_os("PERFCOMPAT_BLESS").is_some() {
        std::fs::write(&path, got).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_default();
    assert_eq!(got, want, "output differs from {}", path.display());
}

/// A good partial cost file and a malformed one, for the libperfex tests.
pub fn cost_files() -> (PathBuf, PathBuf) {
    let good = tmp().join("good.costs");
    let bad = tmp().join("bad.costs");
    write_file(
        &good,
        "# partial table: the clock and one event\nclock 100 MHz\n\
         26 Secondary data cache misses ..... 500 100 900 nsec\n",
    );
    write_file(
        &bad,
        "clock 100 MHz\n26 500 100 900 nsec\n25 1 2 three clks\n",
    );
    (good, bad)
}

/// Write `path` whole at once (through a rename), so that a program another test thread runs
/// never reads it half-written.
pub fn write_file(path: &Path, text: &str) {
    let part = path.with_extension(format!("part-{:?}", std::thread::current().id()));
    std::fs::write(&part, text).unwrap();
    std::fs::rename(&part, path).unwrap();
}

/// No system cost file and no host calibration cache, so every machine prints the same.
pub const NO_COST_FILES: [(&str, &str); 2] = [
    ("PERFCOMPAT_SYSTEM_COSTS", "/nonexistent/perfex.costs"),
    ("PERFCOMPAT_HOST_COSTS", "/nonexistent/host.costs"),
];

/// A `PERFCOMPAT_EVENTS` file counting R10000 event `event` as page faults, so that perf-backend
/// runs count something real without a hardware PMU.
pub fn page_fault_map(event: u32) -> PathBuf {
    let map = tmp().join(format!("page-faults-as-{event}.map"));
    write_file(
        &map,
        &format!("# event {event} counted as page faults here\n{event} = page-faults\n"),
    );
    map
}

/// Run a libperfex test program (tests/c/perfex_basic.c, tests/fortran/perfex_*) the way they
/// all take it: `sim <good> <bad>` on `sim:r10000`, whose standard error must match the golden
/// file `golden_file`, then `perf <good> <bad>` on perf with event 25 counted as page faults.
/// Both with the cost files of [`cost_files`] and none of the machine's own.
pub fn run_libperfex_program(bin: &Path, golden_file: &str) {
    run_libperfex_program_on_sim(bin, golden_file);
    let (good, bad) = cost_files();
    let files = [good.to_str().unwrap(), bad.to_str().unwrap()];
    let map = page_fault_map(25);
    let env = [
        ("PERFCOMPAT_EVENTS", map.to_str().unwrap()),
        NO_COST_FILES[0],
        NO_COST_FILES[1],
    ];
    let stderr = run_env(bin, "perf", &["perf", files[0], files[1]], &env);
    let stderr = stderr.replace(tmp().to_str().unwrap(), "<tmp>");
    assert!(stderr.contains("Linux host cost table"), "{stderr}");
    check_cost_reports(&stderr);
}

/// The `sim:r10000` half of [`run_libperfex_program`]: exact counts, golden standard error.
pub fn run_libperfex_program_on_sim(bin: &Path, golden_file: &str) {
    let (good, bad) = cost_files();
    let files = [good.to_str().unwrap(), bad.to_str().unwrap()];
    let stderr = run_env(
        bin,
        "sim:r10000",
        &["sim", files[0], files[1]],
        &NO_COST_FILES,
    );
    let stderr = stderr.replace(tmp().to_str().unwrap(), "<tmp>");
    check_cost_reports(&stderr);
    golden(golden_file, &stderr);
}

/// Run a same-event program (tests/c/perfex_same_event.c, tests/fortran/perfex_same_event.f):
/// `sim` on `sim:r10000`, whose standard error must match the golden
/// `tests/c/perfex_same_event.sim.stderr` (the C and Fortran programs print the same), then
/// `perf` on perf with event 0 counted as page faults.
pub fn run_same_event_program(bin: &Path) {
    let stderr = run_env(bin, "sim:r10000", &["sim"], &NO_COST_FILES);
    golden("tests/c/perfex_same_event.sim.stderr", &stderr);
    let map = page_fault_map(0);
    let env = [
        ("PERFCOMPAT_EVENTS", map.to_str().unwrap()),
        NO_COST_FILES[0],
        NO_COST_FILES[1],
    ];
    let stderr = run_env(bin, "perf", &["perf"], &env);
    assert_eq!(
        stderr
            .matches(
                "Event counts (libperfex on the perf backend):\n 0 page-faults (R10000 Cycles) .."
            )
            .count(),
        2,
        "{stderr}"
    );
}

/// Four cost reports, the last two from the good file, the malformed file refused in between
/// and the good table still in force after it (both reports the same).
fn check_cost_reports(stderr: &str) {
    let reports: Vec<&str> = stderr.split("Cost estimates:").collect();
    assert_eq!(reports.len(), 4, "{stderr}");
    assert!(reports[2].contains("<tmp>/good.costs"), "{stderr}");
    let table = |r: &str| r.split("\nload_costs").next().unwrap().to_string();
    let table = |r: &str| table(r).split("\nprint_costs").next().unwrap().to_string();
    assert_eq!(table(reports[2]), table(reports[3]));
    assert!(
        stderr.contains("load_costs: <tmp>/bad.costs:3: event 25: maximum cost 'three'"),
        "{stderr}"
    );
}

/// Whether gfortran can be run (see [`have_tool`]).
pub fn have_gfortran() -> bool {
    have_tool("gfortran", "gfortran")
}

/// Compile the `perfex` Fortran module (fortran/perfex.f90), writing `perfex.mod` into `dir`.
/// The module holds interfaces only, so programs need the `.mod` and no object: checking the
/// syntax writes it.
pub fn fortran_module(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    compile(
        Command::new("gfortran")
            .args(GFORTRAN_FLAGS)
            .args(["-std=f2008", "-pedantic", "-fsyntax-only"])
            .arg(format!("-J{}", dir.display()))
            .arg(repo().join("fortran/perfex.f90")),
        "fortran/perfex.f90",
    );
    assert!(
        dir.join("perfex.mod").exists(),
        "no perfex.mod in {}",
        dir.display()
    );
}

/// What every Fortran source is compiled with.
pub const GFORTRAN_FLAGS: [&str; 5] = ["-Wall", "-Wextra", "-Werror", "-fcheck=all", "-g"];

/// A directory under /tmp every user can enter (for a program run as `nobody`), made afresh
/// and removed when dropped.
pub struct PublicDir(pub PathBuf);

impl PublicDir {
    /// `/tmp/perfcompat-<tag>-<pid>`, mode 0755.
    pub fn new(tag: &str) -> PublicDir {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = PathBuf::from(format!("/tmp/perfcompat-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        PublicDir(dir)
    }
}

impl Drop for PublicDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Whether this test may run a program as `nobody` (root, with `setpriv`); after a SKIPPED line
/// naming `what` when not (CI runs as root with setpriv: there it must).
pub fn can_run_as_nobody(what: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 && Command::new("setpriv").arg("--version").output().is_ok()
    {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI runs as root with setpriv (util-linux): this test must run there"
    );
    skip(&format!("not root, or no setpriv: {what} is not tried"));
    false
}
