//! Events of the PMUs the kernel describes under sysfs ([`SYSFS`](super::SYSFS)):
//! `<pmu>/<event>/`, `<pmu>/<term>=<value>,.../` and bare event aliases.
//!
//! # The sysfs layout
//!
//! The layout is the kernel's documented ABI (`sysfs-bus-event_source-devices-*`):
//!
//! * `<pmu>/type` holds the number to put in `perf_event_attr.type`;
//! * `<pmu>/format/<term>` says which bits of `config`, `config1` or `config2` a term sets,
//!   as `config:0-7`, `config1:0-15`, `config:21` (a single bit) or `config:0-7,32-35` (a
//!   split field: the value's low bits fill the lowest range first);
//! * `<pmu>/events/<name>` holds an event alias: a comma-separated term list such as
//!   `event=0x3c,umask=0x00`. A term written `term=?` must be supplied by the user.
//!   `<name>.scale` and `<name>.unit` say how to turn the count into a quantity.
//!
//! In a `<pmu>/.../` body each comma-separated item is `term=value` (decimal or `0x` hex), a
//! bare `term` (meaning `term=1`), or the name of one event alias of that PMU, whose terms are
//! applied first; the explicit terms then override the bits they cover. The terms `config`,
//! `config1` and `config2` set the whole field when the PMU has no format file of that name.
//! Event alias files may use the terms `period`, `percore` and `metric-id`, which say nothing
//! about the counter configuration and are ignored there; any other term without a format file
//! is an error. Event modifiers (`:u`, `/.../k`) are not part of the name in this library:
//! they are request flags.

use std::fs;
use std::path::{Path, PathBuf};

use super::{Class, PerfCode, PerfEvent};
use crate::base::error::{io_text, Error, Result};

/// Every event alias of every PMU under `sysfs`, named `<pmu>/<event>/`, sorted by name.
///
/// Aliases that cannot be resolved on their own (a term the PMU does not define, a `term=?`
/// the user must supply, a malformed file) are left out.
pub fn sysfs_events(sysfs: &Path) -> Vec<PerfEvent> {
    let mut out = Vec::new();
    for pmu in pmu_names(sysfs) {
        for ev in event_names(&sysfs.join(&pmu)) {
            if let Ok(e) = resolve_pmu_event(sysfs, &pmu, &ev, &format!("{pmu}/{ev}/")) {
                out.push(e);
            }
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// Files in `events/` that describe an event rather than define one.
const EVENT_SUFFIXES: [&str; 4] = [".scale", ".unit", ".per-pkg", ".snapshot"];

/// Terms that event alias files may use and that do not configure the counter.
const IGNORABLE_ALIAS_TERMS: [&str; 3] = ["period", "percore", "metric-id"];

/// The PMU directories under `sysfs`, sorted.
fn pmu_names(sysfs: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(sysfs)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| fs::metadata(e.path()).map(|m| m.is_dir()).unwrap_or(false))
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    v.sort();
    v
}

/// The event aliases of the PMU in `dir`, sorted.
fn event_names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir.join("events"))
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| fs::metadata(e.path()).map(|m| m.is_file()).unwrap_or(false))
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| !EVENT_SUFFIXES.iter().any(|s| n.ends_with(s)))
        .collect();
    v.sort();
    v
}

/// Whether `name` can be a single file name (no separators, not `.` or `..`).
fn plain_name(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '\0'])
}

/// The file in `dir` called `name`, matched exactly or else case-insensitively.
fn find_file(dir: &Path, name: &str) -> Option<String> {
    if !plain_name(name) {
        return None;
    }
    if dir.join(name).is_file() {
        return Some(name.to_string());
    }
    let mut v: Vec<String> = fs::read_dir(dir)
        .ok()?
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.eq_ignore_ascii_case(name))
        .collect();
    v.sort();
    v.into_iter().next().filter(|n| dir.join(n).is_file())
}

/// The event alias `name` of the PMU in `dir`, canonically spelled, if it has one.
fn find_event(dir: &Path, name: &str) -> Option<String> {
    if EVENT_SUFFIXES
        .iter()
        .any(|s| name.to_ascii_lowercase().ends_with(s))
    {
        return None;
    }
    find_file(&dir.join("events"), name)
}

fn bad_file(path: &Path, reason: String) -> Error {
    Error::BadFile {
        file: path.display().to_string(),
        line: 0,
        reason,
    }
}

