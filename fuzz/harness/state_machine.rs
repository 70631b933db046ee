//! Fuzz body `state_machine`: random sequences of libcpc and libperfex C calls on the emulated
//! R10000 (`PERFCOMPAT_BACKEND=sim:r10000`), against a model of what each call must do.
//!
//! Each input is a list of operations (one selector byte, then its arguments): open and close
//! `cpc_t`s; create and destroy sets and buffers; add requests (six events, presets near the
//! wrap, each request flag, `picnum`); bind (with and without `CPC_BIND_LWP_INHERIT`, with
//! bad flags), unbind, sample, get/set/zero/copy/add/sub buffers, preset, restart, enable,
//! disable; inject events with `perfcompat_sim_advance` (known names, R10000 numbers, unknown
//! names); `start_counters`, `read_counters`, `print_counters`, `print_costs`, `load_costs`;
//! switch the SIGEMT handler between counting only and restarting the set. Handles are picked
//! among live, destroyed and another `cpc_t`'s ones.
//!
//! Checked after every call:
//! - the return value and `errno` are the documented ones (stale, destroyed or foreign handles:
//!   `EINVAL`), with the model's subcode where libcpc has one;
//! - a sample equals presets plus injected events modulo 2^64, exactly, so counts never go
//!   backwards between restarts;
//! - a request with `CPC_OVF_NOTIFY_EMT` freezes the set at the exact event and one SIGEMT is
//!   delivered; a frozen set samples the same values and the same time until it is restarted
//!   (or enabled) and drops the events injected meanwhile;
//! - libperfex: `start_counters` returns a new generation each time; `read_counters`,
//!   `print_counters`, `print_costs` and `load_costs` return the one of the last start; the
//!   counts are the events injected since that start.

use std::ffi::{c_int, CString};
use std::sync::atomic::Ordering;
use std::sync::OnceLock;

use perfcompat_capi::cpc::*;
use perfcompat_capi::perfex::{
    load_costs, print_costs, print_counters, read_counters, start_counters,
};
use perfcompat_capi::sim::perfcompat_sim_advance;

use crate::fuzz_common::*;

/// The events the model knows: R10000 name, the counters that can count it, the R10000 numbers
/// that name it.
const EVENTS: [(&str, u32, &[i32]); 6] = [
    ("cycles", 0b11, &[0, 16]),
    ("graduated_instructions", 0b11, &[15, 17]),
    ("tlb_misses", 0b10, &[23]),
    ("primary_data_cache_misses", 0b10, &[25]),
    ("decoded_branches", 0b01, &[6]),
    ("failed_store_conditionals", 0b01, &[5]),
];

/// Event numbers `start_counters` is given: the model's, others, and bad ones.
const NUMBERS: [i32; 16] = [0, 16, 15, 17, 23, 25, 6, 5, 26, 3, 31, 1, 32, -1, 18, 9];

/// The model event an R10000 number counts, if it is one of the model's.
fn event_of_number(n: i32) -> Option<usize> {
    EVENTS.iter().position(|e| e.2.contains(&n))
}

/// Request flags the requests are given.
const FLAGS: [u32; 8] = [
    CPC_COUNT_USER,
    CPC_COUNT_USER | CPC_OVF_NOTIFY_EMT,
    CPC_COUNT_USER | CPC_OVF_NOTIFY_EMT,
    CPC_COUNT_USER | CPC_COUNT_SYSTEM,
    CPC_COUNT_SYSTEM,
    0,
    CPC_COUNT_SYSTEM | CPC_OVF_NOTIFY_EMT,
    CPC_COUNT_USER | 0x10,
];

struct MCpc {
    ptr: *mut cpc_t,
    live: bool,
}

#[derive(Clone)]
struct MReq {
    event: usize,
    preset: u64,
    flags: u32,
    /// Its `picnum`, if pinned.
    pin: Option<u64>,
}

impl MReq {
    fn counts(&self, ev: usize) -> bool {
        self.event == ev && self.flags & CPC_COUNT_USER != 0
    }
    fn notify(&self) -> bool {
        self.flags & CPC_OVF_NOTIFY_EMT != 0
    }
}

struct MBound {
    vals: Vec<u64>,
    presets: Vec<u64>,
    armed: Vec<bool>,
    frozen: bool,
    /// The time the samples of the current freeze showed, once sampled.
    frozen_hrtime: Option<i64>,
    last_hrtime: i64,
}

