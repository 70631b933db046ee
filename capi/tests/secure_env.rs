//! A privileged program linked with the library reveals no file (issue 36): in a process the
//! kernel marks `AT_SECURE` (setuid, setgid, file capabilities) the library ignores every
//! environment variable it reads and says so once, naming none of their values; a bad line of
//! a file it still reads is reported without its content.
//!
//! tests/c/secure_env.c is installed setuid-root in a directory of its own under /tmp with a
//! copy of the library, and run as `nobody` (`setpriv`) with each variable that names a file
//! pointing at a root-only one (the event map, the system cost file, the calibration cache and
//! the `XDG_CACHE_HOME`/`HOME` it is found under, the preload report's output), and with
//! `PERFCOMPAT_BACKEND`, `T5_EVENT0` and `PERFCOMPAT_PRELOAD_EVENTS` set: no file's content
//! shows, the root-only output file is untouched, and the backend is the default one. The same
//! program without the setuid bit, run as root, honours them all (the event map's bad line
//! shows, the backend is the emulated R10000, the report overwrites the output file). Needs
//! root (CI runs as root).

mod common;
use common::Guarded;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{compile, lib_dir, repo, skip};

fn write(path: &Path, text: &str, mode: u32) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn a_setuid_program_ignores_the_librarys_environment_and_shows_no_file() {
    if !common::can_run_as_nobody("the setuid program") {
        return;
    }
    let dir = common::PublicDir::new("secure");
    let d = &dir.0;
    std::fs::copy(
        lib_dir().join("libperfcompat_capi.so"),
        d.join("libperfcompat_capi.so"),
    )
    .unwrap();
    let plain = d.join("secure_env");
    compile(
        Command::new("cc")
            .args(["-std=c99", "-Wall", "-Wextra", "-Werror"])
            .arg(format!("-I{}", repo().join("include").display()))
            .arg("-o")
            .arg(&plain)
            .arg(repo().join("tests/c/secure_env.c"))
            .arg(format!("-L{}", d.display()))
            .arg(format!("-Wl,-rpath,{}", d.display()))
            .arg("-lperfcompat_capi"),
        "tests/c/secure_env.c",
    );
    let suid = d.join("secure_env_suid");
    std::fs::copy(&plain, &suid).unwrap();
    std::fs::set_permissions(&suid, std::fs::Permissions::from_mode(0o4755)).unwrap();

    // Root-only files, each with a line the parsers refuse (and so would echo).
    write(&d.join("events"), "secret-root-only-line\n", 0o600);
    write(&d.join("costs"), "secret-cost-line\n", 0o600);
    write(&d.join("host"), "secret-host-line\n", 0o600);
    write(&d.join("keep"), "keep\n", 0o600);
    let private = d.join("private");
    std::fs::create_dir(&private).unwrap();
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700)).unwrap();
    let s = |p: PathBuf| p.to_str().unwrap().to_string();
    let env = [
        ("PERFCOMPAT_EVENTS", s(d.join("events"))),
        ("PERFCOMPAT_SYSTEM_COSTS", s(d.join("costs"))),
        ("PERFCOMPAT_HOST_COSTS", s(d.join("host"))),
        ("XDG_CACHE_HOME", s(private.clone())),
        ("HOME", s(private.clone())),
        ("PERFCOMPAT_BACKEND", "sim:r10000".to_string()),
        ("T5_EVENT0", "26".to_string()),
        ("PERFCOMPAT_PRELOAD_EVENTS", "0".to_string()),
        ("PERFCOMPAT_PRELOAD_OUTPUT", s(d.join("keep"))),
    ];
    let run = |bin: &Path, as_nobody: bool| {
        let mut cmd = if as_nobody {
            let mut c = Command::new("setpriv");
            c.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
                .arg(bin);
            c
        } else {
            Command::new(bin)
        };
        let out = cmd
            .guarded()
            .env_remove("LD_LIBRARY_PATH")
            .envs(env.iter().map(|(k, v)| (k, v)))
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            out.status.success(),
            "{}: {:?}\n{text}",
            bin.display(),
            out.status
        );
        text
    };

    let secure = run(&suid, true);
    if !secure.contains("euid 0 uid 65534 secure 1") {
        // /tmp mounted nosuid: the bit does nothing there.
        assert!(
            std::env::var_os("CI").is_none(),
            "the setuid program did not run privileged:\n{secure}"
        );
        skip("/tmp does not honour the setuid bit: the setuid program is not tried");
        return;
    }
    for secret in ["secret", "keep"] {
        assert!(!secure.contains(secret), "{secret} shows:\n{secure}");
    }
    assert_eq!(
        secure
            .matches("the library ignores its environment variables")
            .count(),
        1,
        "{secure}"
    );
    // libcpc says which processor it counts on: the sim:r10000 that PERFCOMPAT_BACKEND asks
    // for would be an R10000 (the report's "(R10000 Cycles)" names what perf's count stands
    // for, not the backend).
    let cciname = secure.lines().find(|l| l.starts_with("cciname "));
    assert!(
        cciname.is_some_and(|l| !l.contains("R10000")) && !secure.contains("sim:r10000"),
        "PERFCOMPAT_BACKEND was honoured:\n{secure}"
    );
    let kept = || std::fs::read_to_string(d.join("keep")).unwrap() == "keep\n";
    assert!(kept(), "the root-only output file was written");

    // Not setuid: every variable is honoured.
    let plain_out = run(&plain, false);
    assert!(plain_out.contains("secret-root-only-line"), "{plain_out}");
    assert!(plain_out.contains("secure 0"), "{plain_out}");
    assert!(plain_out.contains("R10000"), "{plain_out}");
    assert!(
        !plain_out.contains("ignores its environment variables"),
        "{plain_out}"
    );
    assert!(!kept(), "the preload report was not written");
}
