//! The documents a user reads cannot rot. Every relative link of `README.md`,
//! `CONTRIBUTING.md`, `CHANGELOG.md` and `docs/*.md` must name a file that exists and, with a
//! `#fragment`, a heading of that file (GitHub's anchors). Every example the README and the
//! manual (`docs/`) mark as code is built or run against an installed perfcompat, as
//! CONTRIBUTING.md ("Examples in the manual") lays down; the README's are complete programs
//! (issue 46 item 3: its Fortran example did not compile, its C idiom hid a failure):
//!
//! - ```` ```c file=NAME.c ```` and ```` ```fortran file=NAME.f ```` blocks are written to a
//!   scratch directory under that name, and a later `sh` block of the page must use the name:
//!   the commands that build them are the ones shown to the reader;
//! - ```` ```sh ```` blocks are run in turn by `bash -e -o pipefail` in that directory, with
//!   `PREFIX` the installed prefix and its `bin/` first on `PATH`, each seeing what the ones
//!   before it exported, as in a reader's shell; each must exit 0;
//! - a ```` ```text output ```` block right after a `sh` block is that block's standard output,
//!   exactly;
//! - ```` ```sh norun: REASON ```` blocks are shown, not run, and must say why; `console` and
//!   `text` blocks are transcripts and are not run.
//!
//! The checks are tried on broken documents too: a link to nothing, an anchor that is not
//! there, a C example that does not compile, an output that differs.

mod common;
use common::*;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

/// One fenced code block: its info string's first word, the rest, its text, its first line.
#[derive(Debug)]
struct Block {
    lang: String,
    info: String,
    text: String,
    line: usize,
}

/// The fenced code blocks of a Markdown text (```` ``` ```` fences at the start of a line).
fn blocks(md: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut open: Option<Block> = None;
    for (i, line) in md.lines().enumerate() {
        match (&mut open, line.strip_prefix("```")) {
            (None, Some(info)) => {
                let info = info.trim();
                let (lang, rest) = info.split_once(' ').unwrap_or((info, ""));
                open = Some(Block {
                    lang: lang.to_string(),
                    info: rest.trim().to_string(),
                    text: String::new(),
                    line: i + 1,
                });
            }
            (Some(_), Some(rest)) if rest.trim().is_empty() => out.push(open.take().unwrap()),
            (Some(b), _) => {
                b.text.push_str(line);
                b.text.push('\n');
            }
            (None, None) => {}
        }
    }
    out
}

/// The text outside fenced code blocks and code spans: where links and headings are.
fn prose(md: &str) -> String {
    let mut out = String::new();
    let mut fenced = false;
    for line in md.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
            out.push('\n');
            continue;
        }
        if !fenced {
            // Code spans: drop what is between pairs of backticks.
            let mut in_code = false;
            for c in line.chars() {
                if c == '`' {
                    in_code = !in_code;
                } else if !in_code {
                    out.push(c);
                }
            }
        }
        out.push('\n');
    }
    out
}

/// GitHub's anchor for a heading: lower case, punctuation other than `-` and `_` dropped,
/// spaces made hyphens.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a Markdown file's headings, a repeated heading's with `-1`, `-2`, ...
fn anchors(md: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut fenced = false;
    for line in md.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
            continue;
        }
        let hashes = line.chars().take_while(|&c| c == '#').count();
        if fenced || !(1..=6).contains(&hashes) || !line[hashes..].starts_with(' ') {
            continue;
        }
        let base = slug(&line[hashes..]);
        let mut s = base.clone();
        let mut n = 0;
        while out.contains(&s) {
            n += 1;
            s = format!("{base}-{n}");
        }
        out.insert(s);
    }
    out
}

/// The link targets of a Markdown text: `[text](target)`, `![alt](target)` and reference
/// definitions `[name]: target`, outside code.
fn links(md: &str) -> Vec<String> {
    let text = prose(md);
    let mut out = Vec::new();
    let mut rest = text.as_str();
    while let Some(i) = rest.find("](") {
        let after = &rest[i + 2..];
        let end = after.find(')').unwrap_or(after.len());
        let target = after[..end].split_whitespace().next().unwrap_or("");
        out.push(target.trim_matches(['<', '>']).to_string());
        rest = &after[end..];
    }
    for line in text.lines() {
        let line = line.trim_start();
        if let Some(close) = line.find("]: ") {
            if line.starts_with('[') && !line[..close].contains(' ') {
                out.push(line[close + 3..].trim().to_string());
            }
        }
    }
    out
}

