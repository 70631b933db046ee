//! Fuzz body `event_spec`: every textual event or backend spec the library parses.
//!
//! The first byte picks what the rest is:
//! - 0: a `perfex -e` / `PERFCOMPAT_PRELOAD_EVENTS` list (`perfex::parse_event` on each
//!   comma-separated item): accepted items are exactly the integers 0..31;
//! - 1: a `PERFCOMPAT_BACKEND` value (`backend::from_name`): accepted values are exactly
//!   `""`, `auto`, `perf` and `sim:<model>`; also a raw sim code (`parse_c_integer`, which must
//!   agree with C's `strtoull(s, &end, 0)` consuming all of `s`) and a perf event name
//!   (`perf::names::parse`);
//! - otherwise: libcpc requests, through `cpc_set_add_request` on a `cpc_t` over one of the
//!   five emulated PMUs or perf (byte 1): event names of any bytes (non-UTF-8, over
//!   `CPC_MAX_EVENT_LEN`, up to 100 KiB), any preset and flags, up to three `cpc_attr_t` with
//!   any names and values. Each add returns the next index or -1 with `EINVAL`, and fails
//!   exactly when the engine's request check (`engine::check_request`) does, with its subcode;
//!   `cpc_walk_requests` gives back what was added (newest first, as libcpc); the set then binds or fails with a
//!   documented errno, and on an emulated PMU a bound set samples its presets.

use std::ffi::{c_char, c_int, c_uint, c_void, CStr, CString};
use std::sync::OnceLock;

use perfcompat::api::perfex;
use perfcompat::backend::perf::{names, PerfBackend};
use perfcompat::backend::sim::{parse_c_integer, SimBackend, MODEL_NAMES};
use perfcompat::backend::Backend;
use perfcompat::base::error::ErrorKind;
use perfcompat::{engine, Request, RequestFlags};
use perfcompat_capi::cpc::*;

use crate::fuzz_common::{errno, install_sigemt, quiet, set_errno, take_subcode, Reader};

/// The emulated PMUs, then perf (when it can be opened).
fn backends() -> &'static [&'static dyn Backend] {
    static B: OnceLock<Vec<&'static dyn Backend>> = OnceLock::new();
    B.get_or_init(|| {
        let mut v: Vec<&'static dyn Backend> = MODEL_NAMES
            .iter()
            .map(|m| &*Box::leak(Box::new(SimBackend::new(m).expect("a model"))) as &dyn Backend)
            .collect();
        if let Ok(p) = PerfBackend::new() {
            v.push(Box::leak(Box::new(p)));
        }
        v
    })
}

/// Run one input.
pub fn run(data: &[u8]) {
    let mut r = Reader::new(data);
    match r.u8() {
        0 => event_numbers(r.bytes(usize::MAX)),
        1 => backend_names(r.bytes(usize::MAX)),
        _ => requests(&mut r),
    }
}

fn event_numbers(bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    for item in text.split(',') {
        let want = item
            .trim()
            .parse::<i32>()
            .ok()
            .filter(|n| (0..32).contains(n));
        match perfex::parse_event(item) {
            Ok(n) => assert_eq!(Some(n as i32), want, "{item:?}"),
            Err(perfcompat::Error::InvalidArgument(m)) => {
                assert_eq!(want, None, "{item:?}: {m}")
            }
            Err(e) => panic!("{item:?}: {e:?}"),
        }
    }
}

fn backend_names(bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    let name = text.trim();
    let valid = matches!(name, "" | "auto" | "perf")
        || name
            .strip_prefix("sim:")
            .is_some_and(|m| MODEL_NAMES.contains(&m));
    match perfcompat::backend::from_name(name) {
        Ok(b) => {
            assert!(valid, "{name:?} accepted");
            let shown = b.info().kind.to_string();
            assert!(shown == "perf" || shown == name);
        }
        Err(e) => assert!(!valid || !name.starts_with("sim:"), "{name:?}: {e}"),
    }
    // A raw event code as strtoull(s, &end, 0) reads it, all of s consumed.
    let got = parse_c_integer(&text);
    if let Ok(c) = CString::new(text.trim()) {
        let mut end: *mut c_char = std::ptr::null_mut();
        set_errno(0);
        // SAFETY: a NUL-terminated string and a valid end pointer.
        let v = unsafe { libc::strtoull(c.as_ptr(), &mut end, 0) };
        let e = errno();
        // SAFETY: strtoull leaves `end` inside the string.
        let consumed = unsafe { end.offset_from(c.as_ptr()) } as usize == c.as_bytes().len();
        let sign = c
            .as_bytes()
            .first()
            .is_some_and(|b| *b == b'-' || *b == b'+');
        // C also takes a sign and leading blanks after it; we take neither.
        if !sign && c.as_bytes().first().is_some_and(u8::is_ascii_digit) {
            let want = (consumed && e == 0).then_some(v);
            assert_eq!(got, want, "parse_c_integer({:?})", text.trim());
        }
    }
    if let Some(c) = got {
        // Whatever it read, it reads its own decimal and hex spellings the same.
        assert_eq!(parse_c_integer(&c.to_string()), Some(c));
        assert_eq!(parse_c_integer(&format!("{c:#x}")), Some(c));
    }
    // A perf event name, against the real sysfs.
    let _ = names::parse(&text, std::path::Path::new(names::SYSFS));
}

