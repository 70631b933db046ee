//! libcpc version 1 (Solaris 8 and 9), beside version 2 on the same engine: the
//! `cpc_event_t` structure (cpc_event(3CPC)), versions and processors (cpc_version(3CPC),
//! cpc_getcpuver(3CPC)), translating events (cpc_strtoevent(3CPC)), arithmetic on them
//! (cpc_event_diff(3CPC)), access (cpc_access(3CPC)) and errors (cpc_seterrfn(3CPC)).
//! Binding and sampling are in the next file. What a cpuver is, the specification syntax and
//! what the control fields hold are the engine's ([`perfcompat::api::cpc::v1`]).
//!
//! Solaris 10 kept version 1 for binary compatibility only ("source containing these
//! functions will not compile"); here `libcpc.h` declares it, so that the programs written to it
//! build again.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::Mutex;

use perfcompat::api::cpc::v1 as engine_v1;

use super::{hrtime_t, uint_t, CPC_VER_CURRENT};
use crate::edge::errfn::{self, ErrFn};

/// `cpc_version`'s answer for a version it cannot support; as an argument, "which version is
/// current?".
pub const CPC_VER_NONE: uint_t = 0;

/// `ce_cpuver` of the UltraSPARC I (the `sim:ultrasparc2` model's events).
pub const CPC_ULTRA1: c_int = 1000;
/// `ce_cpuver` of the UltraSPARC II (`sim:ultrasparc2`).
pub const CPC_ULTRA2: c_int = 1001;
/// `ce_cpuver` of the UltraSPARC III (not emulated).
pub const CPC_ULTRA3: c_int = 1002;
/// `ce_cpuver` of the UltraSPARC III+ and IV (`sim:ultrasparc`).
pub const CPC_ULTRA3_PLUS: c_int = 1003;
/// `ce_cpuver` of the UltraSPARC IIIi (not emulated).
pub const CPC_ULTRA3_I: c_int = 1004;
/// `ce_cpuver` of the UltraSPARC IV+ (not emulated).
pub const CPC_ULTRA4_PLUS: c_int = 1005;
/// `ce_cpuver` of the Pentium (not emulated).
pub const CPC_PENTIUM: c_int = 2000;
/// `ce_cpuver` of the Pentium with MMX (not emulated).
pub const CPC_PENTIUM_MMX: c_int = 2001;
/// `ce_cpuver` of the Pentium Pro and II (not emulated).
pub const CPC_PENTIUM_PRO: c_int = 2002;
/// `ce_cpuver` of the Pentium Pro with MMX and II (not emulated).
pub const CPC_PENTIUM_PRO_MMX: c_int = 2003;
/// perfcompat's `ce_cpuver` of the Pentium 4 (`sim:pentium4`), which had no version 1 on
/// Solaris.
pub const CPC_PENTIUM4: c_int = 2004;
/// perfcompat's `ce_cpuver` of this host's perf_event counters.
pub const CPC_PERFCOMPAT_HOST: c_int = 9000;
/// perfcompat's `ce_cpuver` of the other emulated models: this plus the model's place in
/// `PERFCOMPAT_BACKEND`'s list (r10000 0, r12000 1, ev4 5, ev5 6, ppc750 7, ppc7450 8).
pub const CPC_PERFCOMPAT_SIM_BASE: c_int = 9100;