/// `path` from the repository's root where it is under it.
fn shown(path: &Path) -> String {
    let root = repo().canonicalize().unwrap();
    // A missing file: its directory's real path, then its name.
    let p = path.canonicalize().unwrap_or_else(|_| {
        let dir = path.parent().and_then(|d| d.canonicalize().ok());
        match (dir, path.file_name()) {
            (Some(d), Some(name)) => d.join(name),
            _ => path.to_path_buf(),
        }
    });
    p.strip_prefix(&root).unwrap_or(&p).display().to_string()
}

/// What is wrong with the links of `file`: each relative target must exist, and its
/// `#fragment` name a heading of the Markdown file it points to.
fn link_errors(file: &Path) -> Vec<String> {
    let md = std::fs::read_to_string(file).unwrap();
    let dir = file.parent().unwrap();
    let mut errors = Vec::new();
    for target in links(&md) {
        if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
            continue;
        }
        let (path, fragment) = target.split_once('#').unwrap_or((&target, ""));
        let to = if path.is_empty() {
            file.to_path_buf()
        } else {
            dir.join(path)
        };
        if !to.exists() {
            errors.push(format!(
                "{}: link to {target}: {} does not exist",
                shown(file),
                shown(&to)
            ));
            continue;
        }
        if fragment.is_empty() || to.extension().is_none_or(|e| e != "md") {
            continue;
        }
        let there = anchors(&std::fs::read_to_string(&to).unwrap());
        if !there.contains(fragment) {
            errors.push(format!(
                "{}: link to {target}: no heading of {} has the anchor #{fragment}",
                shown(file),
                shown(&to)
            ));
        }
    }
    errors
}

/// The documents whose links are checked.
fn documents() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = ["README.md", "CONTRIBUTING.md", "CHANGELOG.md"]
        .iter()
        .map(|f| repo().join(f))
        .collect();
    files.extend(manual());
    files
}