struct MSet {
    ptr: *mut cpc_set_t,
    cpc: usize,
    live: bool,
    reqs: Vec<MReq>,
    bound: Option<MBound>,
}

struct MBuf {
    ptr: *mut cpc_buf_t,
    cpc: usize,
    live: bool,
    vals: Vec<u64>,
}

struct MPair {
    events: (i32, i32),
    raw: [u64; 2],
    origin: [u64; 2],
    started: bool,
    generation: c_int,
}

#[derive(Default)]
struct Model {
    cpcs: Vec<MCpc>,
    sets: Vec<MSet>,
    bufs: Vec<MBuf>,
    /// The set this thread bound last, while bound: what preset, restart, enable and disable
    /// act on.
    current: Option<usize>,
    pair: Option<MPair>,
    last_generation: c_int,
    /// Whether the SIGEMT handler restarts the set.
    restart_in_handler: bool,
}

fn cost_file() -> &'static CString {
    static F: OnceLock<CString> = OnceLock::new();
    F.get_or_init(|| {
        let p = std::env::temp_dir().join(format!("perfcompat-fuzz-{}.costs", std::process::id()));
        std::fs::write(&p, "clock 250 MHz\n25 1 0.5 30 clks\n").expect("a temp file");
        CString::new(p.into_os_string().into_encoded_bytes()).expect("a path")
    })
}

/// Check a failed call: -1 (or what `failed` is) with `errno` `EINVAL`.
macro_rules! einval {
    ($got:expr, $failed:expr, $($what:tt)+) => {{
        let (got, e) = ($got, errno());
        assert_eq!(got, $failed, $($what)+);
        assert_eq!(e, libc::EINVAL, $($what)+);
    }};
}

impl Model {
    fn cpc_ptr(&self, i: usize) -> *mut cpc_t {
        self.cpcs.get(i).map_or(std::ptr::null_mut(), |c| c.ptr)
    }
    fn cpc_live(&self, i: usize) -> bool {
        self.cpcs.get(i).is_some_and(|c| c.live)
    }
    fn any_live_cpc(&self, pick: u8) -> usize {
        // Mostly a live handle; otherwise whatever index `pick` gives (may be stale or NULL).
        if pick & 3 != 0 {
            if let Some(i) = self.cpcs.iter().position(|c| c.live) {
                return i;
            }
        }
        usize::from(pick >> 2) % (self.cpcs.len() + 1)
    }
    /// A set index and the cpc index passed with it (its own, or another by `pick`).
    fn pick_set(&self, r: &mut Reader) -> Option<(usize, usize)> {
        if self.sets.is_empty() {
            return None;
        }
        let s = usize::from(r.u8()) % self.sets.len();
        let pick = r.u8();
        let c = if pick < 0xe0 {
            self.sets[s].cpc
        } else {
            usize::from(pick) % (self.cpcs.len() + 1)
        };
        Some((s, c))
    }
    fn pick_buf(&self, r: &mut Reader) -> Option<usize> {
        (!self.bufs.is_empty()).then(|| usize::from(r.u8()) % self.bufs.len())
    }
    /// Whether set `s` passed with cpc `c` is accepted as a live set of a live handle.
    fn set_ok(&self, s: usize, c: usize) -> bool {
        let set = &self.sets[s];
        set.live && self.cpc_live(c) && self.cpcs[c].ptr == self.cpcs[set.cpc].ptr
    }
    fn buf_ok(&self, b: usize, c: usize) -> bool {
        let buf = &self.bufs[b];
        buf.live && self.cpc_live(c) && self.cpcs[c].ptr == self.cpcs[buf.cpc].ptr
    }
    fn unbind(&mut self, s: usize) {
        self.sets[s].bound = None;
        if self.current == Some(s) {
            self.current = None;
        }
    }
    fn check_generation_unchanged(&self, got: c_int, what: &str) {
        assert!(got > 0, "{what}: {got}");
        if let Some(p) = &self.pair {
            assert_eq!(
                got, p.generation,
                "{what}: the generation changed without a start"
            );
        }
    }
}

/// Whether requests with these counter masks can all be placed on the R10000's two counters.
fn placeable(masks: &[u32]) -> bool {
    match masks {
        [] => false,
        [a] => *a != 0,
        [a, b] => (a & 1 != 0 && b & 2 != 0) || (a & 2 != 0 && b & 1 != 0),
        _ => false,
    }
}

