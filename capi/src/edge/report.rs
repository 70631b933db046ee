//! libcpc's error channel: `errno`, the error subcodes and their fixed messages, the
//! per-handle error handler (`cpc_seterrhndlr`) and the default report on standard error.
//!
//! As in libcpc, an error with a subcode goes to the handler when one is set, as
//! `handler(fn, subcode, fmt, ap)` with an empty `ap`; otherwise `libcpc: <fn>: <message>` is
//! written to standard error, one line for one error as on Solaris. The message starts with
//! libcpc's documented text for the subcode, and we add the engine's own explanation (which
//! event, which counters conflict and why) on the same line after a colon, in what the handler
//! gets and what is printed alike (issue 45 item 6: the explanation was a second printed line,
//! which a handler never saw): `Unknown event: unknown event 'x' on ...\n`. In `fmt` any `%`
//! of the explanation is doubled, so that a handler that `vfprintf`s it prints it as it is.
//! Errors without a subcode are also printed that way (libcpc printed nothing for them; a
//! handler is not called for them, as in libcpc): every failure names its cause. `errno` is
//! saved and restored around the handler, then set.
//!
//! Everything here is async-signal-safe: no allocation (the text is formatted into a buffer on
//! the stack), no locks, `write(2)` instead of stdio. The sample and restart paths report
//! through it from signal handlers.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::fmt::{self, Write};

use perfcompat::base::error::ErrorKind;
use perfcompat::base::text::Text;
use perfcompat::Error;

use super::set_errno;

/// The libcpc error subcodes (`CPC_INVALID_EVENT` = 1 ... `CPC_HV_NO_ACCESS` = 11, the index
/// of their message in [`MESSAGES`]), by engine error family; -1: none. `libcpc.h`'s constants
/// are checked against these numbers in the `cpc` module.
pub(crate) fn subcode(e: &Error) -> c_int {
    match e.kind() {
        ErrorKind::InvalidEvent => 1,
        ErrorKind::InvalidPicnum => 2,
        ErrorKind::InvalidAttribute => 3,
        ErrorKind::AttributeOutOfRange => 4,
        ErrorKind::ResourceUnavailable => 5,
        ErrorKind::PicNotCapable => 6,
        ErrorKind::InvalidFlags => 7,
        ErrorKind::ConflictingRequests => 8,
        ErrorKind::RequiresPrivilege => 9,
        ErrorKind::PbindFailed => 10,
        ErrorKind::Other => -1,
    }
}

/// libcpc's message for each subcode, with its terminating NUL (index 0 fills the slot; none
/// has a conversion). Held in place (perfcompat's `Text`), not as `&CStr` pointers: a table of
/// pointers is data the dynamic loader relocates at every load (issue 48, loading).
static MESSAGES: [Text<44>; 12] = [
    Text::new(""),
    Text::new("Unknown event\n\0"),
    Text::new("Invalid counter number\n\0"),
    Text::new("Unknown attribute\n\0"),
    Text::new("Attribute out of range\n\0"),
    Text::new("Hardware resource unavailable\n\0"),
    Text::new("Counter cannot count requested event\n\0"),
    Text::new("Invalid flags in a request\n\0"),
    Text::new("Requests conflict with each other\n\0"),
    Text::new("Attribute requires the cpc_cpu privilege\n\0"),
    Text::new("Couldn't bind LWP to requested processor\n\0"),
    Text::new("Hypervisor event access denied\n\0"),
];

/// The message of `subcode`, if it has one.
pub(crate) fn message(subcode: c_int) -> Option<&'static CStr> {
    usize::try_from(subcode)
        .ok()
        .filter(|&i| i > 0)
        .and_then(|i| MESSAGES.get(i))
        .and_then(|m| CStr::from_bytes_with_nul(m.as_bytes()).ok())
}

/// The C error handler type (`cpc_errhndlr_t`); its `va_list` is opaque to Rust.
pub(crate) type Handler =
    unsafe extern "C" fn(fn_: *const c_char, subcode: c_int, fmt: *const c_char, ap: *mut c_void);

extern "C" {
    /// In varargs.c: calls `h(fn_, subcode, fmt, ap)` with an empty `va_list`.
    fn perfcompat_cpc_call_errhndlr(
        h: Handler,
        fn_: *const c_char,
        subcode: c_int,
        fmt: *const c_char,
        ...
    );
}