fn unavailable(spec: &str, reason: String) -> Error {
    Error::EventUnavailable {
        event: spec.to_string(),
        reason,
    }
}

/// One PMU directory.
struct Pmu {
    name: String,
    dir: PathBuf,
    type_: u32,
}

impl Pmu {
    fn open(sysfs: &Path, name: &str, spec: &str) -> Result<Pmu> {
        let dir = sysfs.join(name);
        if !plain_name(name) || !dir.is_dir() {
            return Err(unavailable(
                spec,
                format!("no PMU named '{name}' in {}", sysfs.display()),
            ));
        }
        let tf = dir.join("type");
        let text = fs::read_to_string(&tf).map_err(|e| {
            unavailable(
                spec,
                format!(
                    "PMU '{name}' has no readable type file ({})",
                    crate::base::error::io_text(&e)
                ),
            )
        })?;
        let type_ = text
            .trim()
            .parse::<u32>()
            .map_err(|_| bad_file(&tf, format!("'{}' is not a PMU type number", text.trim())))?;
        Ok(Pmu {
            name: name.to_string(),
            dir,
            type_,
        })
    }

    /// The format of `term`, if the PMU defines it (or it is one of `config`, `config1`,
    /// `config2`, which set the whole field unless the PMU says otherwise).
    fn format(&self, term: &str) -> Result<Option<Field>> {
        let fdir = self.dir.join("format");
        if let Some(f) = find_file(&fdir, term) {
            let path = fdir.join(f);
            let text = fs::read_to_string(&path)
                .map_err(|e| bad_file(&path, format!("cannot read: {}", io_text(&e))))?;
            return Field::parse(text.trim())
                .map(Some)
                .map_err(|r| bad_file(&path, r));
        }
        let which = match term.to_ascii_lowercase().as_str() {
            "config" => 0,
            "config1" => 1,
            "config2" => 2,
            _ => return Ok(None),
        };
        Ok(Some(Field {
            which,
            ranges: vec![(0, 63)],
        }))
    }
}

/// A format: which config word and which bit ranges (inclusive, lowest first).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Field {
    which: u8,
    ranges: Vec<(u32, u32)>,
}

impl Field {
    /// Parse `config:0-7`, `config1:3`, `config:0-7,32-35`.
    fn parse(text: &str) -> std::result::Result<Field, String> {
        let (word, bits) = text
            .split_once(':')
            .ok_or_else(|| format!("'{text}' is not <config field>:<bits>"))?;
        let which = match word.trim() {
            "config" => 0,
            "config1" => 1,
            "config2" => 2,
            other => return Err(format!("field '{other}' is not config, config1 or config2")),
        };
        let mut ranges = Vec::new();
        for part in bits.split(',') {
            let part = part.trim();
            let num = |t: &str| {
                t.trim()
                    .parse::<u32>()
                    .ok()
                    .filter(|&b| b < 64)
                    .ok_or_else(|| format!("bad bit number '{t}' in '{text}'"))
            };
            let (lo, hi) = match part.split_once('-') {
                Some((a, b)) => (num(a)?, num(b)?),
                None => (num(part)?, num(part)?),
            };
            if lo > hi {
                return Err(format!("bit range {lo}-{hi} in '{text}' is reversed"));
            }
            ranges.push((lo, hi));
        }
        ranges.sort_unstable();
        if ranges.windows(2).any(|w| w[1].0 <= w[0].1) {
            return Err(format!("bit ranges in '{text}' overlap"));
        }
        Ok(Field { which, ranges })
    }

    fn width(&self) -> u32 {
        self.ranges.iter().map(|(lo, hi)| hi - lo + 1).sum()
    }

    /// Put `value` into `code`, replacing the bits the field covers.
    fn apply(&self, code: &mut PerfCode, mut value: u64) {
        let word = match self.which {
            0 => &mut code.config,
            1 => &mut code.config1,
            _ => &mut code.config2,
        };
        for &(lo, hi) in &self.ranges {
            let n = hi - lo + 1;
            let mask = if n == 64 { u64::MAX } else { (1u64 << n) - 1 };
            *word = (*word & !(mask << lo)) | ((value & mask) << lo);
            value = if n == 64 { 0 } else { value >> n };
        }
    }
}

/// Parse a term value: decimal or `0x` hex.
fn parse_value(v: &str) -> Option<u64> {
    let v = v.trim();
    let (digits, radix) = match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        Some(h) => (h, 16),
        None => (v, 10),
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    u64::from_str_radix(digits, radix).ok()
}