/// Inject `n` events `ev` into bound set `b` (the model of the emulated PMU and the engine):
/// returns whether the set counts the event, and the SIGEMTs it sends.
fn inject(b: &mut MBound, reqs: &[MReq], ev: usize, mut n: u64, restart: bool) -> (bool, u64) {
    let k: Vec<usize> = (0..reqs.len()).filter(|&i| reqs[i].counts(ev)).collect();
    if k.is_empty() {
        return (false, 0);
    }
    let mut signals = 0;
    while n > 0 && !b.frozen {
        let d = k
            .iter()
            .filter(|&&i| b.armed[i])
            .map(|&i| b.vals[i].wrapping_neg())
            .min();
        match d {
            Some(d) if d <= n => {
                for &i in &k {
                    b.vals[i] = b.vals[i].wrapping_add(d);
                }
                n -= d;
                b.frozen = true;
                b.frozen_hrtime = None;
                signals += 1;
                if restart {
                    restart_bound(b, reqs);
                }
            }
            _ => {
                for &i in &k {
                    b.vals[i] = b.vals[i].wrapping_add(n);
                }
                n = 0;
            }
        }
    }
    (true, signals)
}

fn restart_bound(b: &mut MBound, reqs: &[MReq]) {
    b.vals = b.presets.clone();
    b.armed = reqs
        .iter()
        .zip(&b.presets)
        .map(|(r, &p)| r.notify() && p != 0)
        .collect();
    b.frozen = false;
}

/// Run one input.
pub fn run(data: &[u8]) {
    use_backend("sim:r10000");
    install_sigemt();
    let mut r = Reader::new(data);
    let mut m = Model::default();
    RESTART_CPC.store(std::ptr::null_mut(), Ordering::SeqCst);
    // A clean libperfex state for this thread: a start that fails at bind drops the pair.
    assert_eq!(start_counters(0, 1), -1);
    for _ in 0..256 {
        if r.is_empty() {
            break;
        }
        step(&mut m, &mut r);
    }
    RESTART_CPC.store(std::ptr::null_mut(), Ordering::SeqCst);
    for c in &m.cpcs {
        if c.live {
            // SAFETY: a live handle, not used afterwards.
            assert_eq!(unsafe { cpc_close(c.ptr) }, 0);
        }
    }
}