/// Text formatted on the stack, cut at its capacity.
pub(crate) struct StackText {
    buf: [u8; 1024],
    len: usize,
}

impl StackText {
    pub(crate) fn new() -> StackText {
        StackText {
            buf: [0; 1024],
            len: 0,
        }
    }

    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    /// Write the text to standard error with `write(2)`.
    pub(crate) fn to_stderr(&self) {
        let mut b = self.as_bytes();
        while !b.is_empty() {
            // SAFETY: writes from a live buffer.
            let n = unsafe { libc::write(2, b.as_ptr().cast(), b.len()) };
            if n <= 0 {
                return;
            }
            b = &b[n as usize..];
        }
    }
}

impl Write for StackText {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let room = self.buf.len() - self.len;
        let n = s.len().min(room);
        self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        Ok(())
    }
}

/// A `fmt::Write` that doubles `%` (the text is passed as a format).
pub(crate) struct Escaped<'a>(pub(crate) &'a mut StackText);

impl fmt::Write for Escaped<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        for (i, part) in s.split('%').enumerate() {
            if i > 0 {
                self.0.write_str("%%")?;
            }
            self.0.write_str(part)?;
        }
        Ok(())
    }
}

/// The one line telling an error: libcpc's message `msg` (if any) without its newline, then
/// `detail` (if any) after `": "`, ending in a newline; with `escape`, `%` in `detail` doubled.
fn one_line(
    t: &mut StackText,
    msg: Option<&CStr>,
    detail: Option<&dyn fmt::Display>,
    escape: bool,
) {
    let m = msg
        .and_then(|m| m.to_str().ok())
        .map(|m| m.trim_end_matches('\n'));
    if let Some(m) = m {
        let _ = t.write_str(m);
    }
    if let Some(d) = detail {
        if m.is_some() {
            let _ = t.write_str(": ");
        }
        let _ = if escape {
            write!(Escaped(t), "{d}")
        } else {
            write!(t, "{d}")
        };
    }
    if !t.as_bytes().ends_with(b"\n") {
        let _ = t.write_str("\n");
    }
}

/// Report a failure of `func` (a NUL-terminated C name such as `c"cpc_bind_curlwp"`) in one
/// line, libcpc's message for `subcode` followed by `detail` (the engine's explanation, if
/// any): through `handler` when the error has a subcode and a handler is set, otherwise on
/// standard error; then set `errno` to `errno`. Async-signal-safe as long as `detail`'s
/// `Display` does not allocate.
pub(crate) fn report(
    handler: Option<Handler>,
    func: &CStr,
    subcode: c_int,
    errno: c_int,
    detail: Option<&dyn fmt::Display>,
) {
    let saved = super::errno();
    let msg = message(subcode);
    match (handler, msg) {
        (Some(h), Some(_)) => {
            let mut t = StackText::new();
            one_line(&mut t, msg, detail, true);
            // The C string: the text cut to leave room for its NUL.
            let mut c = [0u8; 1025];
            let b = t.as_bytes();
            let n = b.len().min(c.len() - 1);
            c[..n].copy_from_slice(&b[..n]);
            // SAFETY: a handler the program registered, called as libcpc calls it, with
            // NUL-terminated strings.
            unsafe { perfcompat_cpc_call_errhndlr(h, func.as_ptr(), subcode, c.as_ptr().cast()) };
        }
        (Some(_), None) => {}
        (None, _) => {
            let name = func.to_str().unwrap_or("libcpc");
            let lib = if name.starts_with("pctx_") {
                "libpctx"
            } else {
                "libcpc"
            };
            let mut t = StackText::new();
            let _ = write!(t, "{lib}: {name}: ");
            one_line(&mut t, msg, detail, false);
            t.to_stderr();
        }
    }
    set_errno(saved);
    set_errno(errno);
}

#[cfg(test)]
mod tests {
    use super::*;
    use perfcompat::base::error::{Conflict, ConflictReason};