/// Split a term list into `(term, value)` pairs; a bare term has no value.
fn split_terms(list: &str) -> Vec<(&str, Option<&str>)> {
    list.split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(|t| match t.split_once('=') {
            Some((n, v)) => (n.trim(), Some(v.trim())),
            None => (t, None),
        })
        .collect()
}

/// Set `term` to `value` in `code`, checking the value fits.
fn set_term(
    code: &mut PerfCode,
    field: &Field,
    term: &str,
    value: &str,
    pmu: &Pmu,
    spec: &str,
) -> Result<()> {
    let v = parse_value(value).ok_or_else(|| {
        Error::InvalidArgument(format!(
            "term '{term}' of PMU '{}' in '{spec}': '{value}' is not a number (write decimal \
             or 0x-hex)",
            pmu.name
        ))
    })?;
    let width = field.width();
    if width < 64 && v >> width != 0 {
        return Err(Error::InvalidArgument(format!(
            "value {v:#x} does not fit '{term}' ({width} bits) in '{spec}'"
        )));
    }
    field.apply(code, v);
    Ok(())
}

/// Resolve `<pmu>/<body>/`.
pub(super) fn resolve_pmu_event(
    sysfs: &Path,
    pmu: &str,
    body: &str,
    spec: &str,
) -> Result<PerfEvent> {
    let pmu = Pmu::open(sysfs, pmu, spec)?;
    let items = split_terms(body);
    if items.is_empty() {
        return Err(Error::InvalidArgument(format!(
            "event '{spec}' names no event or terms between the slashes"
        )));
    }
    let mut code = PerfCode::new(pmu.type_, 0);
    let mut alias: Option<String> = None;
    let mut needed: Vec<String> = Vec::new();
    let mut parts: Vec<String> = Vec::new();
    let (mut scale, mut unit) = (None, None);

    // The alias, if any, goes first so the explicit terms override it.
    for &(name, value) in &items {
        if value.is_some() {
            continue;
        }
        let Some(ev) = find_event(&pmu.dir, name) else {
            continue;
        };
        if let Some(prev) = &alias {
            return Err(Error::InvalidArgument(format!(
                "event '{spec}' names two events of PMU '{}': '{prev}' and '{ev}'",
                pmu.name
            )));
        }
        let path = pmu.dir.join("events").join(&ev);
        let text = fs::read_to_string(&path)
            .map_err(|e| bad_file(&path, format!("cannot read event alias: {}", io_text(&e))))?;
        for (term, value) in split_terms(&text) {
            let Some(field) = pmu.format(term)? else {
                if IGNORABLE_ALIAS_TERMS
                    .iter()
                    .any(|t| t.eq_ignore_ascii_case(term))
                {
                    continue;
                }
                return Err(unavailable(
                    spec,
                    format!(
                        "event '{ev}' of PMU '{}' uses term '{term}', which the PMU's format \
                         directory does not define",
                        pmu.name
                    ),
                ));
            };
            match value {
                Some("?") => needed.push(term.to_string()),
                Some(v) => set_term(&mut code, &field, term, v, &pmu, spec)?,
                None => set_term(&mut code, &field, term, "1", &pmu, spec)?,
            }
        }
        let read_extra = |suffix: &str| {
            let p = pmu.dir.join("events").join(format!("{ev}{suffix}"));
            fs::read_to_string(&p)
                .ok()
                .map(|t| (p, t.trim().to_string()))
        };
        if let Some((p, t)) = read_extra(".scale") {
            let s = t
                .parse::<f64>()
                .ok()
                .filter(|s| s.is_finite())
                .ok_or_else(|| bad_file(&p, format!("'{t}' is not a scale factor")))?;
            scale = Some(s);
        }
        unit = read_extra(".unit")
            .map(|(_, t)| t)
            .filter(|t| !t.is_empty());
        alias = Some(ev);
    }

    for &(name, value) in &items {
        if value.is_none()
            && alias
                .as_deref()
                .is_some_and(|a| a.eq_ignore_ascii_case(name))
        {
            parts.push(alias.clone().expect("alias is set"));
            continue;
        }
        let Some(field) = pmu.format(name)? else {
            let reason = if value.is_some() {
                format!("format term '{name}' not defined by PMU '{}'", pmu.name)
            } else {
                format!(
                    "'{name}' is neither an event nor a format term of PMU '{}'",
                    pmu.name
                )
            };
            return Err(unavailable(spec, reason));
        };
        set_term(&mut code, &field, name, value.unwrap_or("1"), &pmu, spec)?;
        needed.retain(|n| !n.eq_ignore_ascii_case(name));
        parts.push(match value {
            Some(v) => format!("{name}={v}"),
            None => name.to_string(),
        });
    }

    if let Some(n) = needed.first() {
        return Err(unavailable(
            spec,
            format!(
                "event '{}' of PMU '{}' needs a value for term '{n}' (write {}/{},{n}=<value>/)",
                alias.as_deref().unwrap_or_default(),
                pmu.name,
                pmu.name,
                alias.as_deref().unwrap_or_default()
            ),
        ));
    }

    Ok(PerfEvent {
        name: format!("{}/{}/", pmu.name, parts.join(",")),
        code,
        class: Class::Pmu,
        scale,
        unit,
    })
}