fn step(m: &mut Model, r: &mut Reader) {
    set_errno(0);
    take_subcode();
    let op = r.u8() % 26;
    match op {
        0 => {
            if m.cpcs.len() >= 3 {
                return;
            }
            let p = cpc_open(CPC_VER_CURRENT);
            assert!(!p.is_null(), "cpc_open");
            quiet(p);
            // A new handle may reuse a closed one's address: that one is live again.
            m.cpcs.retain(|c| c.ptr != p);
            m.cpcs.push(MCpc { ptr: p, live: true });
        }
        1 => {
            let c = usize::from(r.u8()) % (m.cpcs.len() + 1);
            let p = m.cpc_ptr(c);
            // SAFETY: a live, closed or NULL handle: the library checks it.
            let got = unsafe { cpc_close(p) };
            if m.cpc_live(c) {
                assert_eq!(got, 0, "cpc_close");
                m.cpcs[c].live = false;
                if RESTART_CPC.load(Ordering::SeqCst) == p {
                    // The handler's restart would fail on the closed handle: it only counts.
                    RESTART_CPC.store(std::ptr::null_mut(), Ordering::SeqCst);
                    m.restart_in_handler = false;
                }
                for s in 0..m.sets.len() {
                    if m.sets[s].cpc == c && m.sets[s].live {
                        m.sets[s].live = false;
                        m.unbind(s);
                    }
                }
                for b in m.bufs.iter_mut().filter(|b| b.cpc == c) {
                    b.live = false;
                }
            } else {
                einval!(got, -1, "cpc_close of a closed handle");
            }
        }
        2 => {
            if m.sets.len() >= 8 {
                return;
            }
            let c = m.any_live_cpc(r.u8());
            let p = cpc_set_create(m.cpc_ptr(c));
            if m.cpc_live(c) {
                assert!(!p.is_null(), "cpc_set_create");
                m.sets.retain(|s| s.ptr != p);
                m.sets.push(MSet {
                    ptr: p,
                    cpc: c,
                    live: true,
                    reqs: Vec::new(),
                    bound: None,
                });
            } else {
                einval!(p, std::ptr::null_mut(), "cpc_set_create on a closed handle");
            }
        }
        3 => {
            let Some((s, c)) = m.pick_set(r) else { return };
            // SAFETY: the library checks the handles.
            let got = unsafe { cpc_set_destroy(m.cpc_ptr(c), m.sets[s].ptr) };
            if m.set_ok(s, c) {
                assert_eq!(got, 0, "cpc_set_destroy");
                m.sets[s].live = false;
                m.unbind(s);
            } else {
                einval!(got, -1, "cpc_set_destroy of a bad set");
            }
        }
        4 | 5 => add_request(m, r),
        6 | 7 => bind(m, r),
        8 => {
            let Some((s, c)) = m.pick_set(r) else { return };
            let got = cpc_unbind(m.cpc_ptr(c), m.sets[s].ptr);
            if m.set_ok(s, c) && m.sets[s].bound.is_some() {
                assert_eq!(got, 0, "cpc_unbind");
                m.unbind(s);
            } else {
                einval!(got, -1, "cpc_unbind of a bad or unbound set");
            }
        }
        9 => {
            if m.bufs.len() >= 8 {
                return;
            }
            let Some((s, c)) = m.pick_set(r) else { return };
            let p = cpc_buf_create(m.cpc_ptr(c), m.sets[s].ptr);
            if m.set_ok(s, c) {
                assert!(!p.is_null(), "cpc_buf_create");
                m.bufs.retain(|b| b.ptr != p);
                m.bufs.push(MBuf {
                    ptr: p,
                    cpc: c,
                    live: true,
                    vals: vec![0; m.sets[s].reqs.len()],
                });
            } else {
                einval!(p, std::ptr::null_mut(), "cpc_buf_create of a bad set");
            }
        }
        10 => {
            let Some(b) = m.pick_buf(r) else { return };
            let c = if r.u8() < 0xe0 {
                m.bufs[b].cpc
            } else {
                m.any_live_cpc(r.u8())
            };
            // SAFETY: the library checks the handles.
            let got = unsafe { cpc_buf_destroy(m.cpc_ptr(c), m.bufs[b].ptr) };
            if m.buf_ok(b, c) {
                assert_eq!(got, 0, "cpc_buf_destroy");
                m.bufs[b].live = false;
            } else {
                einval!(got, -1, "cpc_buf_destroy of a bad buffer");
            }
        }
        11 | 12 => sample(m, r),
        13 => {
            let Some(b) = m.pick_buf(r) else { return };
            let idx = [0, 1, 2, -1, c_int::MAX][usize::from(r.u8()) % 5];
            let c = m.bufs[b].cpc;
            let mut v = 0xdead_u64;
            // SAFETY: a valid out-pointer.
            let got = unsafe { cpc_buf_get(m.cpc_ptr(c), m.bufs[b].ptr, idx, &mut v) };
            let want = usize::try_from(idx)
                .ok()
                .and_then(|i| m.bufs[b].vals.get(i))
                .filter(|_| m.buf_ok(b, c));
            match want {
                Some(&w) => {
                    assert_eq!(got, 0, "cpc_buf_get");
                    assert_eq!(v, w, "cpc_buf_get {idx}");
                }
                None => einval!(got, -1, "cpc_buf_get {idx}"),
            }
        }
        14 => {
            let Some(b) = m.pick_buf(r) else { return };
            let idx = [0, 1, 2, -1][usize::from(r.u8()) % 4];
            let v = r.count();
            let c = m.bufs[b].cpc;
            let got = cpc_buf_set(m.cpc_ptr(c), m.bufs[b].ptr, idx, v);
            let ok = m.buf_ok(b, c);
            match usize::try_from(idx)
                .ok()
                .filter(|&i| ok && i < m.bufs[b].vals.len())
            {
                Some(i) => {
                    assert_eq!(got, 0, "cpc_buf_set");
                    m.bufs[b].vals[i] = v;
                }
                None => einval!(got, -1, "cpc_buf_set {idx}"),
            }
        }
        15 => buf_arith(m, r),
        16 => {
            let c = m.any_live_cpc(r.u8());
            let idx = [0, 1, 2, -1][usize::from(r.u8()) % 4];
            let v = r.count();
            let got = cpc_request_preset(m.cpc_ptr(c), idx, v);
            let cur = m.current.filter(|_| m.cpc_live(c));
            match (cur, usize::try_from(idx)) {
                (Some(s), Ok(i)) if i < m.sets[s].reqs.len() => {
                    assert_eq!(got, 0, "cpc_request_preset");
                    m.sets[s].bound.as_mut().expect("bound").presets[i] = v;
                }
                _ => einval!(got, -1, "cpc_request_preset {idx}"),
            }
        }
        17 => {
            let c = m.any_live_cpc(r.u8());
            let got = cpc_set_restart(m.cpc_ptr(c), std::ptr::null_mut());
            match m.current.filter(|_| m.cpc_live(c)) {
                Some(s) => {
                    assert_eq!(got, 0, "cpc_set_restart");
                    let set = &mut m.sets[s];
                    restart_bound(set.bound.as_mut().expect("bound"), &set.reqs);
                }
                None => einval!(got, -1, "cpc_set_restart without a bound set"),
            }
        }
        18 | 19 => {
            let c = m.any_live_cpc(r.u8());
            let enable = op == 18;
            let got = if enable {
                cpc_enable(m.cpc_ptr(c))
            } else {
                cpc_disable(m.cpc_ptr(c))
            };
            let cur = m.current.filter(|_| m.cpc_live(c));
            match cur {
                Some(s) if m.sets[s].bound.as_ref().expect("bound").frozen == enable => {
                    assert_eq!(got, 0, "cpc_enable/disable ({enable})");
                    let set = &mut m.sets[s];
                    let b = set.bound.as_mut().expect("bound");
                    b.frozen = !enable;
                    if enable {
                        b.armed = set
                            .reqs
                            .iter()
                            .zip(&b.vals)
                            .map(|(q, &v)| q.notify() && v != 0)
                            .collect();
                    } else {
                        b.frozen_hrtime = None;
                    }
                }
                // A live handle and no set bound on this thread: nothing to do, no error
                // (cpc_enable(3CPC)'s "no harm will ensue").
                None if m.cpc_live(c) => assert_eq!(got, 0, "cpc_enable/disable without a set"),
                _ => einval!(got, -1, "cpc_enable/disable ({enable}) in the wrong state"),
            }
        }
        20 | 21 => advance(m, r),
        22 => {
            let e0 = NUMBERS[usize::from(r.u8()) % NUMBERS.len()];
            let e1 = NUMBERS[usize::from(r.u8()) % NUMBERS.len()];
            let got = start_counters(e0, e1);
            let range = (0..32).contains(&e0) && (0..32).contains(&e1);
            // Two different events of one R10000 counter conflict; one event twice is counted
            // once (both counts are its count).
            if range && (e0 == e1 || e0 / 16 != e1 / 16) {
                assert!(got > 0, "start_counters({e0}, {e1}): {got}");
                assert_ne!(
                    got, m.last_generation,
                    "start_counters: the same generation"
                );
                m.last_generation = got;
                let keep = m.pair.as_ref().is_some_and(|p| p.events == (e0, e1));
                if !keep {
                    m.pair = Some(MPair {
                        events: (e0, e1),
                        raw: [0; 2],
                        origin: [0; 2],
                        started: false,
                        generation: 0,
                    });
                }
                let p = m.pair.as_mut().expect("a pair");
                p.origin = p.raw;
                p.started = true;
                p.generation = got;
            } else {
                einval!(got, -1, "start_counters({e0}, {e1})");
                if range {
                    // Failed at bind: the old pair was dropped first.
                    m.pair = None;
                }
            }
        }
        23 => {
            let same = r.u8() < 0xc0;
            let (e0, e1) = match (&m.pair, same) {
                (Some(p), true) => p.events,
                _ => (
                    NUMBERS[usize::from(r.u8()) % NUMBERS.len()],
                    NUMBERS[usize::from(r.u8()) % NUMBERS.len()],
                ),
            };
            let null = r.u8() >= 0xf0;
            let (mut c0, mut c1) = (-7i64, -7i64);
            // SAFETY: valid out-pointers, or NULL.
            let got = unsafe {
                read_counters(
                    e0,
                    if null { std::ptr::null_mut() } else { &mut c0 },
                    e1,
                    &mut c1,
                )
            };
            let e = errno();
            match m.pair.as_mut().filter(|p| p.started) {
                _ if null => {
                    assert_eq!((got, e), (-1, libc::EFAULT), "read_counters(NULL)");
                }
                Some(p) if p.events == (e0, e1) => {
                    assert_eq!(got, p.generation, "read_counters: generation");
                    let want = [0, 1].map(|k| p.raw[k].wrapping_sub(p.origin[k]) as i64);
                    assert_eq!([c0, c1], want, "read_counters({e0}, {e1}) counts");
                    p.started = false;
                }
                _ => {
                    assert_eq!((got, e), (-1, libc::EINVAL), "read_counters({e0}, {e1})");
                    assert_eq!((c0, c1), (-7, -7), "counts written on failure");
                }
            }
        }
        24 => {
            let e0 = NUMBERS[usize::from(r.u8()) % NUMBERS.len()];
            let e1 = NUMBERS[usize::from(r.u8()) % NUMBERS.len()];
            let (c0, c1) = (r.u64() as i64, r.u64() as i64);
            let costs = r.u8() & 1 == 1;
            let got = if costs {
                print_costs(e0, c0, e1, c1)
            } else {
                print_counters(e0, c0, e1, c1)
            };
            if (0..32).contains(&e0) && (0..32).contains(&e1) {
                m.check_generation_unchanged(got, "print_counters/print_costs");
            } else {
                einval!(got, -1, "print_counters({e0}, {e1})");
            }
        }
        _ => match r.u8() % 4 {
            0 => {
                // SAFETY: a NUL-terminated path.
                let got = unsafe { load_costs(cost_file().as_ptr()) };
                m.check_generation_unchanged(got, "load_costs");
            }
            1 => {
                // SAFETY: a NUL-terminated path.
                let got = unsafe { load_costs(c"/nonexistent/perfcompat-fuzz.costs".as_ptr()) };
                assert_eq!((got, errno()), (-1, libc::ENOENT), "load_costs(missing)");
            }
            2 => {
                m.restart_in_handler = !m.restart_in_handler;
                let c = m
                    .cpcs
                    .iter()
                    .find(|c| c.live)
                    .map_or(std::ptr::null_mut(), |c| c.ptr);
                let c = if m.restart_in_handler {
                    c
                } else {
                    std::ptr::null_mut()
                };
                m.restart_in_handler = !c.is_null();
                RESTART_CPC.store(c, Ordering::SeqCst);
            }
            _ => {
                let c = m.any_live_cpc(r.u8());
                let n = cpc_npic(m.cpc_ptr(c));
                if m.cpc_live(c) {
                    assert_eq!(n, 2, "cpc_npic");
                } else {
                    einval!(n, 0, "cpc_npic of a closed handle");
                }
            }
        },
    }
}