    #[test]
    fn engine_errors_map_to_the_documented_subcodes_and_errnos() {
        let cases: Vec<(Error, c_int, c_int)> = vec![
            (
                Error::UnknownEvent {
                    event: "x".into(),
                    backend: "b".into(),
                },
                1,
                libc::EINVAL,
            ),
            (Error::InvalidPicnum { picnum: 9, npic: 2 }, 2, libc::EINVAL),
            (
                Error::InvalidAttribute {
                    name: "a".into(),
                    backend: "b".into(),
                },
                3,
                libc::EINVAL,
            ),
            (
                Error::AttributeOutOfRange {
                    name: "emask".into(),
                    value: 99,
                    max: 3,
                },
                4,
                libc::EINVAL,
            ),
            (
                Error::Conflict(Conflict {
                    requests: vec![(0, "a".into()), (1, "b".into())],
                    reason: ConflictReason::SharedResource {
                        resource: "CRU_ESCR2".into(),
                    },
                }),
                5,
                libc::EINVAL,
            ),
            (
                Error::PicNotCapable {
                    event: "e".into(),
                    picnum: 1,
                },
                6,
                libc::EINVAL,
            ),
            (Error::InvalidFlags { flags: 0x10 }, 7, libc::EINVAL),
            (
                Error::Conflict(Conflict {
                    requests: vec![(0, "a".into()), (1, "b".into())],
                    reason: ConflictReason::DifferentFlags,
                }),
                8,
                libc::EINVAL,
            ),
            (
                Error::PermissionDenied {
                    what: "w".into(),
                    fix: "f".into(),
                },
                9,
                libc::EACCES,
            ),
            (Error::EmptySet, -1, libc::EINVAL),
            (Error::NotBound, -1, libc::EINVAL),
            (
                Error::OverflowUnsupported {
                    backend: "sim:ultrasparc2".into(),
                },
                -1,
                libc::ENOTSUP,
            ),
            (Error::Busy("x".into()), -1, libc::EAGAIN),
            (Error::NoSuchProcess(5), -1, libc::ESRCH),
            // cpc_bind_cpu's processor bind: a processor that does not exist or is offline.
            (Error::NoSuchProcessor { id: -1, ncpu: 2 }, 10, libc::EINVAL),
            (Error::ProcessorOffline(1), 10, libc::ENOSYS),
            (
                Error::PbindFailed {
                    cpu: 1,
                    errno: libc::EPERM,
                },
                10,
                libc::EPERM,
            ),
            (Error::ProcessorTaken(1), -1, libc::EAGAIN),
        ];
        for (e, sub, errno) in cases {
            assert_eq!(subcode(&e), sub, "{e}");
            assert_eq!(e.errno(), errno, "{e}");
        }
    }

    #[test]
    fn messages_are_libcpcs() {
        assert_eq!(message(1).unwrap().to_bytes(), b"Unknown event\n");
        assert_eq!(
            message(10).unwrap().to_bytes(),
            b"Couldn't bind LWP to requested processor\n"
        );
        assert!(message(0).is_none() && message(-1).is_none() && message(12).is_none());
    }

    static SEEN: std::sync::Mutex<Vec<(String, c_int, String)>> = std::sync::Mutex::new(Vec::new());

    unsafe extern "C" fn handler(f: *const c_char, sub: c_int, fmt: *const c_char, _: *mut c_void) {
        // SAFETY: report passes NUL-terminated strings.
        let (f, fmt) = unsafe { (CStr::from_ptr(f), CStr::from_ptr(fmt)) };
        set_errno(12345); // the handler may change errno: report restores it
        SEEN.lock().unwrap().push((
            f.to_string_lossy().into_owned(),
            sub,
            fmt.to_string_lossy().into_owned(),
        ));
    }

    #[test]
    fn the_handler_gets_name_subcode_and_message_and_errno_survives() {
        report(
            Some(handler),
            c"cpc_bind_curlwp",
            5,
            libc::EINVAL,
            Some(&"detail"),
        );
        assert_eq!(super::super::errno(), libc::EINVAL);
        // No subcode: the handler is not called.
        report(Some(handler), c"cpc_unbind", -1, libc::EINVAL, None);
        let seen = SEEN.lock().unwrap();
        assert_eq!(
            *seen,
            vec![(
                "cpc_bind_curlwp".to_string(),
                5,
                "Hardware resource unavailable: detail\n".to_string()
            )]
        );
    }

    #[test]
    fn stack_text_is_cut_not_overflowed() {
        let mut t = StackText::new();
        for _ in 0..100 {
            let _ = write!(t, "0123456789abcdef");
        }
        assert_eq!(t.as_bytes().len(), 1024);
    }
}