/// Resolve a bare name that is an event alias of a PMU: `cpu`, `cpu_core`, `cpu_atom` first,
/// then the other PMUs in name order.
pub(super) fn bare_alias(sysfs: &Path, name: &str) -> Result<Option<PerfEvent>> {
    if !plain_name(name) || name.contains([',', '=']) {
        return Ok(None);
    }
    let all = pmu_names(sysfs);
    let cpu = ["cpu", "cpu_core", "cpu_atom"];
    let order = cpu
        .iter()
        .filter(|c| all.iter().any(|p| p == *c))
        .map(|c| c.to_string())
        .chain(all.iter().filter(|p| !cpu.contains(&p.as_str())).cloned());
    for pmu in order {
        if let Some(ev) = find_event(&sysfs.join(&pmu), name) {
            return resolve_pmu_event(sysfs, &pmu, &ev, name).map(Some);
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::super::tests::{msg, nosys};
    use super::super::{parse, SYSFS};
    use super::*;
    use std::path::PathBuf;
    use std::sync::atomic::{AtomicUsize, Ordering};

    static COUNTER: AtomicUsize = AtomicUsize::new(0);

    /// A fake sysfs tree in a unique temporary directory, removed on drop.
    struct Fake(PathBuf);

    impl Fake {
        fn new() -> Fake {
            let dir = std::env::temp_dir().join(format!(
                "perfcompat-names-{}-{}",
                std::process::id(),
                COUNTER.fetch_add(1, Ordering::SeqCst)
            ));
            let _ = fs::remove_dir_all(&dir);
            fs::create_dir_all(&dir).unwrap();
            let f = Fake(dir);
            f.pmu(
                "cpu",
                4,
                &[
                    ("event", "config:0-7"),
                    ("umask", "config:8-15"),
                    ("cmask", "config:24-31"),
                    ("any", "config:21"),
                    ("ldlat", "config1:0-15"),
                ],
                &[
                    ("cycles-t", "event=0x3c,in_tx=1\n"),
                    ("mem-loads", "event=0xcd,umask=0x1\n"),
                    ("mem-loads.scale", "0.25\n"),
                    ("mem-loads.unit", "MiB\n"),
                    ("ld-lat", "event=0xcd,umask=0x1,ldlat=?"),
                    ("cpu-cycles", "event=0x3c"),
                    ("thing", "event=0x10,period=2000003,percore,metric-id=x"),
                ],
            );
            f.pmu(
                "split",
                42,
                &[
                    ("event", "config:0-7,32-35\n"),
                    ("ext", "config1:0-15"),
                    ("flag", "config2:3"),
                ],
                &[("both", "event=0xabc,flag")],
            );
            f.pmu(
                "zzz",
                77,
                &[("event", "config:0-7")],
                &[("zonly", "event=5")],
            );
            f
        }

        fn pmu(&self, name: &str, type_: u32, formats: &[(&str, &str)], events: &[(&str, &str)]) {
            let d = self.0.join(name);
            fs::create_dir_all(d.join("format")).unwrap();
            fs::create_dir_all(d.join("events")).unwrap();
            fs::write(d.join("type"), format!("{type_}\n")).unwrap();
            for (n, t) in formats {
                fs::write(d.join("format").join(n), t).unwrap();
            }
            for (n, t) in events {
                fs::write(d.join("events").join(n), t).unwrap();
            }
        }

        fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for Fake {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn fake_pmu_alias() {
        let f = Fake::new();
        let e = parse("cpu/mem-loads/", f.path()).unwrap();
        assert_eq!(e.name, "cpu/mem-loads/");
        assert_eq!(e.class, Class::Pmu);
        assert_eq!(
            e.code,
            PerfCode {
                type_: 4,
                config: 0x01cd,
                config1: 0,
                config2: 0
            }
        );
        assert_eq!(e.scale, Some(0.25));
        assert_eq!(e.unit.as_deref(), Some("MiB"));
        // Bare alias, any case.
        let b = parse("MEM-LOADS", f.path()).unwrap();
        assert_eq!(b, e);
        // Alias plus an overriding term.
        let o = parse("cpu/mem-loads,umask=0x82,cmask=2/", f.path()).unwrap();
        assert_eq!(o.code.config, 0xcd | 0x82 << 8 | 2 << 24);
        assert_eq!(o.name, "cpu/mem-loads,umask=0x82,cmask=2/");
        // Ignorable alias terms.
        assert_eq!(parse("thing", f.path()).unwrap().code.config, 0x10);
        // A term not in the format directory.
        let m = msg(parse("cpu/cycles-t/", f.path()));
        assert!(m.contains("in_tx") && m.contains("'cpu'"), "{m}");
        let m = msg(parse("cycles-t", f.path()));
        assert!(m.contains("in_tx"), "{m}");
        // A term the user must supply.
        let m = msg(parse("cpu/ld-lat/", f.path()));
        assert!(m.contains("ldlat"), "{m}");
        let e = parse("cpu/ld-lat,ldlat=3/", f.path()).unwrap();
        assert_eq!((e.code.config, e.code.config1), (0x1cd, 3));
        // Builtins win over bare aliases; the CPU PMU wins over the others.
        assert_eq!(
            parse("cpu-cycles", f.path()).unwrap().class,
            Class::Hardware
        );
        let z = parse("zonly", f.path()).unwrap();
        assert_eq!(
            (z.name.as_str(), z.code),
            ("zzz/zonly/", PerfCode::new(77, 5))
        );
    }

    #[test]
    fn fake_pmu_terms() {
        let f = Fake::new();
        let e = parse("cpu/event=0x3c,umask=0x1,any,cmask=255/", f.path()).unwrap();
        assert_eq!(
            e.code,
            PerfCode::new(4, 0x3c | 0x1 << 8 | 1 << 21 | 255 << 24)
        );
        assert_eq!((e.scale, e.unit), (None, None));
        assert_eq!(code_in(&f, "cpu/event=60/"), PerfCode::new(4, 60));
        assert_eq!(code_in(&f, "cpu/config=0x1234,config1=7/").config1, 7);
        assert_eq!(code_in(&f, "cpu/config=0x1234/").config, 0x1234);
        // Later terms override earlier ones.
        assert_eq!(code_in(&f, "cpu/event=1,event=2/").config, 2);
        // Overflow.
        let m = msg(parse("cpu/umask=0x1ff/", f.path()));
        assert!(
            m.contains("value 0x1ff does not fit 'umask' (8 bits)"),
            "{m}"
        );
        let m = msg(parse("cpu/any=2/", f.path()));
        assert!(m.contains("'any' (1 bits)"), "{m}");
        assert_eq!(code_in(&f, "cpu/any=1/").config, 1 << 21);
        // Unknown term, unknown PMU, bad values, bad shapes.
        let m = msg(parse("cpu/event=1,bogus=2/", f.path()));
        assert!(
            m.contains("format term 'bogus' not defined by PMU 'cpu'"),
            "{m}"
        );
        let m = msg(parse("cpu/nosuch/", f.path()));
        assert!(
            m.contains("'nosuch' is neither an event nor a format term"),
            "{m}"
        );
        let r = parse("foo/event=1/", f.path());
        assert!(matches!(r, Err(Error::EventUnavailable { .. })));
        let m = msg(r);
        assert!(
            m.contains(&format!("no PMU named 'foo' in {}", f.path().display())),
            "{m}"
        );
        let m = msg(parse("cpu/event=zz/", f.path()));
        assert!(m.contains("'zz' is not a number"), "{m}");
        assert!(matches!(
            parse("cpu/event=1", f.path()),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(
            parse("cpu/event=1/u", f.path()),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(
            parse("cpu//", f.path()),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(
            parse("../event=1/", f.path()),
            Err(Error::EventUnavailable { .. })
        ));
        assert!(matches!(
            parse("cpu/mem-loads,cpu-cycles/", f.path()),
            Err(Error::InvalidArgument(_))
        ));
        // A suffix file is not an event.
        assert!(parse("cpu/mem-loads.scale/", f.path()).is_err());
        assert!(matches!(
            parse("mem-loads.unit", f.path()),
            Err(Error::UnknownEvent { .. })
        ));
    }

    fn code_in(f: &Fake, spec: &str) -> PerfCode {
        parse(spec, f.path()).unwrap().code
    }

    #[test]
    fn fake_split_fields() {
        let f = Fake::new();
        assert_eq!(code_in(&f, "split/event=0xbc/"), PerfCode::new(42, 0xbc));
        assert_eq!(
            code_in(&f, "split/event=0xabc/"),
            PerfCode::new(42, 0xbc | 0xa << 32)
        );
        assert_eq!(code_in(&f, "split/event=0xfff/").config, 0xff | 0xf << 32);
        let m = msg(parse("split/event=0x1000/", f.path()));
        assert!(
            m.contains("value 0x1000 does not fit 'event' (12 bits)"),
            "{m}"
        );
        let e = parse("split/ext=0xffff,flag/", f.path()).unwrap();
        assert_eq!(
            e.code,
            PerfCode {
                type_: 42,
                config: 0,
                config1: 0xffff,
                config2: 1 << 3
            }
        );
        let m = msg(parse("split/ext=65536/", f.path()));
        assert!(m.contains("'ext' (16 bits)"), "{m}");
        let b = parse("both", f.path()).unwrap();
        assert_eq!(b.name, "split/both/");
        assert_eq!((b.code.config, b.code.config2), (0xbc | 0xa << 32, 8));
    }

    #[test]
    fn format_parsing() {
        assert_eq!(
            Field::parse("config:0-7").unwrap(),
            Field {
                which: 0,
                ranges: vec![(0, 7)]
            }
        );
        assert_eq!(Field::parse("config2:21").unwrap().ranges, vec![(21, 21)]);
        assert_eq!(Field::parse("config1:0-63").unwrap().width(), 64);
        assert_eq!(
            Field::parse("config:32-35,0-7").unwrap().ranges,
            vec![(0, 7), (32, 35)]
        );
        for bad in [
            "config",
            "config3:0-3",
            "config:7-0",
            "config:64",
            "config:0-7,4",
            "x:1",
        ] {
            assert!(Field::parse(bad).is_err(), "{bad}");
        }
        let mut c = PerfCode::new(0, u64::MAX);
        Field::parse("config:0-63").unwrap().apply(&mut c, 5);
        assert_eq!(c.config, 5);
    }

    #[test]
    fn bad_sysfs_files() {
        let f = Fake::new();
        f.pmu("broken", 0, &[("event", "cfg:0-7")], &[("e", "event=1")]);
        fs::write(f.path().join("broken/type"), "x\n").unwrap();
        assert!(matches!(
            parse("broken/event=1/", f.path()),
            Err(Error::BadFile { .. })
        ));
        fs::write(f.path().join("broken/type"), "11").unwrap();
        let r = parse("broken/event=1/", f.path());
        assert!(matches!(r, Err(Error::BadFile { .. })), "{r:?}");
        // sysfs_events leaves the broken alias out.
        assert!(!sysfs_events(f.path()).iter().any(|e| e.name == "broken/e/"));
    }

    #[test]
    fn fake_sysfs_listing() {
        let f = Fake::new();
        let all = sysfs_events(f.path());
        let names: Vec<&str> = all.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "cpu/cpu-cycles/",
                "cpu/mem-loads/",
                "cpu/thing/",
                "split/both/",
                "zzz/zonly/"
            ]
        );
        let ml = all.iter().find(|e| e.name == "cpu/mem-loads/").unwrap();
        assert_eq!(ml.scale, Some(0.25));
        assert_eq!(ml, &parse("cpu/mem-loads/", f.path()).unwrap());
        assert!(sysfs_events(&nosys()).is_empty());
    }

    #[test]
    fn real_sysfs_msr_tsc() {
        let sysfs = Path::new(SYSFS);
        let msr = sysfs.join("msr");
        if !msr.join("events/tsc").is_file() {
            println!("skipped: {} has no msr PMU with a tsc event", SYSFS);
            return;
        }
        let type_: u32 = fs::read_to_string(msr.join("type"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let e = parse("msr/tsc/", sysfs).unwrap();
        assert_eq!(e.name, "msr/tsc/");
        assert_eq!(e.class, Class::Pmu);
        assert_eq!(e.code, PerfCode::new(type_, 0));
        assert!(sysfs_events(sysfs).iter().any(|x| x == &e));
    }
}
