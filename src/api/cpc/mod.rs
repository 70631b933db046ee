//! Solaris libcpc v2 semantics that are not C: what a set's requests are as the program added
//! them ([`Requests`]: checked at add, turned into a [`CounterSet`] at bind), binding a set
//! to a CPU ([`cpu`]: the processor checks, one set per CPU in this process, the binding
//! thread's affinity saved and given back), a set with its binding and the binds and unbind
//! ([`set`]), and each thread's current set and inherited copies ([`thread`]). The C ABI
//! (`perfcompat-capi`'s `cpc` module) converts C types and calls these.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::backend::Backend;
use crate::base::error::{Error, Result};
use crate::base::set::{Attr, CounterSet, Request, RequestFlags, MAX_REQUESTS};
use crate::engine;

pub mod clock;
pub mod cpu;
pub mod emt;
pub mod set;
pub mod thread;
pub mod v1;
pub mod v1_bind;

/// Request flag: freeze the set and notify when this request's counter overflows
/// (`CPC_OVF_NOTIFY_EMT`).
pub const OVF_NOTIFY_EMT: u32 = 0x1;
/// Request flag: count in user mode (`CPC_COUNT_USER`).
pub const COUNT_USER: u32 = 0x2;
/// Request flag: count in kernel mode (`CPC_COUNT_SYSTEM`).
pub const COUNT_SYSTEM: u32 = 0x4;
/// Request flag: count while the hypervisor runs (`CPC_COUNT_HV`).
pub const COUNT_HV: u32 = 0x8;
/// Every request flag libcpc knows.
pub const ALL_FLAGS: u32 = 0xF;
/// The attribute that pins a request to a counter.
pub const PICNUM: &str = "picnum";

/// One request as the program added it (what `cpc_walk_requests` shows).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddedRequest {
    /// The event name.
    pub event: String,
    /// The preset given at add time.
    pub preset: u64,
    /// The libcpc request flags.
    pub flags: u32,
    /// The attributes, `picnum` among them, in the order given.
    pub attrs: Vec<(String, u64)>,
}

impl AddedRequest {
    /// The engine request (`picnum` pins the counter).
    pub fn to_request(&self) -> Request {
        let f = self.flags;
        let mut r = Request::new(&self.event)
            .preset(self.preset)
            .flags(RequestFlags {
                user: f & COUNT_USER != 0,
                system: f & COUNT_SYSTEM != 0,
                hypervisor: f & COUNT_HV != 0,
                notify_overflow: f & OVF_NOTIFY_EMT != 0,
            });
        for (name, value) in &self.attrs {
            if name == PICNUM {
                r = r.on_counter(u32::try_from(*value).unwrap_or(u32::MAX));
            } else {
                r.attrs.push(Attr {
                    name: name.clone(),
                    value: *value,
                });
            }
        }
        r
    }
}

/// The requests of a libcpc set, in the order added. Flags and attribute values are checked
/// at bind ([`Requests::counter_set`]), as libcpc did; events, attribute names and pinned
/// counters at add.
#[derive(Debug, Default)]
pub struct Requests {
    list: Mutex<Vec<AddedRequest>>,
    /// `list.len()`, readable from signal handlers.
    len: AtomicUsize,
}

impl Requests {
    /// No requests.
    pub const fn new() -> Requests {
        Requests {
            list: Mutex::new(Vec::new()),
            len: AtomicUsize::new(0),
        }
    }

    /// Check a request for `backend` and add it; its index. `event` as the program gave it
    /// (not UTF-8: an unknown event; empty: [`Error::MissingEvent`]).
    pub fn add(
        &self,
        backend: &dyn Backend,
        event: &[u8],
        preset: u64,
        flags: u32,
        attrs: Vec<(String, u64)>,
    ) -> Result<usize> {
        // An empty name is an unknown event on every backend (perf's parser calls it an
        // invalid argument, which has no subcode).
        if event.is_empty() {
            return Err(Error::MissingEvent("empty event name"));
        }
        let event = std::str::from_utf8(event).map_err(|_| Error::UnknownEvent {
            event: String::from_utf8_lossy(event).into_owned(),
            backend: "any".into(),
        })?;
        let added = AddedRequest {
            event: event.to_string(),
            preset,
            flags,
            attrs,
        };
        engine::check_request(backend, &added.to_request())?;
        let mut list = self.list.lock().unwrap_or_else(|p| p.into_inner());
        if list.len() >= MAX_REQUESTS {
            return Err(Error::SetFull { max: MAX_REQUESTS });
        }
        list.push(added);
        self.len.store(list.len(), Ordering::Release);
        Ok(list.len() - 1)
    }

    /// How many. Async-signal-safe.
    #[inline]
    pub fn len(&self) -> usize {
        self.len.load(Ordering::Acquire)
    }

    /// Whether there are none. Async-signal-safe.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A copy of the requests.
    pub fn snapshot(&self) -> Vec<AddedRequest> {
        self.list.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Whether a request notifies on overflow.
    pub fn notifies(&self) -> bool {
        self.list
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .any(|r| r.flags & OVF_NOTIFY_EMT != 0)
    }

    /// The engine set, after the checks libcpc makes at bind: not empty, known flags.
    pub fn counter_set(&self) -> Result<CounterSet> {
        let list = self.list.lock().unwrap_or_else(|p| p.into_inner());
        if list.is_empty() {
            return Err(Error::EmptySet);
        }
        let mut set = CounterSet::new();
        for r in list.iter() {
            if r.flags & !ALL_FLAGS != 0 {
                return Err(Error::InvalidFlags { flags: r.flags });
            }
            set.add(r.to_request())?;
        }
        Ok(set)
    }
}

/// libcpc's rule for the walkers: generic event names are those that start with "PAPI".
pub fn is_generic(event: &str) -> bool {
    event.starts_with("PAPI")
}

/// The events `backend` can count, each once (first appearance kept): (name, counters
/// bitmask, generic).
pub fn events(backend: &dyn Backend) -> Vec<(String, u64, bool)> {
    let mut seen = std::collections::HashSet::new();
    backend
        .events()
        .into_iter()
        .filter(|e| seen.insert(e.name.clone()))
        .map(|e| {
            let generic = is_generic(&e.name);
            (e.name, e.counters, generic)
        })
        .collect()
}

/// The events of `backend` that the walker asked for: the generic ones or the platform ones,
/// on every counter (`pic` `None`) or on counter `pic` (which must be below `npic`).
pub fn walk_events(
    backend: &dyn Backend,
    generic: bool,
    pic: Option<(u32, u32)>,
) -> Result<Vec<String>> {
    if let Some((picnum, npic)) = pic.filter(|&(p, n)| p >= n) {
        return Err(Error::NoSuchPic { picnum, npic });
    }
    Ok(events(backend)
        .into_iter()
        .filter(|(_, counters, g)| {
            *g == generic && pic.is_none_or(|(p, _)| p < 64 && counters & (1 << p) != 0)
        })
        .map(|(name, _, _)| name)
        .collect())
}
