//! Solaris libcpc version 1 (Solaris 8 and 9: `cpc_event_t`, `cpc_strtoevent`,
//! `cpc_bind_event`...) as the engine sees it: which processor a `cpuver` number names, the
//! event specification syntax of cpc_strtoevent(3CPC), what the control fields of a
//! `cpc_event_t` hold, and the two requests a version 1 binding is underneath.
//!
//! # Processor versions
//! Each backend has one `cpuver`: the UltraSPARC I&II model is Solaris's `CPC_ULTRA2` (1001,
//! `CPC_ULTRA1` 1000 names it too), the UltraSPARC III+ & IV model `CPC_ULTRA3_PLUS` (1003). The
//! Pentium 4 never had a version 1 interface on Solaris: perfcompat gives it 2004, after the
//! Pentium Pro's 2003. The perf backend (this host) is 9000 and the other emulated models
//! 9100 + their place in [`crate::backend::sim::MODELS`].
//!
//! # Control fields
//! `cpc_event_t` has 8 bytes of control fields after `ce_pic[2]`: `ce_pes[2]` on x86, `ce_pcr`
//! on SPARC, at the same offset. On the UltraSPARC models they hold a real %pcr image (low
//! word: PIC0's event select at bit 4, PIC1's at bit 11, 4 bits wide on the I&II and 6 on the
//! III+, user mode at bit 2, system mode at bit 1; high word 0), so that programs that read or
//! build `ce_pcr` from `cpc_walk_names`' bits keep working. Elsewhere no register image can
//! hold what a request is (a Pentium 4 request needs an ESCR and a CCCR, a host event a perf
//! configuration), so each word is the number of one PIC's request (event, attributes, user and
//! system) in a table of the process ([`Pic`]): numbers are stable within a process, not
//! across processes.

use std::sync::{Mutex, OnceLock};

use crate::backend::sim::model::Model;
use crate::backend::sim::{self, parse_c_integer, SimBackend};
use crate::backend::{Backend, BackendKind};
use crate::base::error::{Error, Result};
use crate::base::set::Request;

use super::{AddedRequest, COUNT_SYSTEM, COUNT_USER, OVF_NOTIFY_EMT, PICNUM};

/// `CPC_ULTRA1`: UltraSPARC I (the UltraSPARC I&II model).
pub const CPC_ULTRA1: i32 = 1000;
/// `CPC_ULTRA2`: UltraSPARC II (the UltraSPARC I&II model, `sim:ultrasparc2`).
pub const CPC_ULTRA2: i32 = 1001;
/// `CPC_ULTRA3`: UltraSPARC III (not emulated).
pub const CPC_ULTRA3: i32 = 1002;
/// `CPC_ULTRA3_PLUS`: UltraSPARC III+ and IV (`sim:ultrasparc`).
pub const CPC_ULTRA3_PLUS: i32 = 1003;
/// perfcompat's cpuver for the Pentium 4 (`sim:pentium4`), which had no version 1 on Solaris.
pub const CPC_PENTIUM4: i32 = 2004;
/// perfcompat's cpuver for this host's perf_event counters.
pub const CPC_PERFCOMPAT_HOST: i32 = 9000;
/// perfcompat's cpuver for the other emulated models: this plus their index in
/// [`sim::MODELS`].
pub const CPC_PERFCOMPAT_SIM_BASE: i32 = 9100;

/// The number of `ce_pic` fields: always 2.
pub const NPIC: usize = 2;

/// The cpuver of backend `kind`.
pub fn cpuver(kind: BackendKind) -> i32 {
    match kind {
        BackendKind::Sim(m) if std::ptr::eq(m, &sim::sparc::ULTRASPARC2) => CPC_ULTRA2,
        BackendKind::Sim(m) if std::ptr::eq(m, &sim::sparc::ULTRASPARC) => CPC_ULTRA3_PLUS,
        BackendKind::Sim(m) if std::ptr::eq(m, &sim::p4::PENTIUM4) => CPC_PENTIUM4,
        BackendKind::Sim(m) => sim::MODELS
            .iter()
            .position(|x| std::ptr::eq(*x, m))
            .map_or(-1, |i| CPC_PERFCOMPAT_SIM_BASE + i as i32),
        BackendKind::Perf => CPC_PERFCOMPAT_HOST,
        BackendKind::Other(_) => -1,
    }
}