/// The UltraSPARC %pcr's user-mode bit, as a bit number (Solaris's `<sys/cpc_event.h>`,
/// which `<libcpc.h>` brought in): `ce_pcr & (1 << CPC_ULTRA_PCR_USR)`. `ce_pcr` holds a
/// %pcr image on the UltraSPARC models (`CPC_ULTRA1`, `CPC_ULTRA2`, `CPC_ULTRA3_PLUS`).
pub const CPC_ULTRA_PCR_USR: c_int = 2;
/// The %pcr's system-mode bit, as a bit number.
pub const CPC_ULTRA_PCR_SYS: c_int = 1;
/// The %pcr's privileged-PIC bit, as a bit number (never set in the images made here).
pub const CPC_ULTRA_PCR_PRIVPIC: c_int = 0;
/// Where PIC0's event select starts in the %pcr.
pub const CPC_ULTRA_PCR_PIC0_SHIFT: c_int = 4;
/// Where PIC1's event select starts in the %pcr.
pub const CPC_ULTRA_PCR_PIC1_SHIFT: c_int = 11;
/// PIC0's event select on the UltraSPARC I and II, after the shift.
pub const CPC_ULTRA2_PCR_PIC0_MASK: u64 = 0xf;
/// PIC1's event select on the UltraSPARC I and II, after the shift.
pub const CPC_ULTRA2_PCR_PIC1_MASK: u64 = 0xf;
/// PIC0's event select on the UltraSPARC III and later, after the shift.
pub const CPC_ULTRA3_PCR_PIC0_MASK: u64 = 0x3f;
/// PIC1's event select on the UltraSPARC III and later, after the shift.
pub const CPC_ULTRA3_PCR_PIC1_MASK: u64 = 0x3f;

const _: () = assert!(
    CPC_ULTRA_PCR_USR as u32 == engine_v1::CPC_ULTRA_PCR_USR
        && CPC_ULTRA_PCR_SYS as u32 == engine_v1::CPC_ULTRA_PCR_SYS
        && CPC_ULTRA_PCR_PRIVPIC as u32 == engine_v1::CPC_ULTRA_PCR_PRIVPIC
        && CPC_ULTRA_PCR_PIC0_SHIFT as u32 == engine_v1::CPC_ULTRA_PCR_PIC0_SHIFT
        && CPC_ULTRA_PCR_PIC1_SHIFT as u32 == engine_v1::CPC_ULTRA_PCR_PIC1_SHIFT
        && CPC_ULTRA2_PCR_PIC0_MASK == engine_v1::CPC_ULTRA2_PCR_PIC_MASK as u64
        && CPC_ULTRA2_PCR_PIC1_MASK == engine_v1::CPC_ULTRA2_PCR_PIC_MASK as u64
        && CPC_ULTRA3_PCR_PIC0_MASK == engine_v1::CPC_ULTRA3_PCR_PIC_MASK as u64
        && CPC_ULTRA3_PCR_PIC1_MASK == engine_v1::CPC_ULTRA3_PCR_PIC_MASK as u64
);

const _: () = assert!(
    CPC_ULTRA1 == engine_v1::CPC_ULTRA1
        && CPC_ULTRA2 == engine_v1::CPC_ULTRA2
        && CPC_ULTRA3 == engine_v1::CPC_ULTRA3
        && CPC_ULTRA3_PLUS == engine_v1::CPC_ULTRA3_PLUS
        && CPC_PENTIUM4 == engine_v1::CPC_PENTIUM4
        && CPC_PERFCOMPAT_HOST == engine_v1::CPC_PERFCOMPAT_HOST
        && CPC_PERFCOMPAT_SIM_BASE == engine_v1::CPC_PERFCOMPAT_SIM_BASE
);

/// The control fields of a `cpc_event_t`: `ce_pes[2]` (x86) and `ce_pcr` (SPARC) are the
/// same 8 bytes; `libcpc.h` names them `ce_pes`, `ce_pcr` and `ce_cesr` (`ce_pes[0]`) with
/// macros. Portable programs do not read them (cpc_event(3CPC)). On the UltraSPARC models
/// they hold a %pcr image; elsewhere each 32-bit half numbers one PIC's request in a table of
/// the process (the engine's `perfcompat::cpc::v1` says more).
#[repr(C)]
#[derive(Clone, Copy)]
pub union cpc_event_ctl_t {
    /// x86's two event-select registers.
    pub pes: [u32; 2],
    /// SPARC's performance control register.
    pub pcr: u64,
}