/// The manual's pages, `docs/*.md`, sorted.
fn manual() -> Vec<PathBuf> {
    let mut pages: Vec<PathBuf> = std::fs::read_dir(repo().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    pages.sort();
    pages
}

/// One thing a page asks the check to do, in the page's order.
#[derive(Debug)]
enum Step {
    /// Write a source file.
    Write { name: String, text: String },
    /// Run a script; `output`: its standard output, exactly.
    Run {
        script: String,
        line: usize,
        output: Option<String>,
    },
}

/// The steps of a page's examples, or what breaks the conventions (a source without a
/// `file=` name or that no command uses, an unexplained `norun`, an output after no command).
fn plan(page: &str, md: &str) -> Result<Vec<Step>, Vec<String>> {
    let mut steps = Vec::new();
    let mut errors = Vec::new();
    let mut sources: Vec<(String, usize)> = Vec::new();
    let mut last_was_run = false;
    for b in blocks(md) {
        let here = format!("{page}:{}", b.line);
        match b.lang.as_str() {
            "c" | "fortran" => {
                last_was_run = false;
                match b.info.strip_prefix("file=") {
                    Some(name) if !name.is_empty() && !name.contains('/') => {
                        sources.push((name.to_string(), b.line));
                        steps.push(Step::Write {
                            name: name.to_string(),
                            text: b.text,
                        });
                    }
                    _ => errors.push(format!(
                        "{here}: a ```{} block needs file=NAME (see CONTRIBUTING.md)",
                        b.lang
                    )),
                }
            }
            "sh" | "bash" => {
                if let Some(reason) = b.info.strip_prefix("norun") {
                    if reason.trim_start_matches(':').trim().is_empty() {
                        errors.push(format!("{here}: `norun` must say why the block is not run"));
                    }
                    last_was_run = false;
                    continue;
                }
                if !b.info.is_empty() {
                    errors.push(format!("{here}: unknown marker `{}` on a sh block", b.info));
                }
                sources.retain(|(n, _)| !b.text.contains(n.as_str()));
                steps.push(Step::Run {
                    script: b.text,
                    line: b.line,
                    output: None,
                });
                last_was_run = true;
            }
            "text" if b.info == "output" => {
                match steps.last_mut() {
                    Some(Step::Run { output, .. }) if last_was_run && output.is_none() => {
                        *output = Some(b.text)
                    }
                    _ => errors.push(format!(
                        "{here}: an output block must come right after a sh block"
                    )),
                }
                last_was_run = false;
            }
            "text" | "console" | "" => last_was_run = false,
            other => {
                errors.push(format!(
                    "{here}: a ```{other} block: the manual's code blocks are c, fortran, sh, text \
                     or console (see CONTRIBUTING.md)"
                ));
                last_was_run = false;
            }
        }
    }
    for (name, line) in sources {
        errors.push(format!(
            "{page}:{line}: {name} is built by no sh block after it"
        ));
    }
    if errors.is_empty() {
        Ok(steps)
    } else {
        Err(errors)
    }
}

/// Run a page's steps in `dir` (emptied first) against the installed `prefix`; what failed.
fn run_steps(page: &str, steps: &[Step], dir: &Path, prefix: &Path) -> Vec<String> {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).unwrap();
    let path = format!(
        "{}:{}",
        prefix.join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    for step in steps {
        match step {
            Step::Write { name, text } => std::fs::write(dir.join(name), text).unwrap(),
            Step::Run {
                script,
                line,
                output,
            } => {
                // One reader's shell: what a block exports, the next ones see.
                let session = format!(
                    "if [ -f .docs-env ]; then . ./.docs-env; fi\n{script}\nexport -p >.docs-env\n"
                );
                let mut cmd = Command::new("timeout");
                cmd.args([
                    "120",
                    "bash",
                    "--noprofile",
                    "--norc",
                    "-e",
                    "-o",
                    "pipefail",
                ])
                .arg("-c")
                .arg(session)
                .current_dir(dir)
                .env("PREFIX", prefix)
                .env("PATH", &path)
                // cargo test's library path would win over the programs' rpath.
                .env_remove("LD_LIBRARY_PATH")
                // An example's mpirun: Open MPI refuses root (CI) unless told, and several
                // starting at once race for the default session directory.
                .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
                .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
                .env("OMPI_MCA_orte_tmpdir_base", dir);
                for (k, _) in std::env::vars_os() {
                    if k.to_string_lossy().starts_with("PERFCOMPAT_") {
                        cmd.env_remove(k);
                    }
                }
                let out = output_one_fault_per_page(&mut cmd);
                let stdout = String::from_utf8_lossy(&out.stdout);
                if !out.status.success() {
                    return vec![format!(
                        "{page}:{line}: the commands failed ({}):\n{script}\nstdout:\n{stdout}\nstderr:\n{}",
                        out.status,
                        String::from_utf8_lossy(&out.stderr)
                    )];
                }
                if let Some(want) = output {
                    let trim = |s: &str| -> String {
                        s.lines().map(|l| l.trim_end().to_string() + "\n").collect()
                    };
                    if trim(&stdout) != trim(want) {
                        return vec![format!(
                            "{page}:{line}: the output differs from the page's\npage:\n{want}got:\n{stdout}"
                        )];
                    }
                }
            }
        }
    }
    Vec::new()
}

/// Plan and run one page's examples in `<tmp>/docs/<tag>`.
fn check_page(page: &str, md: &str, tag: &str, prefix: &Path) -> Vec<String> {
    match plan(page, md) {
        Err(e) => e,
        Ok(steps) => run_steps(page, &steps, &tmp().join("docs").join(tag), prefix),
    }
}

#[test]
fn every_link_resolves() {
    let errors: Vec<String> = documents().iter().flat_map(|f| link_errors(f)).collect();
    assert!(errors.is_empty(), "{}", errors.join("\n"));
}

/// The pages whose examples are run: the README, then the manual's, each with its name from the
/// repository's root.
fn example_pages() -> Vec<(String, String)> {
    let mut pages = vec![(
        "README.md".to_string(),
        std::fs::read_to_string(repo().join("README.md")).unwrap(),
    )];
    pages.extend(manual().iter().map(|p| {
        (
            format!("docs/{}", p.file_name().unwrap().to_string_lossy()),
            std::fs::read_to_string(p).unwrap(),
        )
    }));
    pages
}

#[test]
fn every_example_of_the_readme_and_the_manual_builds_and_runs() {
    // The conventions first: they need no compiler.
    let pages = example_pages();
    let errors: Vec<String> = pages
        .iter()
        .filter_map(|(page, md)| plan(page, md).err())
        .flatten()
        .collect();
    assert!(errors.is_empty(), "{}", errors.join("\n"));
    if !have_tool("cc", "gcc") {
        return;
    }
    // The tools a page's commands use beyond a C compiler and the installed commands, and the
    // Debian package of each: a page whose tool is missing is skipped, and says so.
    let tools = [
        ("gfortran", "gfortran"),
        ("pkg-config", "pkg-config"),
        ("mpicc", "libopenmpi-dev"),
    ];
    let present: Vec<bool> = tools.iter().map(|(t, p)| have_tool(t, p)).collect();
    let prefix = installed_prefix();
    let mut errors = Vec::new();
    let mut ran = 0;
    for (page, md) in &pages {
        let scripts: String = blocks(md)
            .iter()
            .filter(|b| b.lang == "sh" && !b.info.starts_with("norun"))
            .map(|b| b.text.as_str())
            .collect();
        let missing: Vec<&str> = tools
            .iter()
            .zip(&present)
            .filter(|((tool, _), here)| !**here && scripts.contains(tool))
            .map(|((tool, _), _)| *tool)
            .collect();
        if !missing.is_empty() {
            skip(&format!(
                "{page}: its examples need {}",
                missing.join(" and ")
            ));
            continue;
        }
        let tag = page.trim_start_matches("docs/").trim_end_matches(".md");
        let tag = if tag == "README" { "README-top" } else { tag };
        ran += plan(page, md).unwrap().len();
        errors.extend(check_page(page, md, tag, prefix));
    }
    assert!(errors.is_empty(), "{}", errors.join("\n\n"));
    assert!(ran > 0, "the manual has no example the check runs");
}

/// A page of the manual in a scratch directory, with the repository's docs beside it (for
/// links out of it).
fn scratch_page(name: &str, md: &str) -> PathBuf {
    let dir = tmp().join("docs-broken").join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("other.md"),
        "# Other page\n\n## A section\n\ntext\n",
    )
    .unwrap();
    let page = dir.join("page.md");
    std::fs::write(&page, md).unwrap();
    page
}

