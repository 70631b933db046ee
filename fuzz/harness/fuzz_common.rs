//! What the fuzz bodies share: reading the input, the libcpc error handler they install (it
//! records the subcode instead of printing), and the SIGEMT handler.
//!
//! Included at the crate root (`mod fuzz_common`) by each fuzz target and by the replay test;
//! the bodies reach it as `crate::fuzz_common`.

#![allow(dead_code)]

use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicI32, AtomicPtr, AtomicU64, Ordering};
use std::sync::Once;

use perfcompat_capi::cpc::*;

/// The input, read front to back; past its end every read gives zeros.
pub struct Reader<'a> {
    data: &'a [u8],
}

impl<'a> Reader<'a> {
    /// A reader over `data`.
    pub fn new(data: &'a [u8]) -> Reader<'a> {
        Reader { data }
    }

    /// Whether the input is used up.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The next byte (0 past the end).
    pub fn u8(&mut self) -> u8 {
        match self.data.split_first() {
            Some((&b, rest)) => {
                self.data = rest;
                b
            }
            None => 0,
        }
    }

    /// The next `n` bytes (fewer at the end).
    pub fn bytes(&mut self, n: usize) -> &'a [u8] {
        let (a, b) = self.data.split_at(n.min(self.data.len()));
        self.data = b;
        a
    }

    /// The next 8 bytes as a little-endian number (zero-filled at the end).
    pub fn u64(&mut self) -> u64 {
        let mut b = [0u8; 8];
        let s = self.bytes(8);
        b[..s.len()].copy_from_slice(s);
        u64::from_le_bytes(b)
    }

    /// The next 4 bytes as a little-endian number (zero-filled at the end).
    pub fn u32(&mut self) -> u32 {
        let mut b = [0u8; 4];
        let s = self.bytes(4);
        b[..s.len()].copy_from_slice(s);
        u32::from_le_bytes(b)
    }

    /// A number of events to inject or a preset: small, near a wrap, or any (by a selector
    /// byte), so that overflows are reachable.
    pub fn count(&mut self) -> u64 {
        match self.u8() % 4 {
            0 => u64::from(self.u8()),
            1 => u64::MAX - u64::from(self.u8()),
            2 => u64::from(self.u32() & 0xffff),
            _ => self.u64(),
        }
    }
}

/// `errno` of the calling thread.
pub fn errno() -> c_int {
    // SAFETY: errno is thread-local.
    unsafe { *libc::__errno_location() }
}

/// Set `errno` of the calling thread.
pub fn set_errno(e: c_int) {
    // SAFETY: errno is thread-local.
    unsafe { *libc::__errno_location() = e }
}

/// The subcode the error handler saw last (-1: none since [`take_subcode`]).
static SUBCODE: AtomicI32 = AtomicI32::new(-1);

/// The subcode the handler saw since the last call, and forget it.
pub fn take_subcode() -> c_int {
    SUBCODE.swap(-1, Ordering::Relaxed)
}

unsafe extern "C" fn on_error(
    _fn: *const c_char,
    subcode: c_int,
    _fmt: *const c_char,
    _ap: *mut c_void,
) {
    SUBCODE.store(subcode, Ordering::Relaxed);
}

/// Route `cpc`'s subcoded errors to the recording handler (nothing printed for them).
pub fn quiet(cpc: *mut cpc_t) {
    let h: unsafe extern "C" fn(*const c_char, c_int, *const c_char, *mut c_void) = on_error;
    // SAFETY: a function of the cpc_errhndlr_t type.
    let r = unsafe { cpc_seterrhndlr(cpc, h as *mut cpc_errhndlr_t) };
    assert_eq!(r, 0, "cpc_seterrhndlr on a live handle");
}

/// SIGEMTs received.
pub static SIGEMTS: AtomicU64 = AtomicU64::new(0);
/// When set, the SIGEMT handler calls `cpc_set_restart` with this `cpc_t` (as a notified
/// program does); NULL: the handler only counts.
pub static RESTART_CPC: AtomicPtr<cpc_t> = AtomicPtr::new(std::ptr::null_mut());
/// What the handler's `cpc_set_restart` returned, or'ed over the calls (0: all succeeded).
pub static RESTART_FAILURES: AtomicU64 = AtomicU64::new(0);

extern "C" fn on_sigemt(_sig: c_int, _info: *mut libc::siginfo_t, _uc: *mut c_void) {
    let saved = errno();
    SIGEMTS.fetch_add(1, Ordering::SeqCst);
    let cpc = RESTART_CPC.load(Ordering::SeqCst);
    if !cpc.is_null() && cpc_set_restart(cpc, std::ptr::null_mut()) != 0 {
        RESTART_FAILURES.fetch_add(1, Ordering::SeqCst);
    }
    set_errno(saved);
}

/// Install the SIGEMT handler (signal 63 here; `PERFCOMPAT_SIGEMT` is not set), once.
pub fn install_sigemt() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: installing a handler with a zeroed, then filled, sigaction.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_sigemt as *const () as usize;
            sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            assert_eq!(libc::sigaction(63, &sa, std::ptr::null_mut()), 0);
        }
    });
}

/// Use `backend` as the process's backend (`PERFCOMPAT_BACKEND`), before its first use; fails
/// when the process already chose another one.
pub fn use_backend(backend: &str) {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        if std::env::var_os("PERFCOMPAT_BACKEND").is_none() {
            std::env::set_var("PERFCOMPAT_BACKEND", backend);
        }
    });
    let b = perfcompat::backend::global().expect("the backend");
    assert_eq!(
        b.info().kind.to_string(),
        backend,
        "the fuzz bodies run with PERFCOMPAT_BACKEND={backend}"
    );
}

/// Check a parser's rejection of `text` given as file `file`: a `BadFile` naming that file, a
/// line that exists (0: the whole file) and a reason.
pub fn check_rejection(e: perfcompat::Error, file: &str, text: &str) {
    match e {
        perfcompat::Error::BadFile {
            file: f,
            line,
            reason,
        } => {
            assert_eq!(f, file);
            let lines = text.lines().count();
            assert!(line <= lines, "line {line} of {lines} ({reason})");
            assert!(!reason.is_empty());
        }
        e => panic!("a parse error other than BadFile: {e:?}"),
    }
}
