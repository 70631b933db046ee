//! What an `exec` of the counting process does with the counts: carry them into the new image
//! (its constructor adds them to its own, and it prints the one report), or have the old image
//! report before the exec, when the new one would not take them over: its environment has no
//! `LD_PRELOAD` or other events, or it runs privileged (`AT_SECURE`: the dynamic loader drops
//! `LD_PRELOAD` and the library ignores its variables, so carried counts would be lost).
//!
//! The file checked is the one the C library runs (issue 44 item 7): for `execvp`, `execvpe`
//! and `execlp` the one their search through `PATH` finds, as glibc searches (the calling
//! process's `PATH`, `/bin:/usr/bin` when unset; an empty entry is the current directory; a
//! name with a `/` is taken as it is; the first candidate it may execute wins). Before, the
//! unresolved name was checked (`passwd` relative to the current directory), so a set-user-ID
//! program found through `PATH` ran with the counts carried to an image that ignored them: no
//! report at all.

use std::ffi::{CString, OsStr};
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

/// The C library's default search path (`confstr(_CS_PATH)`), used when `PATH` is unset.
pub const DEFAULT_PATH: &[u8] = b"/bin:/usr/bin";

/// How the exec function names its program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup {
    /// `execve`, `execv`, `execl`, `execle`: a path.
    Path,
    /// `execvp`, `execvpe`, `execlp`: a name searched through `PATH` unless it has a `/`.
    Search,
}

/// The file an exec of `file` runs: `file` itself for [`Lookup::Path`] or a name with a `/`;
/// else the first candidate along `path_var` (the calling process's `PATH`, `None` when unset:
/// [`DEFAULT_PATH`]) that is a regular file the process may execute, as the C library's search
/// ends at the first `execve` that succeeds. `None` when the search finds nothing (the exec
/// fails).
pub fn target(file: &[u8], lookup: Lookup, path_var: Option<&[u8]>) -> Option<PathBuf> {
    if file.is_empty() {
        return None;
    }
    if lookup == Lookup::Path || file.contains(&b'/') {
        return Some(PathBuf::from(OsStr::from_bytes(file)));
    }
    for dir in path_var.unwrap_or(DEFAULT_PATH).split(|&b| b == b':') {
        let mut candidate = dir.to_vec();
        if !dir.is_empty() {
            candidate.push(b'/');
        }
        candidate.extend_from_slice(file);
        let candidate = PathBuf::from(OsStr::from_bytes(&candidate));
        if executable(&candidate) {
            return Some(candidate);
        }
    }
    None
}

/// Whether `path` is a regular file that the process's effective ids may execute.
fn executable(path: &Path) -> bool {
    let Ok(meta) = std::fs::metadata(path) else {
        return false;
    };
    let Ok(c) = CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: a NUL-terminated path.
    meta.is_file()
        && unsafe { libc::faccessat(libc::AT_FDCWD, c.as_ptr(), libc::X_OK, libc::AT_EACCESS) } == 0
}