fn add_request(m: &mut Model, r: &mut Reader) {
    let Some((s, c)) = m.pick_set(r) else { return };
    let sel = r.u8();
    let (name, event) = if sel < 0xf0 {
        let e = usize::from(sel) % EVENTS.len();
        (CString::new(EVENTS[e].0).expect("a name"), Some(e))
    } else {
        (c"no_such_event".to_owned(), None)
    };
    let flags = FLAGS[usize::from(r.u8()) % FLAGS.len()];
    let preset = r.count();
    let pin = match r.u8() % 4 {
        0 => Some(0u64),
        1 => Some(1),
        2 if r.u8() & 1 == 0 => Some(2),
        _ => None,
    };
    let attr = cpc_attr_t {
        ca_name: c"picnum".as_ptr() as *mut _,
        ca_val: pin.unwrap_or(0),
    };
    if m.sets[s].reqs.len() >= 4 {
        return;
    }
    // SAFETY: valid strings and an array of `nattrs` attributes.
    let got = unsafe {
        cpc_set_add_request(
            m.cpc_ptr(c),
            m.sets[s].ptr,
            name.as_ptr(),
            preset,
            flags,
            u32::from(pin.is_some()),
            &attr,
        )
    };
    let e = errno();
    let sub = take_subcode();
    let what = format!("cpc_set_add_request({name:?}, picnum {pin:?})");
    if !m.set_ok(s, c) || m.sets[s].bound.is_some() {
        assert_eq!((got, e), (-1, libc::EINVAL), "{what} on a bad or bound set");
        return;
    }
    let want_sub = match (event, pin) {
        (None, _) => Some(CPC_INVALID_EVENT),
        (Some(_), Some(p)) if p >= 2 => Some(CPC_INVALID_PICNUM),
        (Some(ev), Some(p)) if EVENTS[ev].1 & (1 << p) == 0 => Some(CPC_PIC_NOT_CAPABLE),
        _ => None,
    };
    match want_sub {
        Some(w) => {
            assert_eq!((got, e, sub), (-1, libc::EINVAL, w), "{what}");
        }
        None => {
            let set = &mut m.sets[s];
            assert_eq!(got, set.reqs.len() as c_int, "{what}: the next index");
            set.reqs.push(MReq {
                event: event.expect("known"),
                preset,
                flags,
                pin,
            });
        }
    }
}