/// An event name from the input: up to 255 bytes, or those bytes repeated to up to 100 KiB.
fn event_name(r: &mut Reader) -> Vec<u8> {
    let len = r.u8();
    let mut name: Vec<u8> = r.bytes(usize::from(len & 0x7f)).to_vec();
    if len & 0x80 != 0 && !name.is_empty() {
        let target = usize::from(r.u8()) * 400;
        while name.len() < target {
            name.extend_from_within(..name.len().min(target - name.len()));
        }
    }
    name.retain(|&b| b != 0);
    name
}

struct Walked {
    reqs: Vec<(c_int, Vec<u8>, u64, c_uint, c_int)>,
}

unsafe extern "C" fn walk(
    arg: *mut c_void,
    index: c_int,
    event: *const c_char,
    preset: u64,
    flags: c_uint,
    nattrs: c_int,
    _attrs: *const cpc_attr_t,
) {
    // SAFETY: `arg` is the Walked passed below; the event is a string.
    let w = unsafe { &mut *(arg as *mut Walked) };
    // SAFETY: as above.
    let ev = unsafe { CStr::from_ptr(event) }.to_bytes().to_vec();
    w.reqs.push((index, ev, preset, flags, nattrs));
}

/// The engine request `cpc_set_add_request` checks for these arguments (what the model
/// expects), or the subcode of the error found before the engine is asked.
fn expected(
    event: &[u8],
    preset: u64,
    flags: c_uint,
    attrs: &[(Vec<u8>, u64)],
) -> Result<Request, c_int> {
    if event.is_empty() {
        return Err(CPC_INVALID_EVENT);
    }
    let mut req = Request::new(std::str::from_utf8(event).map_err(|_| CPC_INVALID_EVENT)?)
        .preset(preset)
        .flags(RequestFlags {
            user: flags & CPC_COUNT_USER != 0,
            system: flags & CPC_COUNT_SYSTEM != 0,
            hypervisor: flags & CPC_COUNT_HV != 0,
            notify_overflow: flags & CPC_OVF_NOTIFY_EMT != 0,
        });
    for (name, v) in attrs {
        // Names are cut at CPC_MAX_ATTR_LEN - 1 bytes, as libcpc does.
        let name = &name[..name.len().min(CPC_MAX_ATTR_LEN as usize - 1)];
        let name = String::from_utf8_lossy(name);
        if name == "picnum" {
            req = req.on_counter(u32::try_from(*v).unwrap_or(u32::MAX));
        } else {
            req = req.attr(name.into_owned(), *v);
        }
    }
    Ok(req)
}

fn subcode_of(k: ErrorKind) -> c_int {
    match k {
        ErrorKind::InvalidEvent => CPC_INVALID_EVENT,
        ErrorKind::InvalidPicnum => CPC_INVALID_PICNUM,
        ErrorKind::InvalidAttribute => CPC_INVALID_ATTRIBUTE,
        ErrorKind::AttributeOutOfRange => CPC_ATTRIBUTE_OUT_OF_RANGE,
        ErrorKind::ResourceUnavailable => CPC_RESOURCE_UNAVAIL,
        ErrorKind::PicNotCapable => CPC_PIC_NOT_CAPABLE,
        ErrorKind::InvalidFlags => CPC_REQ_INVALID_FLAGS,
        ErrorKind::ConflictingRequests => CPC_CONFLICTING_REQS,
        ErrorKind::RequiresPrivilege => CPC_ATTR_REQUIRES_PRIVILEGE,
        ErrorKind::PbindFailed => CPC_PBIND_FAILED,
        ErrorKind::Other => -1,
    }
}

const ATTR_NAMES: [&[u8]; 7] = [
    b"picnum",
    b"emask",
    b"tag",
    b"nouser",
    b"cmask",
    b"edge",
    b"int_every",
];