/// The backend kind `cpuver` names, if any.
pub fn kind_of(cpuver: i32) -> Option<BackendKind> {
    let m = match cpuver {
        CPC_ULTRA1 | CPC_ULTRA2 => &sim::sparc::ULTRASPARC2,
        CPC_ULTRA3_PLUS => &sim::sparc::ULTRASPARC,
        CPC_PENTIUM4 => &sim::p4::PENTIUM4,
        CPC_PERFCOMPAT_HOST => return Some(BackendKind::Perf),
        v => *sim::MODELS.get(usize::try_from(v - CPC_PERFCOMPAT_SIM_BASE).ok()?)?,
    };
    Some(BackendKind::Sim(m))
}

/// A backend to describe and check events of `cpuver` with: `current` (the process's) when it
/// is that processor, else a private emulation of the model (events of another model can be
/// translated, not counted). `None` for an unknown cpuver, or the host's when the process
/// counts on an emulated PMU.
pub fn backend_for(
    cpuver: i32,
    current: Option<&'static dyn Backend>,
) -> Option<&'static dyn Backend> {
    if let Some(b) = current.filter(|b| self::cpuver(b.shape_unmeasured().kind) == cpuver) {
        return Some(b);
    }
    static OTHERS: [OnceLock<SimBackend>; sim::MODELS.len()] =
        [const { OnceLock::new() }; sim::MODELS.len()];
    let BackendKind::Sim(m) = kind_of(cpuver)? else {
        return None;
    };
    let i = sim::MODELS.iter().position(|x| std::ptr::eq(*x, m))?;
    Some(OTHERS[i].get_or_init(|| SimBackend::of(m)))
}

/// One PIC of a version 1 event: the request it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pic {
    /// The event (a name the backend knows).
    pub event: String,
    /// Attributes and their values (`emask`...), without `picnum`.
    pub attrs: Vec<(String, u64)>,
    /// Count in user mode (default; `nouser` clears it).
    pub user: bool,
    /// Count in system mode (`sys`).
    pub system: bool,
}

/// A version 1 event: a processor and its two PICs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The `ce_cpuver` it was made for.
    pub cpuver: i32,
    /// PIC0's and PIC1's requests.
    pub pics: [Pic; NPIC],
}

/// Why an event specification or control fields cannot be used: the message that
/// `cpc_seterrfn`'s function gets (ends with a newline).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecError(pub String);

impl std::fmt::Display for SpecError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A version 1 failure: a message of its own (ending in a newline, with its errno), the
/// engine's error, or an errno alone: what Solaris's bare system calls (`cpc_take_sample`,
/// `cpc_count_usr_events` without a context) return, with nothing said (issue 45 item 5).
#[derive(Debug)]
pub enum V1Error {
    /// The message (ending in a newline) and the errno.
    Text(String, i32),
    /// The engine's error: its text and errno.
    Engine(Error),
    /// -1 and this errno, without a message.
    Quiet(i32),
}

impl From<Error> for V1Error {
    fn from(e: Error) -> V1Error {
        V1Error::Engine(e)
    }
}

impl From<SpecError> for V1Error {
    fn from(e: SpecError) -> V1Error {
        V1Error::Text(e.0, libc::EINVAL)
    }
}

/// A version 1 result.
pub type V1Result<T> = std::result::Result<T, V1Error>;

macro_rules! bad {
    ($($t:tt)*) => { return Err(SpecError(format!($($t)*))) };
}