fn bind(m: &mut Model, r: &mut Reader) {
    let Some((s, c)) = m.pick_set(r) else { return };
    let flags = [0, CPC_BIND_LWP_INHERIT, 0, 2][usize::from(r.u8()) % 4];
    let got = cpc_bind_curlwp(m.cpc_ptr(c), m.sets[s].ptr, flags);
    let (e, sub) = (errno(), take_subcode());
    if !m.set_ok(s, c) || flags & !CPC_BIND_LWP_INHERIT != 0 {
        assert_eq!(
            (got, e),
            (-1, libc::EINVAL),
            "bind of a bad set or with bad flags"
        );
        return;
    }
    // The thread's previous set is unbound, and this one, before binding.
    if let Some(prev) = m.current {
        m.unbind(prev);
    }
    m.unbind(s);
    let set = &m.sets[s];
    // A pinned request is placed on its counter only.
    let masks: Vec<u32> = set
        .reqs
        .iter()
        .map(|q| EVENTS[q.event].1 & q.pin.map_or(u32::MAX, |p| 1 << p))
        .collect();
    let bad_flags = set.reqs.iter().any(|q| q.flags & !0xf != 0);
    if set.reqs.is_empty() || bad_flags || !placeable(&masks) {
        assert_eq!(
            (got, e),
            (-1, libc::EINVAL),
            "bind of {} requests",
            set.reqs.len()
        );
        if bad_flags {
            assert_eq!(sub, CPC_REQ_INVALID_FLAGS);
        }
        return;
    }
    assert_eq!(
        got,
        0,
        "cpc_bind_curlwp of {} requests: errno {e}",
        set.reqs.len()
    );
    let presets: Vec<u64> = set.reqs.iter().map(|q| q.preset).collect();
    let mut b = MBound {
        vals: presets.clone(),
        presets,
        armed: Vec::new(),
        frozen: false,
        frozen_hrtime: None,
        last_hrtime: 0,
    };
    restart_bound(&mut b, &set.reqs);
    m.sets[s].bound = Some(b);
    m.current = Some(s);
}