#[test]
fn a_broken_link_is_found() {
    let good = scratch_page(
        "good",
        "# Page\n\n## Its `own` section\n\n[x](other.md) [y](other.md#a-section) \
         [z](#its-own-section) [w](https://example.com/nowhere)\n",
    );
    assert_eq!(link_errors(&good), Vec::<String>::new());
    let page = scratch_page(
        "broken",
        "# Page\n\n[gone](missing.md) [anchor](other.md#no-such-section) [self](#nowhere)\n\
         `[in code](not-checked.md)`\n\n[ref]: also-missing.md\n",
    );
    let errors = link_errors(&page);
    assert_eq!(errors.len(), 4, "{errors:#?}");
    assert!(errors[0].contains("missing.md") && errors[0].contains("does not exist"));
    assert!(errors[1].contains("#no-such-section"));
    assert!(errors[2].contains("#nowhere"));
    assert!(errors[3].contains("also-missing.md"));
}

#[test]
fn github_anchors() {
    let a = anchors(
        "# Tru64 pfm (`/dev/pfcntr`)\n## The kernel's real PMU driver: arm64 under QEMU\n\
         ## Counting a program with `LD_PRELOAD`\n## Notes\n## Notes\n```\n# not a heading\n```\n",
    );
    let want = [
        "tru64-pfm-devpfcntr",
        "the-kernels-real-pmu-driver-arm64-under-qemu",
        "counting-a-program-with-ld_preload",
        "notes",
        "notes-1",
    ];
    assert_eq!(a, want.iter().map(|s| s.to_string()).collect());
}