/// How a processor's control fields hold an event.
#[derive(Clone, Copy)]
enum Codec {
    /// An UltraSPARC %pcr: event selects `mask` wide at bits 4 and 11.
    Pcr(&'static Model, u32),
    /// One number per PIC in the process's table.
    Table,
}

fn codec(cpuver: i32) -> Codec {
    match cpuver {
        CPC_ULTRA1 | CPC_ULTRA2 => Codec::Pcr(&sim::sparc::ULTRASPARC2, CPC_ULTRA2_PCR_PIC_MASK),
        CPC_ULTRA3_PLUS => Codec::Pcr(&sim::sparc::ULTRASPARC, CPC_ULTRA3_PCR_PIC_MASK),
        _ => Codec::Table,
    }
}

/// The bit of the UltraSPARC %pcr that counts user mode (its number: `<libcpc.h>`'s
/// `CPC_ULTRA_PCR_USR`, from Solaris's `<sys/cpc_event.h>`).
pub const CPC_ULTRA_PCR_USR: u32 = 2;
/// The bit of the %pcr that counts system mode (`CPC_ULTRA_PCR_SYS`).
pub const CPC_ULTRA_PCR_SYS: u32 = 1;
/// The bit of the %pcr that makes the PICs privileged (`CPC_ULTRA_PCR_PRIVPIC`); never set
/// here, as on Solaris for a thread's own counters.
pub const CPC_ULTRA_PCR_PRIVPIC: u32 = 0;
/// Where PIC0's event select starts in the %pcr (`CPC_ULTRA_PCR_PIC0_SHIFT`).
pub const CPC_ULTRA_PCR_PIC0_SHIFT: u32 = 4;
/// Where PIC1's event select starts in the %pcr (`CPC_ULTRA_PCR_PIC1_SHIFT`).
pub const CPC_ULTRA_PCR_PIC1_SHIFT: u32 = 11;
/// The width of an event select on the UltraSPARC I and II (`CPC_ULTRA2_PCR_PIC{0,1}_MASK`).
pub const CPC_ULTRA2_PCR_PIC_MASK: u32 = 0xf;
/// The width of an event select on the UltraSPARC III and later (`CPC_ULTRA3_PCR_PIC{0,1}_MASK`).
pub const CPC_ULTRA3_PCR_PIC_MASK: u32 = 0x3f;

const PCR_USR: u32 = 1 << CPC_ULTRA_PCR_USR;
const PCR_SYS: u32 = 1 << CPC_ULTRA_PCR_SYS;
const PCR_SHIFT: [u32; NPIC] = [CPC_ULTRA_PCR_PIC0_SHIFT, CPC_ULTRA_PCR_PIC1_SHIFT];

/// The %pcr select code of `name` (an event, a generic name or a raw code) on PIC `pic`.
fn pcr_code(m: &Model, name: &str, pic: usize) -> Option<u32> {
    let on_pic = |r: &&sim::model::Route| r.counters & (1 << pic) != 0;
    if let Some(n) = parse_c_integer(name) {
        let n = u32::try_from(n).ok()?;
        let known = m
            .events
            .iter()
            .any(|e| e.routes.iter().filter(on_pic).any(|r| r.code == n));
        return known.then_some(n);
    }
    let name = m
        .generics
        .iter()
        .find(|g| g.name.eq_ignore_ascii_case(name))
        .map_or(name, |g| g.event.as_str());
    let e = m
        .events
        .iter()
        .find(|e| e.name.eq_ignore_ascii_case(name))?;
    e.routes.iter().find(on_pic).map(|r| r.code)
}

/// The event that select code `code` counts on PIC `pic` (its number when none).
fn pcr_name(m: &Model, code: u32, pic: usize) -> String {
    m.events
        .iter()
        .find(|e| {
            e.routes
                .iter()
                .any(|r| r.counters & (1 << pic) != 0 && r.code == code)
        })
        .map_or_else(|| format!("0x{code:x}"), |e| e.name.to_string())
}

/// Whether PIC `pic` of `cpuver` (counted by `backend`) can count `name`.
fn countable(cpuver: i32, backend: &dyn Backend, name: &str, pic: usize) -> bool {
    match codec(cpuver) {
        Codec::Pcr(m, mask) => pcr_code(m, name, pic).is_some_and(|c| c <= mask),
        Codec::Table => crate::engine::check_request(backend, &Request::new(name)).is_ok(),
    }
}

/// Parse event specification `spec` for `cpuver` (checked with `backend`: see
/// [`backend_for`]), as cpc_strtoevent(3CPC) describes it: `pic0=<event>,pic1=<event>`
/// (the `picN=` may be left out: a bare event goes to the first free PIC that can count it),
/// `nouser`, `sys`; on the processors without a %pcr also `nouser0`, `sys1`... for one PIC,
/// and the backend's attributes as `attr[0|1][=value]` (value 1 when left out). Both PICs
/// must be given. Only user mode is counted by default.
pub fn parse(
    cpuver: i32,
    backend: &dyn Backend,
    spec: &str,
) -> std::result::Result<Event, SpecError> {
    let table = matches!(codec(cpuver), Codec::Table);
    let attributes = backend.shape_unmeasured().attributes;
    let mut events: [Option<String>; NPIC] = [None, None];
    let mut pics: [Pic; NPIC] = std::array::from_fn(|_| Pic {
        event: String::new(),
        attrs: Vec::new(),
        user: true,
        system: false,
    });
    for tok in spec.split(',').filter(|t| !t.is_empty()) {
        let (key, value) = match tok.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (tok, None),
        };
        // A trailing 0 or 1 names one PIC (not on the UltraSPARC: one mode for both).
        let (stem, which) = match (table, key.strip_suffix('0'), key.strip_suffix('1')) {
            (true, Some(s), _) => (s, Some(0)),
            (true, _, Some(s)) => (s, Some(1)),
            _ => (key, None),
        };
        let targets = which.map_or(0..NPIC, |p| p..p + 1);
        match (key, stem) {
            ("pic0" | "pic1", _) => {
                let pic = usize::from(key == "pic1");
                let Some(ev) = value else {
                    bad!("missing '{key}' value\n")
                };
                if events[pic].is_some() {
                    bad!("repeated '{key}' token\n");
                }
                if !countable(cpuver, backend, ev, pic) {
                    bad!("%pic{pic} cannot measure event '{ev}' on this cpu\n");
                }
                events[pic] = Some(ev.to_string());
            }
            (_, "nouser" | "sys") if which.is_some() || key == stem => {
                if value.is_some() {
                    bad!("bad arg to '{key}'\n");
                }
                for p in &mut pics[targets] {
                    match stem {
                        "nouser" => p.user = false,
                        _ => p.system = true,
                    }
                }
            }
            (_, a) if table && a != PICNUM && attributes.iter().any(|x| x == a) => {
                let v = match value {
                    None => 1,
                    Some(v) => match parse_c_integer(v) {
                        Some(v) => v,
                        None => bad!("invalid value '{v}' for attribute '{a}'\n"),
                    },
                };
                for p in &mut pics[targets] {
                    p.attrs.retain(|(n, _)| n != a);
                    p.attrs.push((a.to_string(), v));
                }
            }
            _ if value.is_none() => {
                let free: Vec<usize> = (0..NPIC).filter(|&p| events[p].is_none()).collect();
                let Some(&first) = free.first() else {
                    bad!("bad token '{key}'\n")
                };
                let pic = free
                    .iter()
                    .copied()
                    .find(|&p| countable(cpuver, backend, key, p))
                    .unwrap_or(first);
                if !countable(cpuver, backend, key, pic) {
                    bad!("%pic{pic} cannot measure event '{key}' on this cpu\n");
                }
                events[pic] = Some(key.to_string());
            }
            _ => bad!("bad token '{key}'\n"),
        }
    }
    for (p, e) in pics.iter_mut().zip(events) {
        let Some(e) = e else {
            bad!("two events must be specified\n")
        };
        p.event = e;
    }
    if !table && pics[0].user != pics[1].user {
        bad!("bad token 'nouser'\n");
    }
    let mut ev = Event { cpuver, pics };
    if !table {
        // The canonical names: what the %pcr image says.
        ev = decode(cpuver, encode(&ev))?;
    }
    for (i, r) in requests(&ev, [0; NPIC], false).iter().enumerate() {
        if let Err(e) = crate::engine::check_request(backend, &r.to_request()) {
            bad!("pic{i}: {e}\n");
        }
    }
    Ok(ev)
}