fn sample(m: &mut Model, r: &mut Reader) {
    let Some((s, c)) = m.pick_set(r) else { return };
    let Some(b) = m.pick_buf(r) else { return };
    let got = cpc_set_sample(m.cpc_ptr(c), m.sets[s].ptr, m.bufs[b].ptr);
    let e = errno();
    let ok = m.set_ok(s, c)
        && m.buf_ok(b, c)
        && m.bufs[b].vals.len() == m.sets[s].reqs.len()
        && m.sets[s].bound.is_some();
    if !ok {
        assert_eq!(
            (got, e),
            (-1, libc::EINVAL),
            "cpc_set_sample of bad handles"
        );
        return;
    }
    assert_eq!(got, 0, "cpc_set_sample: errno {e}");
    let cpc = m.cpc_ptr(c);
    let buf = m.bufs[b].ptr;
    let bound = m.sets[s].bound.as_mut().expect("bound");
    let mut got_vals = Vec::new();
    for i in 0..bound.vals.len() {
        let mut v = 0u64;
        // SAFETY: a valid out-pointer.
        assert_eq!(unsafe { cpc_buf_get(cpc, buf, i as c_int, &mut v) }, 0);
        got_vals.push(v);
    }
    assert_eq!(
        got_vals, bound.vals,
        "sample = presets + injected events mod 2^64 (frozen: {})",
        bound.frozen
    );
    let t = cpc_buf_hrtime(cpc, buf);
    if bound.frozen {
        match bound.frozen_hrtime {
            Some(f) => assert_eq!(t, f, "a frozen set's time moved"),
            None => bound.frozen_hrtime = Some(t),
        }
    } else {
        assert!(t >= bound.last_hrtime, "time went backwards");
    }
    bound.last_hrtime = bound.last_hrtime.max(t);
    m.bufs[b].vals = got_vals;
}

