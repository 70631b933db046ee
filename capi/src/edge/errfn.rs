//! libcpc version 1's error channel: cpc_seterrfn(3CPC). A failing version 1 function
//! returns -1 (or NULL) with `errno` set and passes a message to the process's error function,
//! `errfn(fn, fmt, ap)`: `fn` is the function's name without its `cpc_` prefix (as the page's
//! example compares it with `"strtoevent"`), `fmt` the message (ending in a newline; any `%`
//! doubled, `ap` empty). Without an error function the message goes to standard error as
//! `libcpc: <fn>: <message>`. Every failure has a message, naming its cause. `errno` is
//! preserved around the error function, then set.
//!
//! Async-signal-safe: the message is formatted on the stack and written with `write(2)`;
//! `cpc_take_sample` reports through it from SIGEMT handlers.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::fmt::{self, Write as _};
use std::sync::atomic::{AtomicUsize, Ordering};

use super::report::{Escaped, StackText};
use super::{errno, set_errno};

/// The C error function type (`cpc_errfn_t`); its `va_list` is opaque to Rust.
pub(crate) type ErrFn =
    unsafe extern "C" fn(fn_: *const c_char, fmt: *const c_char, ap: *mut c_void);

extern "C" {
    /// In varargs.c: calls `h(fn_, fmt, ap)` with an empty `va_list`.
    fn perfcompat_cpc_call_errfn(h: ErrFn, fn_: *const c_char, fmt: *const c_char, ...);
}

/// The process's error function (0: the default).
static ERRFN: AtomicUsize = AtomicUsize::new(0);

/// Set the error function (`None`: the default report on standard error).
pub(crate) fn set(h: Option<ErrFn>) {
    ERRFN.store(h.map_or(0, |h| h as usize), Ordering::Release);
}

fn get() -> Option<ErrFn> {
    let h = ERRFN.load(Ordering::Acquire);
    // SAFETY: only ever stored from an `ErrFn`.
    (h != 0).then(|| unsafe { std::mem::transmute::<usize, ErrFn>(h) })
}

/// Report that version 1 function `func` (its name without `cpc_`, e.g. `c"strtoevent"`)
/// failed because of `msg`, then set `errno`. A newline ends the message.
pub(crate) fn report(func: &CStr, msg: &dyn fmt::Display, err: c_int) {
    let saved = errno();
    let mut text = StackText::new();
    match get() {
        Some(h) => {
            let _ = write!(Escaped(&mut text), "{msg}");
            if !text.as_bytes().ends_with(b"\n") {
                let _ = text.write_str("\n");
            }
            // The C string: the text cut to leave room for its NUL.
            let mut c = [0u8; 1025];
            let b = text.as_bytes();
            let n = b.len().min(c.len() - 1);
            c[..n].copy_from_slice(&b[..n]);
            // SAFETY: the program's error function, called as libcpc called it, with
            // NUL-terminated strings.
            unsafe { perfcompat_cpc_call_errfn(h, func.as_ptr(), c.as_ptr().cast()) };
        }
        None => {
            let name = func.to_str().unwrap_or("?");
            let _ = write!(text, "libcpc: {name}: {msg}");
            if !text.as_bytes().ends_with(b"\n") {
                let _ = text.write_str("\n");
            }
            text.to_stderr();
        }
    }
    set_errno(saved);
    set_errno(err);
}