/// The canonical specification of `ev` (what `cpc_eventtostr` returns): `pic0=A,pic1=B`,
/// then `nouser`, `sys` (per PIC, `nouser0`..., where the PICs differ) and the attributes
/// per PIC (`emask0=0x...`).
pub fn to_spec(ev: &Event) -> String {
    let [a, b] = &ev.pics;
    let mut s = format!("pic0={},pic1={}", a.event, b.event);
    // Each PIC's "off" words: nouser, and sys counted as "not off".
    for (word, x, y) in [("nouser", a.user, b.user), ("sys", !a.system, !b.system)] {
        match (x, y) {
            (true, true) => {}
            (false, false) => s.push_str(&format!(",{word}")),
            _ => {
                for (i, on) in [x, y].into_iter().enumerate() {
                    if !on {
                        s.push_str(&format!(",{word}{i}"));
                    }
                }
            }
        }
    }
    for (i, p) in ev.pics.iter().enumerate() {
        for (n, v) in &p.attrs {
            s.push_str(&format!(",{n}{i}=0x{v:x}"));
        }
    }
    s
}

/// The two requests a binding of `ev` is: PIC0's then PIC1's, from `presets`, notifying on
/// overflow with `emt`, pinned to their counters on the UltraSPARC (`picnum`).
pub fn requests(ev: &Event, presets: [u64; NPIC], emt: bool) -> Vec<AddedRequest> {
    let pin = matches!(codec(ev.cpuver), Codec::Pcr(..));
    (0..NPIC)
        .map(|i| {
            let p = &ev.pics[i];
            let mut attrs = p.attrs.clone();
            if pin {
                attrs.push((PICNUM.to_string(), i as u64));
            }
            let flags = if p.user { COUNT_USER } else { 0 }
                | if p.system { COUNT_SYSTEM } else { 0 }
                | if emt { OVF_NOTIFY_EMT } else { 0 };
            AddedRequest {
                event: p.event.clone(),
                preset: presets[i],
                flags,
                attrs,
            }
        })
        .collect()
}