fn requests(r: &mut Reader) {
    install_sigemt();
    let all = backends();
    let backend = all[usize::from(r.u8()) % all.len()];
    let is_sim = backend.info().kind.is_emulated();
    let cpc = cpc_open_on(backend);
    assert!(!cpc.is_null());
    quiet(cpc);
    let set = cpc_set_create(cpc);
    assert!(!set.is_null());
    let mut added: Vec<(Vec<u8>, u64, c_uint, c_int)> = Vec::new();
    for _ in 0..4 {
        if r.is_empty() {
            break;
        }
        let flags = match r.u8() % 4 {
            0 => CPC_COUNT_USER,
            1 => CPC_COUNT_USER | CPC_OVF_NOTIFY_EMT,
            2 => CPC_COUNT_USER | CPC_COUNT_SYSTEM,
            _ => r.u32(),
        };
        let preset = r.count();
        let nattrs = usize::from(r.u8() % 4);
        let mut attrs: Vec<(Vec<u8>, u64)> = Vec::new();
        for _ in 0..nattrs {
            let sel = r.u8();
            let name = if sel < 0xc0 {
                ATTR_NAMES[usize::from(sel) % ATTR_NAMES.len()].to_vec()
            } else {
                let n = r.u8();
                let mut v = r.bytes(usize::from(n % 64)).to_vec();
                v.retain(|&b| b != 0);
                v
            };
            let val = match r.u8() % 3 {
                0 => u64::from(r.u8() % 4),
                1 => u64::from(r.u8()),
                _ => r.u64(),
            };
            attrs.push((name, val));
        }
        let event = event_name(r);
        let cname = CString::new(event.clone()).expect("no NUL");
        let cattr_names: Vec<CString> = attrs
            .iter()
            .map(|(n, _)| CString::new(n.clone()).expect("no NUL"))
            .collect();
        let cattrs: Vec<cpc_attr_t> = cattr_names
            .iter()
            .zip(&attrs)
            .map(|(n, (_, v))| cpc_attr_t {
                ca_name: n.as_ptr() as *mut c_char,
                ca_val: *v,
            })
            .collect();
        take_subcode();
        set_errno(0);
        // SAFETY: valid strings and an array of `nattrs` attributes.
        let got = unsafe {
            cpc_set_add_request(
                cpc,
                set,
                cname.as_ptr(),
                preset,
                flags,
                cattrs.len() as c_uint,
                if cattrs.is_empty() {
                    std::ptr::null()
                } else {
                    cattrs.as_ptr()
                },
            )
        };
        let (e, sub) = (errno(), take_subcode());
        let want = expected(&event, preset, flags, &attrs)
            .and_then(|req| engine::check_request(backend, &req).map_err(|e| subcode_of(e.kind())));
        let name = String::from_utf8_lossy(&event[..event.len().min(80)]).into_owned();
        match want {
            Ok(_) => {
                assert_eq!(got, added.len() as c_int, "add {name:?}: errno {e}");
                added.push((event, preset, flags, attrs.len() as c_int));
            }
            Err(want_sub) => {
                assert_eq!(got, -1, "add {name:?} should fail");
                assert_eq!(e, libc::EINVAL, "add {name:?}");
                assert_eq!(sub, want_sub, "add {name:?}: subcode");
            }
        }
    }
    // The set holds what was added, in order.
    let mut w = Walked { reqs: Vec::new() };
    // SAFETY: live handles, a callback of the right type and its argument.
    unsafe { cpc_walk_requests(cpc, set, &mut w as *mut Walked as *mut c_void, Some(walk)) };
    assert_eq!(w.reqs.len(), added.len());
    // libcpc walks the newest request first.
    assert!(w.reqs.windows(2).all(|p| p[0].0 > p[1].0), "walk order");
    w.reqs.reverse();
    for (i, ((index, ev, preset, flags, nattrs), want)) in w.reqs.iter().zip(&added).enumerate() {
        assert_eq!(*index, i as c_int);
        assert_eq!(
            (ev, *preset, *flags, *nattrs),
            (&want.0, want.1, want.2, want.3)
        );
    }
    // Bind-time checks: flags, attribute values, placement.
    set_errno(0);
    let bound = cpc_bind_curlwp(cpc, set, 0);
    let e = errno();
    take_subcode();
    if bound == 0 {
        assert!(!added.is_empty(), "an empty set bound");
        let buf = cpc_buf_create(cpc, set);
        assert!(!buf.is_null());
        assert_eq!(cpc_set_sample(cpc, set, buf), 0);
        if is_sim {
            // Nothing was injected: each request reads its preset.
            for (i, a) in added.iter().enumerate() {
                let mut v = 0u64;
                // SAFETY: a valid out-pointer.
                assert_eq!(unsafe { cpc_buf_get(cpc, buf, i as c_int, &mut v) }, 0);
                assert_eq!(v, a.1, "request {i} after bind");
            }
        }
        assert_eq!(cpc_unbind(cpc, set), 0);
    } else {
        assert_eq!(bound, -1);
        let documented = [
            libc::EINVAL,
            libc::ENOTSUP,
            libc::EACCES,
            libc::ENOENT,
            libc::EOPNOTSUPP,
        ];
        assert!(documented.contains(&e), "bind: errno {e}");
        if added.iter().any(|a| a.2 & !0xf != 0) {
            assert_eq!(e, libc::EINVAL, "bind with unknown request flags");
        }
    }
    // SAFETY: the handle is live and not used afterwards.
    assert_eq!(unsafe { cpc_close(cpc) }, 0);
}