#[test]
fn a_broken_example_is_found() {
    // The conventions, without running anything.
    let e = plan("p", "```c\nint main(void) { return 0; }\n```\n").unwrap_err();
    assert!(e[0].contains("file=NAME"), "{e:?}");
    let e = plan("p", "```c file=a.c\nint main(void) { return 0; }\n```\n").unwrap_err();
    assert!(e[0].contains("a.c is built by no sh block"), "{e:?}");
    let e = plan("p", "```sh norun\nrm -rf /\n```\n").unwrap_err();
    assert!(e[0].contains("must say why"), "{e:?}");
    let e = plan("p", "text\n\n```text output\n1\n```\n").unwrap_err();
    assert!(e[0].contains("right after a sh block"), "{e:?}");
    // A language the check does not know would escape it.
    let e = plan("p", "```shell\nfalse\n```\n").unwrap_err();
    assert!(e[0].contains("```shell block"), "{e:?}");
    if !have_tool("cc", "gcc") {
        return;
    }
    let prefix = installed_prefix();
    let program = |body: &str| {
        format!(
            "```c file=prog.c\n#include <stdio.h>\n#include <libcpc.h>\n\
             int main(void) {{\n    cpc_t *cpc = cpc_open(CPC_VER_CURRENT);\n{body}\n}}\n```\n\n\
             ```sh\ncc -std=c99 -Wall -Werror prog.c -I\"$PREFIX/include\" -L\"$PREFIX/lib\" \
             -Wl,-rpath,\"$PREFIX/lib\" -lcpc -o prog\nPERFCOMPAT_BACKEND=sim:ultrasparc ./prog\n```\n\n\
             ```text output\n8 counters\n```\n"
        )
    };
    let good = program("    printf(\"%u counters\\n\", cpc_npic(cpc) * 4);\n    return 0;");
    assert_eq!(
        check_page("good.md", &good, "broken-good", prefix),
        Vec::<String>::new()
    );
    // It does not compile.
    let e = check_page(
        "bad.md",
        &program("    printf(\"%u counters\\n\", cpc_npic(cpc, 2));\n    return 0;"),
        "broken-compile",
        prefix,
    );
    assert!(
        e.len() == 1 && e[0].contains("the commands failed"),
        "{e:?}"
    );
    // It prints something else than the page says.
    let e = check_page(
        "bad.md",
        &program("    printf(\"%u counters\\n\", cpc_npic(cpc));\n    return 0;"),
        "broken-output",
        prefix,
    );
    assert!(
        e.len() == 1 && e[0].contains("output differs") && e[0].contains("got:\n2 counters"),
        "{e:?}"
    );
    // It fails when run.
    let e = check_page(
        "bad.md",
        &program("    printf(\"%u counters\\n\", cpc_npic(cpc) * 4);\n    return 1;"),
        "broken-status",
        prefix,
    );
    assert!(e.len() == 1 && e[0].contains("exit status: 1"), "{e:?}");
}