/// Whether the image of `file` would run privileged for this process (`AT_SECURE`): its
/// set-user-ID bit gives another user than the real one, its set-group-ID bit another group,
/// or it has file capabilities and the real user is not root; unless its file system is
/// mounted `nosuid` or the process has `no_new_privs`, which make the kernel ignore both.
pub fn privileged(file: &Path) -> bool {
    let Ok(meta) = std::fs::metadata(file) else {
        return false;
    };
    // SAFETY: prctl(PR_GET_NO_NEW_PRIVS) reads a flag of the calling thread.
    if unsafe { libc::prctl(libc::PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) } == 1 {
        return false;
    }
    let Ok(c) = CString::new(file.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: plain data, filled by the kernel.
    let mut vfs: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a valid buffer.
    if unsafe { libc::statvfs(c.as_ptr(), &mut vfs) } == 0 && vfs.f_flag & libc::ST_NOSUID != 0 {
        return false;
    }
    // SAFETY: getuid and getgid have no preconditions.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    let mode = meta.mode();
    let setuid = mode & libc::S_ISUID != 0 && meta.uid() != uid;
    // The set-group-ID bit without group execute marks mandatory locking, not a new group.
    let setgid = mode & libc::S_ISGID != 0 && mode & libc::S_IXGRP != 0 && meta.gid() != gid;
    // SAFETY: a NUL-terminated path and name; a NULL buffer of size 0 asks for the size.
    let caps = unsafe {
        libc::getxattr(
            c.as_ptr(),
            c"security.capability".as_ptr(),
            std::ptr::null_mut(),
            0,
        )
    } > 0;
    setuid || setgid || (caps && uid != 0)
}

/// What an exec of the counting process does with the counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Carry them into the new image.
    Carry,
    /// Report now, before the exec, for this reason (kept for the tests and the docs).
    ReportFirst(&'static str),
}

/// Decide for an exec of `file` (named as `lookup` says, the calling process's `PATH` being
/// `path_var`) with the environment `envp` (its entries), in a process counting `events`.
pub fn decide<'a>(
    file: &[u8],
    lookup: Lookup,
    path_var: Option<&[u8]>,
    envp: impl Iterator<Item = &'a [u8]> + Clone,
    events: &str,
) -> Decision {
    let same_events = super::env_entry(envp.clone(), super::EVENTS_VAR.as_bytes())
        .is_some_and(|v| v.trim_ascii() == events.trim().as_bytes());
    if !same_events {
        return Decision::ReportFirst("the new image counts other events or none");
    }
    if super::env_entry(envp, b"LD_PRELOAD").is_none_or(|v| v.is_empty()) {
        return Decision::ReportFirst("the new image is not preloaded");
    }
    if target(file, lookup, path_var).is_some_and(|t| privileged(&t)) {
        return Decision::ReportFirst("the new image runs privileged and ignores the variables");
    }
    Decision::Carry
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("perfcompat-exec-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn file(path: &Path, mode: u32) {
        std::fs::write(path, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn the_search_is_the_c_librarys() {
        let (a, b) = (dir("a"), dir("b"));
        file(&a.join("prog"), 0o644); // not executable: skipped, as execve's EACCES is
        file(&b.join("prog"), 0o755);
        std::fs::create_dir(a.join("sub")).unwrap();
        let path = format!("/nonexistent:{}:{}", a.display(), b.display());
        let path = path.as_bytes();
        assert_eq!(
            target(b"prog", Lookup::Search, Some(path)),
            Some(b.join("prog"))
        );
        // A path, or a name with a '/', is taken as it is.
        assert_eq!(
            target(b"prog", Lookup::Path, Some(path)),
            Some("prog".into())
        );
        assert_eq!(
            target(b"x/prog", Lookup::Search, Some(path)),
            Some("x/prog".into())
        );
        // Not found, or a directory.
        assert_eq!(target(b"nothing", Lookup::Search, Some(path)), None);
        assert_eq!(
            target(b"sub", Lookup::Search, Some(a.as_os_str().as_bytes())),
            None
        );
        assert_eq!(target(b"", Lookup::Search, Some(path)), None);
        // PATH unset: the C library's default.
        assert_eq!(target(b"sh", Lookup::Search, None), Some("/bin/sh".into()));
        // An empty entry is the current directory.
        let cwd = std::env::current_dir().unwrap();
        let here = cwd.read_dir().unwrap().flatten().find(|e| {
            e.metadata()
                .is_ok_and(|m| m.is_file() && m.mode() & 0o111 != 0)
        });
        if let Some(e) = here {
            let name = e.file_name();
            let found = target(name.as_bytes(), Lookup::Search, Some(b"/nonexistent:"));
            assert_eq!(found, Some(PathBuf::from(&name)));
        }
        let _ = std::fs::remove_dir_all(a);
        let _ = std::fs::remove_dir_all(b);
    }

    #[test]
    fn what_the_new_image_takes() {
        let env: [&[u8]; 2] = [b"PERFCOMPAT_PRELOAD_EVENTS= 0,25", b"LD_PRELOAD=/lib/x.so"];
        let e = || env.iter().copied();
        assert_eq!(
            decide(b"/bin/sh", Lookup::Path, None, e(), "0,25"),
            Decision::Carry
        );
        assert!(matches!(
            decide(b"/bin/sh", Lookup::Path, None, e(), "25"),
            Decision::ReportFirst(_)
        ));
        let env: [&[u8]; 1] = [b"PERFCOMPAT_PRELOAD_EVENTS=25"];
        assert!(matches!(
            decide(b"/bin/sh", Lookup::Path, None, env.iter().copied(), "25"),
            Decision::ReportFirst(_)
        ));
    }
}