fn buf_arith(m: &mut Model, r: &mut Reader) {
    let kind = r.u8() % 4;
    let picks: Vec<usize> = (0..3).filter_map(|_| m.pick_buf(r)).collect();
    if picks.len() < 3 {
        return;
    }
    let c = m.bufs[picks[0]].cpc;
    let cpc = m.cpc_ptr(c);
    let p = |i: usize| m.bufs[picks[i]].ptr;
    match kind {
        0 => cpc_buf_zero(cpc, p(0)),
        1 => cpc_buf_copy(cpc, p(0), p(1)),
        2 => cpc_buf_add(cpc, p(0), p(1), p(2)),
        _ => cpc_buf_sub(cpc, p(0), p(1), p(2)),
    }
    let used = [1, 2, 3, 3][usize::from(kind)];
    let len = m.bufs[picks[0]].vals.len();
    let ok = picks[..used]
        .iter()
        .all(|&b| m.buf_ok(b, c) && m.bufs[b].vals.len() == len);
    if !ok {
        assert_eq!(errno(), libc::EINVAL, "buffer arithmetic on bad buffers");
        return;
    }
    let v = |i: usize| m.bufs[picks[i]].vals.clone();
    let out: Vec<u64> = match kind {
        0 => vec![0; len],
        1 => v(1),
        2 => v(1)
            .iter()
            .zip(v(2))
            .map(|(a, b)| a.wrapping_add(b))
            .collect(),
        _ => v(1)
            .iter()
            .zip(v(2))
            .map(|(a, b)| a.wrapping_sub(b))
            .collect(),
    };
    // The destination holds the result now.
    for (i, want) in out.iter().enumerate() {
        let mut v = 0u64;
        // SAFETY: a valid out-pointer.
        assert_eq!(unsafe { cpc_buf_get(cpc, p(0), i as c_int, &mut v) }, 0);
        assert_eq!(v, *want, "buffer arithmetic {kind}: value {i}");
    }
    m.bufs[picks[0]].vals = out;
}

fn advance(m: &mut Model, r: &mut Reader) {
    let sel = r.u8();
    let restart = m.restart_in_handler;
    let (name, ev) = match sel % 8 {
        7 => ("no_such_event".to_string(), None),
        6 => {
            let e = usize::from(sel >> 3) % EVENTS.len();
            (EVENTS[e].2[0].to_string(), Some(e))
        }
        _ => {
            let e = usize::from(sel >> 3) % EVENTS.len();
            (EVENTS[e].0.to_string(), Some(e))
        }
    };
    let mut n = r.count();
    if restart {
        // A handler that restarts makes every wrap distance a loop: keep them few.
        n %= 1 << 16;
    }
    let cname = CString::new(name.clone()).expect("a name");
    let before = SIGEMTS.load(Ordering::SeqCst);
    let got = unsafe { perfcompat_sim_advance(cname.as_ptr(), n) };
    let e = errno();
    let signals = SIGEMTS.load(Ordering::SeqCst) - before;
    let Some(ev) = ev else {
        assert_eq!((got, e), (-1, libc::EINVAL), "advance {name}");
        assert_eq!(signals, 0);
        return;
    };
    let mut hit = 0;
    let mut want_signals = 0;
    if let Some(s) = m.current {
        let set = &mut m.sets[s];
        let b = set.bound.as_mut().expect("bound");
        let (counted, sig) = inject(b, &set.reqs, ev, n, restart);
        hit += i32::from(counted);
        want_signals += sig;
    }
    if let Some(p) = &mut m.pair {
        let mine = [p.events.0, p.events.1].map(|x| event_of_number(x) == Some(ev));
        if mine[0] || mine[1] {
            hit += 1;
        }
        for (raw, counts) in p.raw.iter_mut().zip(mine) {
            if counts {
                *raw = raw.wrapping_add(n);
            }
        }
    }
    assert_eq!(
        got, hit,
        "perfcompat_sim_advance({name}, {n}): sets that counted"
    );
    assert_eq!(signals, want_signals, "SIGEMTs for advance({name}, {n})");
    assert_eq!(
        RESTART_FAILURES.load(Ordering::SeqCst),
        0,
        "restart in the handler failed"
    );
}