/// A version 1 event and its sample (cpc_event(3CPC)): the x86 layout, with SPARC's names as
/// macros (`ce_tick` is `ce_tsc`, `ce_pcr` shares `ce_pes`'s bytes), 48 bytes on every
/// 64-bit target. Programs declare it themselves.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct cpc_event_t {
    /// The processor (`cpc_getcpuver`) the event was made for.
    pub ce_cpuver: c_int,
    /// When the counters were sampled (`gethrtime`'s time base: `CLOCK_MONOTONIC` ns).
    pub ce_hrt: hrtime_t,
    /// Cycles the counted thread ran since the bind (`cpc_buf_tick`'s clock).
    pub ce_tsc: u64,
    /// The two 64-bit counter values (presets at bind).
    pub ce_pic: [u64; 2],
    /// The control fields: what `cpc_strtoevent` made.
    pub ce_ctl: cpc_event_ctl_t,
}

const _: () =
    assert!(std::mem::size_of::<cpc_event_t>() == 48 || cfg!(target_pointer_width = "32"));

/// The error function type (`cpc_errfn_t`): declared in the header by hand, because its last
/// parameter is a `va_list`.
pub type cpc_errfn_t = c_void;

pub(crate) use engine_v1::{V1Error, V1Result};

/// The body of a version 1 export named `func` (without `cpc_`): inside the panic boundary,
/// its result, or `failed` after the error function is told. Async-signal-safe when `f` is.
#[inline]
pub(crate) fn v1<T>(func: &CStr, failed: T, f: impl FnOnce() -> V1Result<T>) -> T {
    crate::ffi_boundary(func.to_str().unwrap_or("libcpc"), || match f() {
        Ok(v) => v,
        Err(e) => {
            tell(func, &e);
            failed
        }
    })
}

#[cold]
fn tell(func: &CStr, e: &V1Error) {
    match e {
        V1Error::Text(m, errno) => errfn::report(func, m, *errno),
        V1Error::Engine(e) => errfn::report(func, e, e.errno()),
        V1Error::Quiet(errno) => crate::edge::set_errno(*errno),
    }
}

/// The error of a NULL pointer argument.
pub(crate) fn null(what: &str) -> V1Error {
    V1Error::Text(format!("NULL {what}\n"), libc::EINVAL)
}

/// `p` as a reference, or the error of a NULL `what`.
///
/// # Safety
/// `p` is NULL or valid for the returned lifetime.
pub(crate) unsafe fn arg<'a, T>(p: *mut T, what: &str) -> V1Result<&'a mut T> {
    // SAFETY: as the caller promises.
    unsafe { p.as_mut() }.ok_or_else(|| null(what))
}

/// The control words of `ev` (see [`perfcompat::api::cpc::v1::encode`]): the low and high
/// halves of the 64-bit view.
pub(crate) fn ctl(ev: &cpc_event_t) -> [u32; 2] {
    // SAFETY: both views are plain integers over the same 8 bytes.
    let v = unsafe { ev.ce_ctl.pcr };
    [v as u32, (v >> 32) as u32]
}

/// Store control words in `ev`.
pub(crate) fn set_ctl(ev: &mut cpc_event_t, w: [u32; 2]) {
    ev.ce_ctl.pcr = u64::from(w[0]) | u64::from(w[1]) << 32;
}

/// The process's backend, if one can be opened.
fn current() -> Option<&'static dyn perfcompat::backend::Backend> {
    perfcompat::backend::global().ok()
}

/// The backend that describes `cpuver`, or the error for an unknown one.
pub(crate) fn backend_of(cpuver: c_int) -> V1Result<&'static dyn perfcompat::backend::Backend> {
    engine_v1::backend_for(cpuver, current()).ok_or_else(|| {
        let now = current().map_or(-1, |b| engine_v1::cpuver(b.shape_unmeasured().kind));
        let what = match engine_v1::kind_of(cpuver) {
            // The host's perf counters, while this process counts on an emulated PMU.
            Some(_) => "cannot be described in this process",
            None => "is not a processor this library knows",
        };
        V1Error::Text(
            format!(
                "cpuver {cpuver} {what} (this process counts on cpuver {now}: see \
                 cpc_getcpuver)\n"
            ),
            libc::EINVAL,
        )
    })
}