/// The process's table of PIC requests (see the module's documentation): word `n` is entry
/// `n - 1`.
static TABLE: Mutex<Vec<Pic>> = Mutex::new(Vec::new());

/// Where the table says: PIC requests are numbered from 1, with this bit set so that a
/// zeroed or made-up word is rarely one.
const TABLE_TAG: u32 = 0x5c00_0000;

/// The control fields (`ce_pes[0]`, `ce_pes[1]`; `ce_pcr` on SPARC is the same bytes) that
/// describe `ev`.
pub fn encode(ev: &Event) -> [u32; NPIC] {
    match codec(ev.cpuver) {
        Codec::Pcr(m, mask) => {
            let mut pcr = 0;
            for (i, p) in ev.pics.iter().enumerate() {
                pcr |= (pcr_code(m, &p.event, i).unwrap_or(0) & mask) << PCR_SHIFT[i];
            }
            let p = &ev.pics[0];
            pcr |= if p.user { PCR_USR } else { 0 } | if p.system { PCR_SYS } else { 0 };
            [pcr, 0]
        }
        Codec::Table => {
            let mut t = TABLE.lock().unwrap_or_else(|e| e.into_inner());
            ev.pics.clone().map(|p| {
                let n = t.iter().position(|x| *x == p).unwrap_or_else(|| {
                    t.push(p);
                    t.len() - 1
                });
                TABLE_TAG | (n as u32 + 1)
            })
        }
    }
}

/// The event that control fields `words` describe for `cpuver`.
pub fn decode(cpuver: i32, words: [u32; NPIC]) -> std::result::Result<Event, SpecError> {
    if kind_of(cpuver).is_none() {
        bad!("cpuver {cpuver} is not a processor this library knows\n");
    }
    let pics = match codec(cpuver) {
        Codec::Pcr(m, mask) => {
            let pcr = words[0];
            [0, 1].map(|i| Pic {
                event: pcr_name(m, (pcr >> PCR_SHIFT[i]) & mask, i),
                attrs: Vec::new(),
                user: pcr & PCR_USR != 0,
                system: pcr & PCR_SYS != 0,
            })
        }
        Codec::Table => {
            let t = TABLE.lock().unwrap_or_else(|e| e.into_inner());
            let get = |w: u32| {
                (w & !0xff_ffff == TABLE_TAG)
                    .then(|| t.get(((w & 0xff_ffff) as usize).wrapping_sub(1)))
                    .flatten()
                    .cloned()
            };
            match (get(words[0]), get(words[1])) {
                (Some(a), Some(b)) => [a, b],
                _ => bad!(
                    "the event's control fields (0x{:x}, 0x{:x}) were not made by \
                     cpc_strtoevent in this process\n",
                    words[0],
                    words[1]
                ),
            }
        }
    };
    Ok(Event { cpuver, pics })
}

