//! What the Solaris counter commands (`cpustat`, `cputrack`) share: option scanning in the
//! getopt style, interval values, the `-c` sets and the `-h` listing of the backend's events.

use std::ffi::OsString;

use perfcompat::backend::Backend;
use perfcompat::commands::eventspec;
use perfcompat::CounterSet;

/// A message on standard error, formatted first and written with one `write(2)` (issue 46
/// item 6). Nothing is left to tell if that fails too (a closed pipe, a full disk), so a failure
/// is ignored: never a panic.
pub fn say(msg: std::fmt::Arguments) {
    perfcompat::base::notice::write_stderr(&format!("{msg}\n"));
}

/// A usage error's message: `m`, then the hint to `cmd -h`, unless `m` already gives it (one
/// hint per message; issue 46 item 11).
pub fn usage_message(cmd: &str, m: &str) -> String {
    if m.contains(&format!("{cmd} -h ")) {
        format!("{cmd}: {m}")
    } else {
        format!("{cmd}: {m} ({cmd} -h lists the options)")
    }
}

/// The exit status for `-c` specifications that cannot be used: a malformed one, or events
/// that conflict on the counters (both [`perfcompat::Error::InvalidArgument`] from the
/// specification's parser, or a conflict) are usage errors, as a conflict of options is
/// (issue 46 item 11); an event this host cannot count is a counting failure (1).
pub fn spec_status(e: &perfcompat::Error) -> u8 {
    match e {
        perfcompat::Error::InvalidArgument(_) => perfcompat::commands::USAGE_STATUS,
        other => perfcompat::commands::failure_status(other),
    }
}

/// The arguments as UTF-8 strings.
pub fn utf8(argv: Vec<OsString>) -> Result<Vec<String>, String> {
    argv.into_iter()
        .map(|s| {
            s.into_string()
                .map_err(|_| "arguments must be UTF-8".to_string())
        })
        .collect()
}

/// The options found (letter, value or empty) and the operands.
pub type Scanned = (Vec<(char, String)>, Vec<String>);

/// Options scanned getopt-style: `-abc`, `-c value`, `-cvalue`. `with_value` lists the
/// letters that take a value. Operands are collected; with `stop_at_operand` the first
/// operand ends the options (it and everything after it are operands: a command line).
pub fn getopt(
    argv: Vec<String>,
    with_value: &str,
    stop_at_operand: bool,
) -> Result<Scanned, String> {
    let mut opts = Vec::new();
    let mut rest = Vec::new();
    let mut it = argv.into_iter();
    while let Some(arg) = it.next() {
        if arg == "--" && stop_at_operand {
            rest.extend(it.by_ref());
            break;
        }
        if !arg.starts_with('-') || arg == "-" {
            rest.push(arg);
            if stop_at_operand {
                rest.extend(it.by_ref());
                break;
            }
            continue;
        }
        let mut chars = arg[1..].chars();
        while let Some(c) = chars.next() {
            if with_value.contains(c) {
                let tail: String = chars.by_ref().collect();
                let v = if tail.is_empty() {
                    it.next().ok_or_else(|| format!("-{c} needs a value"))?
                } else {
                    tail
                };
                opts.push((c, v));
            } else {
                opts.push((c, String::new()));
            }
        }
    }
    Ok((opts, rest))
}

/// A number of seconds greater than zero (fractions allowed), or zero too when `zero`.
pub fn seconds(v: &str, what: &str, zero: bool) -> Result<f64, String> {
    v.parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && (*s > 0.0 || (zero && *s == 0.0)) && *s < 1e9)
        .ok_or_else(|| {
            let kind = if zero { "non-negative" } else { "positive" };
            format!("{what} must be a {kind} number of seconds, not '{v}'")
        })
}

/// Each `-c` specification parsed into a set, or the first error.
pub fn parse_specs(
    specs: &[String],
    b: &dyn Backend,
) -> Result<Vec<CounterSet>, perfcompat::Error> {
    specs.iter().map(|s| eventspec::parse(s, b)).collect()
}

/// The `-h` listing: `usage`, then the interface, generic and platform events, attributes
/// and the reference of the backend in force.
pub fn help(usage: &str, b: &dyn Backend) -> String {
    let info = b.info();
    let mut s = format!(
        "{usage}\n\n\tCPU performance counter interface: {}\n",
        info.description
    );
    let events = b.events();
    let wrap = |s: &mut String, title: &str, names: Vec<&str>| {
        s.push_str(title);
        let mut col = 17;
        for (i, n) in names.iter().enumerate() {
            if col + n.len() + 2 > 76 {
                s.push_str("\n\t\t ");
                col = 17;
            }
            s.push_str(n);
            if i + 1 < names.len() {
                s.push_str(", ");
            }
            col += n.len() + 2;
        }
        s.push('\n');
    };
    let npic = info.counters.len();
    wrap(
        &mut s,
        &format!("\n\tGeneric Events:\n\n\tevent[0-{}]: ", npic - 1),
        events
            .iter()
            .filter(|e| e.generic)
            .map(|e| e.name.as_str())
            .collect(),
    );
    wrap(
        &mut s,
        &format!("\n\tPlatform Specific Events:\n\n\tevent[0-{}]: ", npic - 1),
        events
            .iter()
            .filter(|e| !e.generic)
            .map(|e| e.name.as_str())
            .collect(),
    );
    let mut attrs: Vec<&str> = info.attributes.iter().map(String::as_str).collect();
    attrs.extend(["nouser", "sys"]);
    s.push_str(&format!(
        "\n\tattributes: {}\n\n\t{}\n",
        attrs.join(" "),
        info.reference
    ));
    s
}