/// Strings handed out for a cpuver, kept for the process's life: (cpuver, which, string).
static STRINGS: Mutex<Vec<(c_int, u8, &'static CStr)>> = Mutex::new(Vec::new());

/// The string `which` of `cpuver`, made once by `make`.
fn kept(cpuver: c_int, which: u8, make: impl FnOnce() -> String) -> *const c_char {
    let mut s = STRINGS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, _, c)) = s.iter().find(|(v, w, _)| *v == cpuver && *w == which) {
        return c.as_ptr();
    }
    let c: &'static CStr = Box::leak(
        CString::new(make().replace('\0', " "))
            .unwrap_or_default()
            .into_boxed_c_str(),
    );
    s.push((cpuver, which, c));
    c.as_ptr()
}

/// Say which version of the interface the program was built for (cpc_version(3CPC)).
///
/// # Returns
/// `version` when it is supported (1, and 2: `CPC_VER_CURRENT`, both served by this library),
/// the current version (2) for `CPC_VER_NONE`, else `CPC_VER_NONE`.
#[no_mangle]
pub extern "C" fn cpc_version(version: uint_t) -> uint_t {
    match version {
        0 => CPC_VER_CURRENT as uint_t,
        1 | 2 => version,
        _ => CPC_VER_NONE,
    }
}

/// The processor this process counts on, as a `ce_cpuver` number (cpc_getcpuver(3CPC)):
/// `CPC_ULTRA2` on `sim:ultrasparc2`, `CPC_ULTRA3_PLUS` on `sim:ultrasparc`, `CPC_PENTIUM4` on
/// `sim:pentium4`, `CPC_PERFCOMPAT_HOST` on perf.
///
/// # Returns
/// The number, or -1 (with the backend's `errno`) when no counters can be used.
#[no_mangle]
pub extern "C" fn cpc_getcpuver() -> c_int {
    crate::ffi_boundary("cpc_getcpuver", || match perfcompat::backend::global() {
        Ok(b) => engine_v1::cpuver(b.shape_unmeasured().kind),
        Err(e) => {
            crate::edge::set_errno(e.errno());
            -1
        }
    })
}

/// The name of `cpuver`'s counter interface, e.g. "UltraSPARC I&II" (cpc_getcpuver(3CPC)).
///
/// # Returns
/// A string the library keeps, or NULL with `errno` `EINVAL` (and a message) for an unknown
/// cpuver.
#[no_mangle]
pub extern "C" fn cpc_getcciname(cpuver: c_int) -> *const c_char {
    v1(c"getcciname", std::ptr::null(), || {
        let b = backend_of(cpuver)?;
        Ok(kept(cpuver, 0, || b.info().description.clone()))
    })
}

/// Where `cpuver`'s events are documented (cpc_getcpuver(3CPC)); may be longer than 80
/// characters.
///
/// # Returns
/// A string the library keeps, or NULL with `errno` `EINVAL` (and a message) for an unknown
/// cpuver.
#[no_mangle]
pub extern "C" fn cpc_getcpuref(cpuver: c_int) -> *const c_char {
    v1(c"getcpuref", std::ptr::null(), || {
        let b = backend_of(cpuver)?;
        Ok(kept(cpuver, 1, || b.info().reference.clone()))
    })
}

/// The syntax `cpc_strtoevent` takes for `cpuver`, as space-separated tokens
/// (cpc_getcpuver(3CPC)).
///
/// # Returns
/// A string the library keeps, or NULL with `errno` `EINVAL` (and a message) for an unknown
/// cpuver.
#[no_mangle]
pub extern "C" fn cpc_getusage(cpuver: c_int) -> *const c_char {
    v1(c"getusage", std::ptr::null(), || {
        let b = backend_of(cpuver)?;
        Ok(kept(cpuver, 2, || engine_v1::usage(cpuver, b)))
    })
}

/// The number of valid `ce_pic` fields of `cpuver`'s events: 2 (cpc_getcpuver(3CPC)).
///
/// # Returns
/// 2, or 0 with `errno` `EINVAL` (and a message) for an unknown cpuver.
#[no_mangle]
pub extern "C" fn cpc_getnpic(cpuver: c_int) -> uint_t {
    v1(c"getnpic", 0, || {
        backend_of(cpuver)?;
        Ok(engine_v1::NPIC as uint_t)
    })
}

