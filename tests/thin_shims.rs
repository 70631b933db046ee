//! Every C export of `capi/` is a thin shim over the engine (issue 15): the body of an
//! exported `extern "C" fn` (one marked `#[no_mangle]`) is at most [`MAX_BODY`] lines, unless
//! a comment just above it, among its attributes and doc comment, says why in one sentence:
//! `// long-export: <why>`.
//!
//! Lines are counted as written (after `cargo fmt`), between the line that opens the body and
//! the line that closes it. The exports still long are listed in `KNOWN` (issue 15): the list
//! only shrinks. And the C crate makes no thread, affinity or signal call (`libc::sched_*`,
//! `libc::pthread_*`, `sigaction`...): deciding those is the engine's.

mod common;

use std::path::{Path, PathBuf};

/// The longest body an export may have without a justification.
const MAX_BODY: usize = 15;

/// The marker of a justified long export.
const MARK: &str = "// long-export: ";

/// Exports still over [`MAX_BODY`] lines, to be thinned (issue 15): none left. Each listed must
/// still be long (remove it here when it is not), and no other export may be.
const KNOWN: &[&str] = &[];

/// An exported function: where it is, its name, its body's length and whether it is justified.
#[derive(Debug)]
struct Export {
    file: PathBuf,
    line: usize,
    name: String,
    body: usize,
    justified: bool,
}

fn indent(l: &str) -> usize {
    l.len() - l.trim_start().len()
}

/// The exports of one file's text.
fn exports(file: &Path, text: &str) -> Vec<Export> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let t = l.trim_start();
        if t.starts_with("//") {
            continue;
        }
        let Some(at) = t.find("extern \"C\" fn ") else {
            continue;
        };
        // A definition (`fn` after only qualifiers), not a function pointer type.
        let before = &t[..at];
        if !before
            .split_whitespace()
            .all(|w| matches!(w, "pub" | "pub(crate)" | "unsafe"))
        {
            continue;
        }
        let name: String = t[at + 14..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '$')
            .collect();
        // The attributes and comments above it.
        let mut exported = false;
        let mut justified = false;
        for a in lines[..i].iter().rev() {
            let a = a.trim_start();
            if a.starts_with("#[") || a.starts_with("///") || a.starts_with("//") {
                exported |= a.contains("no_mangle");
                justified |= a
                    .strip_prefix(MARK)
                    .is_some_and(|why| why.trim().len() > 10);
            } else {
                break;
            }
        }
        if !exported {
            continue;
        }
        // The body: from the first line at the function's indentation that ends with `{`
        // to the first line after it that is the function's indentation and `}`.
        let ind = indent(l);
        let Some(open) = (i..lines.len()).find(|&j| {
            let s = lines[j].trim_end();
            s.ends_with('{') && (j == i || indent(lines[j]) == ind)
        }) else {
            continue;
        };
        let close = (open + 1..lines.len())
            .find(|&j| indent(lines[j]) == ind && lines[j].trim() == "}")
            .unwrap_or_else(|| panic!("{}:{}: no end of {name}", file.display(), i + 1));
        out.push(Export {
            file: file.to_path_buf(),
            line: i + 1,
            name,
            body: close - open - 1,
            justified,
        });
    }
    out
}

/// The C crate's source directory and files.
fn capi_files() -> (PathBuf, Vec<PathBuf>) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("capi/src");
    let files = common::rust_files(&root);
    (root, files)
}

#[test]
fn every_c_export_is_a_thin_shim_or_says_why_not() {
    let (root, files) = capi_files();
    let all: Vec<Export> = files
        .iter()
        .flat_map(|f| exports(f, &std::fs::read_to_string(f).unwrap()))
        .collect();
    assert!(
        all.len() > 50,
        "the parser finds the exports: only {} found",
        all.len()
    );
    let long: Vec<String> = all
        .iter()
        .filter(|e| e.body > MAX_BODY && !e.justified && !KNOWN.contains(&e.name.as_str()))
        .map(|e| {
            format!(
                "{}:{}: {} ({} lines)",
                e.file.strip_prefix(&root).unwrap().display(),
                e.line,
                e.name,
                e.body
            )
        })
        .collect();
    let justified: Vec<&str> = all
        .iter()
        .filter(|e| e.body > MAX_BODY && e.justified)
        .map(|e| e.name.as_str())
        .collect();
    println!("exports: {}, justified long ones: {justified:?}", all.len());
    for k in KNOWN {
        assert!(
            all.iter().any(|e| e.name == *k && e.body > MAX_BODY),
            "{k} is no longer over {MAX_BODY} lines (or gone): remove it from KNOWN"
        );
    }
    assert!(
        long.is_empty(),
        "{} exports have bodies over {MAX_BODY} lines; move their logic into the engine or \
         justify each with `{MARK}<why>` above it:\n{}",
        long.len(),
        long.join("\n")
    );
}

/// The calls that decide about threads, affinity and signals, sending signals included: the
/// engine's, never the C crate's (its `pthread_create` forwards through a pointer, its
/// `va_list` trampoline is C).
const ENGINE_ONLY: &[&str] = &[
    "sched_",
    "pthread_",
    "sigaction",
    "sigprocmask",
    "signal",
    "kill",
    "tgkill",
    "raise",
];

/// System call numbers of the same kind, wherever they appear (`libc::syscall` takes them):
/// every `rt_sig*` call and `rt_tgsigqueueinfo`, `tgkill`, `kill`.
const ENGINE_ONLY_SYSCALLS: &[&str] = &["SYS_rt_", "SYS_tgkill", "SYS_kill"];