/// The events PIC `regno` of `cpuver` can count, for `cpc_walk_names`: each platform event
/// (not the generic names) once, with its event-select bits on that PIC (the %pcr field on the
/// UltraSPARC; 0 where the backend has no select codes). Empty for a PIC other than 0 and 1.
pub fn names(cpuver: i32, backend: &dyn Backend, regno: i32) -> Vec<(String, u8)> {
    let Ok(pic) = usize::try_from(regno) else {
        return Vec::new();
    };
    if pic >= NPIC {
        return Vec::new();
    }
    let model = match backend.shape_unmeasured().kind {
        BackendKind::Sim(m) => Some(m),
        _ => None,
    };
    let pinned = matches!(codec(cpuver), Codec::Pcr(..));
    let mut out: Vec<(String, u8)> = Vec::new();
    for e in super::events(backend).into_iter().filter(|e| !e.2) {
        let on = |c: u64| !pinned || c & (1 << pic) != 0;
        if !on(e.1) || out.iter().any(|(n, _)| *n == e.0) {
            continue;
        }
        let bits = model
            .and_then(|m| m.events.iter().find(|x| x.name == e.0.as_str()))
            .and_then(|x| x.routes.iter().find(|r| on(r.counters)))
            .map_or(0, |r| r.code as u8);
        out.push((e.0, bits));
    }
    out
}

/// The compact syntax of `cpuver`'s specifications (`cpc_getusage`): space-separated tokens.
pub fn usage(cpuver: i32, backend: &dyn Backend) -> String {
    match codec(cpuver) {
        Codec::Pcr(..) => "pic0=<event0>,pic1=<event1> [,sys] [,nouser]".into(),
        Codec::Table => {
            let mut s = String::from("pic0=<event0>,pic1=<event1> [,sys[[0|1]]] [,nouser[[0|1]]]");
            for a in backend.shape_unmeasured().attributes {
                s.push_str(&format!(" [,{a}[0|1]=<value>]"));
            }
            s
        }
    }
}

/// The one CPU the calling thread may run on (bound with `processor_bind`, here
/// `sched_setaffinity`), if its affinity is exactly one CPU: where `cpc_shared_bind_event`
/// counts.
pub fn bound_cpu() -> Result<u32> {
    // SAFETY: cpu_set_t is plain data; the call gets a valid pointer.
    let set = unsafe {
        let mut s: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut s) != 0 {
            return Err(Error::last_os("sched_getaffinity"));
        }
        s
    };
    // SAFETY: reading plain data.
    let cpus: Vec<u32> = (0..libc::CPU_SETSIZE as usize)
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .map(|c| c as u32)
        .collect();
    match cpus[..] {
        [cpu] => Ok(cpu),
        _ => Err(Error::InvalidArgument(format!(
            "the calling thread may run on {} CPUs: bind it to one first (processor_bind, \
             sched_setaffinity)",
            cpus.len()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The translation tests bind nothing but resolve events on the emulated models, which
    // reads the process's PERFCOMPAT_EVENTS map once: they are in tests/cpc_v1.rs, a process
    // of their own (src/base/eventmap.rs's test sets that variable).
    #[test]
    fn cpuvers_name_the_models_and_back() {
        for m in sim::MODELS {
            let v = cpuver(BackendKind::Sim(m));
            assert!(v > 0, "{}", m.name);
            assert_eq!(kind_of(v), Some(BackendKind::Sim(m)));
        }
        assert_eq!(cpuver(BackendKind::Sim(&sim::sparc::ULTRASPARC2)), 1001);
        assert_eq!(cpuver(BackendKind::Sim(&sim::sparc::ULTRASPARC)), 1003);
        assert_eq!(kind_of(CPC_PERFCOMPAT_HOST), Some(BackendKind::Perf));
        assert_eq!(kind_of(42), None);
        assert_eq!(kind_of(CPC_ULTRA3), None);
    }
}