/// Call `action(arg, regno, name, bits)` for every event PIC `regno` (0 or 1) of `cpuver` can
/// count, with its event-select bits (the %pcr field on the UltraSPARC, the first counter's
/// select code on the other emulated models, 0 on perf); see cpc_getcpuver(3CPC). An unknown
/// cpuver or PIC, or a NULL `action`, calls nothing (silently, as the page says; `errno` is
/// `EINVAL`).
///
/// # Safety
/// `action` is NULL or a function of this type.
#[no_mangle]
pub unsafe extern "C" fn cpc_walk_names(
    cpuver: c_int,
    regno: c_int,
    arg: *mut c_void,
    action: Option<
        unsafe extern "C" fn(arg: *mut c_void, regno: c_int, name: *const c_char, bits: u8),
    >,
) {
    crate::ffi_boundary("cpc_walk_names", || {
        let (Some(b), Some(f)) = (engine_v1::backend_for(cpuver, current()), action) else {
            return crate::edge::set_errno(libc::EINVAL);
        };
        for (name, bits) in engine_v1::names(cpuver, b, regno) {
            let name = CString::new(name).unwrap_or_default();
            // SAFETY: the program's callback.
            unsafe { f(arg, regno, name.as_ptr(), bits) };
        }
    })
}

/// Translate event specification `spec` (e.g. `"pic0=EC_ref,pic1=EC_hit,sys"`) for `cpuver`
/// into `event`: its `ce_cpuver` and control fields set, the rest 0 (cpc_strtoevent(3CPC);
/// the syntax is in `cpc_getusage` and in the engine's `perfcompat::cpc::v1::parse`).
///
/// # Returns
/// 0, or -1 with `errno` `EINVAL` and the reason told to the error function
/// (`cpc_seterrfn`): a NULL argument, an unknown cpuver, and libcpc's messages for the
/// specification (`"%pic0 cannot measure event 'X' on this cpu"`, `"two events must be
/// specified"`, `"bad token 'X'"`...).
///
/// # Safety
/// `spec` is NULL or a string; `event` is NULL or points to a `cpc_event_t`.
#[no_mangle]
pub unsafe extern "C" fn cpc_strtoevent(
    cpuver: c_int,
    spec: *const c_char,
    event: *mut cpc_event_t,
) -> c_int {
    v1(c"strtoevent", -1, || {
        // SAFETY: the caller's promises.
        let (ev, spec) = unsafe { (arg(event, "cpc_event_t")?, spec.as_ref()) };
        let spec = spec.ok_or_else(|| null("event specification"))?;
        // SAFETY: a string, per the caller.
        let spec = unsafe { CStr::from_ptr(spec) }.to_string_lossy();
        // SAFETY: all-zero bytes are a valid cpc_event_t.
        *ev = unsafe { std::mem::zeroed() };
        ev.ce_cpuver = cpuver;
        let parsed = engine_v1::parse(cpuver, backend_of(cpuver)?, &spec)?;
        set_ctl(ev, engine_v1::encode(&parsed));
        Ok(0)
    })
}

/// The event `ev`'s control fields describe, for its `ce_cpuver`.
pub(crate) fn event_of(ev: &cpc_event_t) -> V1Result<engine_v1::Event> {
    Ok(engine_v1::decode(ev.ce_cpuver, ctl(ev))?)
}

/// The canonical specification of `event` (cpc_strtoevent(3CPC)): `pic0=A,pic1=B`, then
/// `nouser`, `sys` and attributes as `cpc_strtoevent` takes them.
///
/// # Returns
/// A string the caller frees with `free`, or NULL with `errno` `EINVAL` (and a message) for a
/// NULL event or control fields that do not describe one.
///
/// # Safety
/// `event` is NULL or points to a `cpc_event_t`.
#[no_mangle]
pub unsafe extern "C" fn cpc_eventtostr(event: *mut cpc_event_t) -> *mut c_char {
    v1(c"eventtostr", std::ptr::null_mut(), || {
        // SAFETY: the caller's promise.
        let ev = unsafe { arg(event, "cpc_event_t")? };
        let s = CString::new(engine_v1::to_spec(&event_of(ev)?)).unwrap_or_default();
        // SAFETY: strdup copies a NUL-terminated string into memory the caller frees.
        let p = unsafe { libc::strdup(s.as_ptr()) };
        if p.is_null() {
            return Err(V1Error::Text(
                "no memory for the string\n".into(),
                libc::ENOMEM,
            ));
        }
        Ok(p)
    })
}