/// The man pages rendered as Markdown (`docs/man/*.md`, linked from the manual's index) are
/// what `tools/man2md.py` makes of `man/` now: a man page edited without regenerating them
/// fails here, and `PERFCOMPAT_BLESS=1` regenerates them (issue 46 item 12: the index linked
/// raw troff).
#[test]
fn man_pages_rendered_in_the_manual_are_current() {
    if !have_tool("python3", "python3") {
        return;
    }
    let bless = std::env::var_os("PERFCOMPAT_BLESS").is_some();
    let committed = repo().join("docs/man");
    let out = if bless {
        committed.clone()
    } else {
        let d = tmp().join("docs-man");
        let _ = std::fs::remove_dir_all(&d);
        d
    };
    let run = Command::new("python3")
        .arg(repo().join("tools/man2md.py"))
        .arg(&out)
        .output()
        .expect("python3 runs");
    assert!(
        run.status.success(),
        "tools/man2md.py failed:\n{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let names = |d: &Path| -> BTreeSet<String> {
        std::fs::read_dir(d)
            .map(|r| {
                r.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default()
    };
    let want = names(&out);
    let pages = names(&repo().join("man"));
    assert_eq!(
        want.len(),
        pages.len(),
        "one page per man page of man/ {pages:?}: {want:?}"
    );
    assert_eq!(
        names(&committed),
        want,
        "docs/man/ differs from man/: run PERFCOMPAT_BLESS=1 cargo test -p perfcompat-capi --test docs man_pages"
    );
    for name in &want {
        let new = std::fs::read_to_string(out.join(name)).unwrap();
        let old = std::fs::read_to_string(committed.join(name)).unwrap();
        assert!(
            new == old,
            "docs/man/{name} is stale: run PERFCOMPAT_BLESS=1 cargo test -p perfcompat-capi --test docs man_pages"
        );
    }
}

/// The maintainers' pages: the design, the test methods, the history of decisions with the
/// issue numbers, source paths and test names. Every other page of `docs/` is a user's page.
const MAINTAINER_PAGES: [&str; 8] = [
    "architecture.md",
    "benchmarks.md",
    "kernel-model.md",
    "layout.md",
    "reliability.md",
    "scaling.md",
    "signal-safety.md",
    "tested.md",
];

/// What a user's page must not say: the tracker's issue numbers, the source tree's paths and
/// the tests' names, each a (what, matcher) pair over a line of prose.
fn maintainer_words(line: &str) -> Vec<&'static str> {
    let mut found = Vec::new();
    let lower = line.to_lowercase();
    let bytes = lower.as_bytes();
    for (i, _) in lower.match_indices("issue") {
        let rest = &lower[i + 5..];
        let rest = rest.strip_prefix('s').unwrap_or(rest);
        if rest.starts_with(' ') && rest[1..].starts_with(|c: char| c.is_ascii_digit()) {
            found.push("an issue number");
        }
    }
    for dir in [
        "src/",
        "capi/",
        "tests/",
        "benches/",
        "fuzz/",
        ".ci/",
        "mpi/perfcompat",
    ] {
        for (i, _) in lower.match_indices(dir) {
            // A path of the source tree, not the end of a longer word (`/sys/.../src/`).
            if i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'/') {
                found.push("a source path");
            }
        }
    }
    if lower.contains(".rs`") || lower.contains(".rs ") || lower.contains(".rs)") {
        found.push("a Rust file");
    }
    found
}

#[test]
fn user_pages_speak_to_users() {
    let mut errors = Vec::new();
    for page in manual() {
        let name = page.file_name().unwrap().to_string_lossy().into_owned();
        if MAINTAINER_PAGES.contains(&name.as_str()) {
            continue;
        }
        let md = std::fs::read_to_string(&page).unwrap();
        let mut fenced = false;
        for (n, line) in md.lines().enumerate() {
            if line.starts_with("```") {
                fenced = !fenced;
                continue;
            }
            if fenced {
                continue;
            }
            for what in maintainer_words(line) {
                errors.push(format!(
                    "docs/{name}:{}: {what} on a user's page (move it to a maintainers' page, \
                     docs/tested.md): {line}",
                    n + 1
                ));
            }
        }
    }
    assert!(errors.is_empty(), "{}", errors.join("\n"));
}

#[test]
fn maintainer_words_are_found() {
    assert_eq!(
        maintainer_words("fixed in issue 45 item 7"),
        ["an issue number"]
    );
    assert_eq!(maintainer_words("(issues 29, 36)"), ["an issue number"]);
    assert_eq!(maintainer_words("see `src/api/pfm/`"), ["a source path"]);
    assert_eq!(
        maintainer_words("tested by `capi/tests/pfm.rs`"),
        ["a source path", "a Rust file"]
    );
    assert!(maintainer_words("an issue of timing; /sys/bus/event_source/devices/").is_empty());
    assert!(maintainer_words("the tests pass; man/perfex.1").is_empty());
}