/// The `libc::` calls of `ENGINE_ONLY` in `text` (code only, comments aside): (line, call).
fn engine_only_calls(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (i, l) in text.lines().enumerate() {
        let code = l.split("//").next().unwrap_or("");
        for (at, _) in code.match_indices("libc::") {
            let rest = &code[at + 6..];
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            let called = rest[name.len()..].trim_start().starts_with('(');
            let engine_only = ENGINE_ONLY
                .iter()
                .any(|p| name.starts_with(p) && (p.ends_with('_') || name == *p));
            let syscall = ENGINE_ONLY_SYSCALLS.iter().any(|p| name.starts_with(p));
            if (called && engine_only) || syscall {
                out.push((i + 1, name));
            }
        }
    }
    out
}

#[test]
fn the_c_crate_leaves_threads_affinity_and_signals_to_the_engine() {
    let (_, files) = capi_files();
    let found: Vec<String> = files
        .iter()
        .flat_map(|f| {
            let text = std::fs::read_to_string(f).unwrap();
            engine_only_calls(&text)
                .into_iter()
                .map(move |(l, n)| format!("{}:{l}: libc::{n}", f.display()))
        })
        .collect();
    assert!(
        found.is_empty(),
        "thread, affinity and signal calls belong in the engine:\n{}",
        found.join("\n")
    );
    assert_eq!(
        engine_only_calls(
            "unsafe { libc::sched_setaffinity(0, n, &s) };\n\
             let t: *mut libc::pthread_t = p; // libc::sigaction(..)\n\
             libc::pthread_atfork (None, None, None);\n\
             libc::syscall(libc::SYS_rt_tgsigqueueinfo, pid, tid, sig, info);\n\
             libc::syscall(libc::SYS_read, fd, buf, n);"
        ),
        [
            (1, "sched_setaffinity".into()),
            (3, "pthread_atfork".into()),
            (4, "SYS_rt_tgsigqueueinfo".into())
        ],
        "the scanner finds calls, not types or comments"
    );
}

#[test]
fn the_counter_reads_bodies_and_marks() {
    let text = "\
/// Doc.
#[no_mangle]
pub unsafe extern \"C\" fn short(
    a: i32,
) -> i32 {
    a
}

// long-export: the C va_list trampoline must stay in one piece.
#[no_mangle]
pub extern \"C\" fn long() {
    1;
    2;
}

type F = unsafe extern \"C\" fn(i32) -> i32;
extern \"C\" fn not_exported() {
    x;
}
";
    let e = exports(Path::new("x.rs"), text);
    assert_eq!(e.len(), 2, "{e:?}");
    assert_eq!(
        (e[0].name.as_str(), e[0].body, e[0].justified),
        ("short", 1, false)
    );
    assert_eq!(
        (e[1].name.as_str(), e[1].body, e[1].justified),
        ("long", 2, true)
    );
}

/// State the C crate's libcpc module may keep, with why: (file, item).
const CPC_STATE_ALLOWED: &[(&str, &str)] = &[
    // The C strings `cpc_getcciname`, `cpc_getcpuref` and `cpc_getusage` hand out, which C
    // programs keep for the process's life: C memory, not libcpc semantics.
    ("v1.rs", "STRINGS"),
];

/// The `static` items and `thread_local!` blocks of `text` (code only, comments aside):
/// (line, name).
fn state_items(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (i, l) in text.lines().enumerate() {
        let code = l.split("//").next().unwrap_or("").trim_start();
        let rest = ["pub(crate) static ", "pub static ", "static "]
            .iter()
            .find_map(|p| code.strip_prefix(p));
        if let Some(rest) = rest {
            let name: String = rest
                .trim_start_matches("mut ")
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            out.push((i + 1, name));
        } else if code.starts_with("thread_local!") {
            out.push((i + 1, "thread_local!".into()));
        }
    }
    out
}

/// libcpc's semantics are the engine's (issue 45 item 11): the C crate's `cpc` module converts
/// and calls, as the version 2 shims do, and keeps no state of its own (no process-wide
/// table, no per-thread context: version 1's contexts, the contexts bound from outside and
/// the shared descriptors are `perfcompat::api::cpc::v1_bind`'s), except what
/// [`CPC_STATE_ALLOWED`] lists.
#[test]
fn the_libcpc_shims_keep_no_state_of_their_own() {
    let (root, _) = capi_files();
    let dir = root.join("cpc");
    let found: Vec<String> = common::rust_files(&dir)
        .iter()
        .flat_map(|f| {
            let file = f.strip_prefix(&dir).unwrap().display().to_string();
            state_items(&std::fs::read_to_string(f).unwrap())
                .into_iter()
                .filter(|(_, n)| {
                    !CPC_STATE_ALLOWED
                        .iter()
                        .any(|&(af, an)| af == file && an == n)
                })
                .collect::<Vec<_>>()
                .into_iter()
                .map(move |(l, n)| format!("cpc/{file}:{l}: {n}"))
        })
        .collect();
    assert!(
        found.is_empty(),
        "the C crate's libcpc module keeps state: move the semantics into \
         perfcompat::api::cpc (or list the item in CPC_STATE_ALLOWED with why):\n{}",
        found.join("\n")
    );
    assert_eq!(
        state_items(
            "static A: Mutex<()> = x; // static B\n\
             pub(crate) static mut C: u8 = 0;\n\
             thread_local! {\n\
             // static D\n\
             const E: u8 = 1;"
        ),
        [
            (1, "A".into()),
            (2, "C".into()),
            (3, "thread_local!".into())
        ],
        "the scanner finds static items and thread-local blocks, not comments"
    );
}
