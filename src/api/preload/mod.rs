//! The rules of counting a program from the outside (`PERFCOMPAT_PRELOAD_EVENTS`, issue 44
//! item 6), apart from the report and the counts it carries (their text is the `perfex`
//! report's, [`crate::commands::perfex::SelfCount`], a layer above this one): the variables'
//! names and values, what an `exec` of the counting process does with the counts ([`exec`]:
//! which file the C library will run, found through `PATH` as `execvp` finds it, and whether
//! that image would ignore the variables), the carried value's envelope ([`carried_for`]) and
//! the descriptor the report is written to ([`output`], kept only while it is still the
//! library's).
//!
//! The C side (`capi/src/preload.rs` in libperfcompat.so.1, and the C library functions of
//! libperfcompat-preload.so.1, `capi/preload/preload.c`) holds the process's state and calls
//! these.

pub mod exec;
pub mod output;

use crate::base::sys::env_name;

env_name! {
    /// The variable that turns counting on: the events to count.
    pub const EVENTS_VAR = "PERFCOMPAT_PRELOAD_EVENTS";
}
env_name! {
    /// The variable naming the process that counts (its children do not).
    pub const OWNER_VAR = "PERFCOMPAT_PRELOAD_PID";
}
env_name! {
    /// The variable naming the report file (default: standard error).
    pub const OUTPUT_VAR = "PERFCOMPAT_PRELOAD_OUTPUT";
}
env_name! {
    /// The variable that carries the counts over an `exec` of the counting process:
    /// `<pid>;<SelfCount::carry>`, set by the library in the new image's environment only.
    pub const CARRY_VAR = "PERFCOMPAT_PRELOAD_CARRY";
}

/// The longest `PERFCOMPAT_PRELOAD_CARRY` value taken, in bytes: a genuine one holds at most
/// [`crate::commands::perfex::MAX_READINGS`] counts of three numbers each and a command cut
/// to 1024 bytes, each byte at most three characters once escaped (about 7 KB at most).
pub const CARRY_MAX: usize = 16 * 1024;

/// What `PERFCOMPAT_PRELOAD_CARRY` holds for the process `pid`: `Ok(Some(rest))` (the counts,
/// start and command, checked by [`crate::commands::perfex::SelfCount::adopt`]), `Ok(None)`
/// when it was left for another process (a value set by hand, or inherited by a child that is
/// not the one that exec'd), or why it is refused: longer than [`CARRY_MAX`], or without its
/// process id.
pub fn carried_for(value: &[u8], pid: i32) -> Result<Option<&str>, String> {
    if value.len() > CARRY_MAX {
        return Err(format!(
            "{} bytes, more than the {CARRY_MAX} a carried count takes",
            value.len()
        ));
    }
    let text = std::str::from_utf8(value).map_err(|_| "not text".to_string())?;
    let Some((owner, rest)) = text.split_once(';') else {
        return Err("no process id".into());
    };
    let owner: i32 = owner
        .parse()
        .ok()
        .filter(|&p| p > 0)
        .ok_or_else(|| "a bad process id".to_string())?;
    Ok((owner == pid).then_some(rest))
}

/// The value of `name` in an environment given as its entries (`NAME=value`).
pub fn env_entry<'a>(mut entries: impl Iterator<Item = &'a [u8]>, name: &[u8]) -> Option<&'a [u8]> {
    entries.find_map(|entry| {
        entry
            .strip_prefix(name)
            .and_then(|rest| rest.strip_prefix(b"="))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_carrys_envelope() {
        assert_eq!(carried_for(b"12;a;b;c", 12), Ok(Some("a;b;c")));
        assert_eq!(carried_for(b"13;a;b;c", 12), Ok(None));
        for bad in [&b"x;a"[..], b"-1;a", b"0;a", b"12", b"\xff;a"] {
            assert!(carried_for(bad, 12).is_err(), "{bad:?}");
        }
        let long = format!("12;{}", "a".repeat(CARRY_MAX));
        let e = carried_for(long.as_bytes(), 12).unwrap_err();
        assert!(e.contains("more than the 16384"), "{e}");
    }

    #[test]
    fn entries() {
        let env: [&[u8]; 3] = [b"A=1", b"PATHX=2", b"PATH=/bin"];
        assert_eq!(env_entry(env.iter().copied(), b"PATH"), Some(&b"/bin"[..]));
        assert_eq!(env_entry(env.iter().copied(), b"B"), None);
    }
}