/// Add `event`'s counts and ticks into `accum`, whose time becomes the later of the two
/// (cpc_event_diff(3CPC)). Counts add modulo 2^64. A NULL argument changes nothing
/// (`errno` `EINVAL` and a message).
///
/// # Safety
/// Each argument is NULL or points to a `cpc_event_t`.
#[no_mangle]
pub unsafe extern "C" fn cpc_event_accum(accum: *mut cpc_event_t, event: *mut cpc_event_t) {
    v1(c"event_accum", (), || {
        // SAFETY: the caller's promises; `accum` may be `event`.
        let e = *unsafe { arg(event, "event")? };
        let a = unsafe { arg(accum, "accum")? };
        a.ce_hrt = a.ce_hrt.max(e.ce_hrt);
        a.ce_tsc = a.ce_tsc.wrapping_add(e.ce_tsc);
        a.ce_pic = [0, 1].map(|i| a.ce_pic[i].wrapping_add(e.ce_pic[i]));
        Ok(())
    })
}

/// Set `diff`'s counts and ticks to `after`'s minus `before`'s and its time to `after`'s
/// (cpc_event_diff(3CPC)); differences modulo 2^64. A NULL argument changes nothing (`errno`
/// `EINVAL` and a message).
///
/// # Safety
/// Each argument is NULL or points to a `cpc_event_t`; `diff` may be one of the others.
#[no_mangle]
pub unsafe extern "C" fn cpc_event_diff(
    diff: *mut cpc_event_t,
    after: *mut cpc_event_t,
    before: *mut cpc_event_t,
) {
    v1(c"event_diff", (), || {
        // SAFETY: the caller's promises; copies, as `diff` may alias.
        let (a, b) = unsafe { (*arg(after, "after")?, *arg(before, "before")?) };
        let d = unsafe { arg(diff, "diff")? };
        d.ce_hrt = a.ce_hrt;
        d.ce_tsc = a.ce_tsc.wrapping_sub(b.ce_tsc);
        d.ce_pic = [0, 1].map(|i| a.ce_pic[i].wrapping_sub(b.ce_pic[i]));
        Ok(())
    })
}

/// Set the process's version 1 error function (NULL: the default, `libcpc: <fn>: <message>`
/// on standard error); see cpc_seterrfn(3CPC). It is called as `errfn(fn, fmt, ap)` with the
/// failing function's name without `cpc_` (`"strtoevent"`, `"bind_event"`...) and the message
/// as a format whose `ap` is empty; `errno` is preserved around it. Version 2's handles keep
/// their own handlers (`cpc_seterrhndlr`).
///
/// # Safety
/// `errfn` is NULL or a function of type `cpc_errfn_t`.
#[no_mangle]
pub unsafe extern "C" fn cpc_seterrfn(errfn: *mut cpc_errfn_t) {
    crate::ffi_boundary("cpc_seterrfn", || {
        // SAFETY: the caller passes a cpc_errfn_t (or NULL).
        let h =
            (!errfn.is_null()).then(|| unsafe { std::mem::transmute::<*mut c_void, ErrFn>(errfn) });
        errfn::set(h);
    })
}

/// Whether the counters can be used (cpc_access(3CPC)): the process's backend
/// (`PERFCOMPAT_BACKEND`) opens.
///
/// # Returns
/// 0, or -1 with `errno` `ENOSYS` and the message "CPU performance counters are inaccessible
/// on this machine" (no backend can be opened; `cpc_open` says why).
#[no_mangle]
pub extern "C" fn cpc_access() -> c_int {
    v1(c"access", -1, || match perfcompat::backend::global() {
        Ok(_) => Ok(0),
        Err(_) => Err(V1Error::Text(
            "CPU performance counters are inaccessible on this machine\n".into(),
            libc::ENOSYS,
        )),
    })
}
