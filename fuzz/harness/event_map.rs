//! Fuzz body `event_map`: the `PERFCOMPAT_EVENTS` event-map file parser (`EventMap::parse`).
//!
//! Invariants checked on every input:
//! - parsing never panics; a rejected file names a line that exists (0 for an oversized file);
//! - in an accepted map every spec is one non-empty word and every name is a valid name;
//!   `host_spec` gives the user's spec for a mapped number and fails only for numbers out of
//!   0..31 or events without a host equivalent;
//! - the map written back as `key = spec` lines parses to the same map;
//! - a non-empty map repeated twice is rejected (duplicate mappings), on the first repeated line.

use perfcompat::base::eventmap::{r10k_event, EventMap};
use perfcompat::Error;

use crate::fuzz_common::check_rejection;

/// Run one input.
pub fn run(data: &[u8]) {
    // Map files are read as UTF-8 (a file that is not is rejected before parsing).
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let map = match EventMap::parse(text, "fuzz.events") {
        Ok(m) => m,
        Err(e) => return check_rejection(e, "fuzz.events", text),
    };
    let mut lines = Vec::new();
    for n in 0..40u32 {
        match (map.number(n), map.host_spec(n)) {
            (Some(user), Ok(spec)) => {
                assert!(n < 32, "number {n} mapped");
                assert_eq!(user, spec);
                assert!(!spec.is_empty() && !spec.chars().any(char::is_whitespace));
                lines.push(format!("{n} = {spec}"));
            }
            (Some(_), Err(e)) => panic!("number {n} mapped but host_spec fails: {e}"),
            (None, Ok(spec)) => {
                let ev = r10k_event(n).expect("a built-in spec for a known event");
                assert_eq!(ev.host_str(), Some(spec));
            }
            (None, Err(Error::UnknownEvent { .. })) => assert!(n >= 32),
            (None, Err(Error::EventUnavailable { .. })) => {
                assert!(r10k_event(n).is_some_and(|e| e.host.is_none()))
            }
            (None, Err(e)) => panic!("host_spec({n}): unexpected {e:?}"),
        }
    }
    for (name, spec) in map.aliases() {
        assert!(!name.is_empty() && !name.starts_with(|c: char| c.is_ascii_digit()));
        assert!(!name.contains(['=', '#']) && !name.chars().any(char::is_whitespace));
        assert!(!spec.is_empty() && !spec.chars().any(char::is_whitespace));
        assert!(!spec.contains('#'), "a comment in spec {spec:?}");
        assert_eq!(map.alias(name), Some(spec));
        lines.push(format!("{name} = {spec}"));
    }
    // Written back, the map parses to itself.
    let written = lines.join("\n");
    let again = EventMap::parse(&written, "written")
        .unwrap_or_else(|e| panic!("the written map does not parse: {e}\n{written}"));
    assert_eq!(again, map, "written back:\n{written}");
    // Twice over, every mapping is a duplicate.
    if !lines.is_empty() {
        let twice = format!("{written}\n{written}");
        match EventMap::parse(&twice, "twice") {
            Err(Error::BadFile { line, reason, .. }) => {
                assert_eq!(line, lines.len() + 1, "{reason}");
                assert!(reason.contains("duplicate"), "{reason}");
            }
            other => panic!("a map given twice: {other:?}"),
        }
    }
}
