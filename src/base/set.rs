//! Counter sets and requests: what the caller wants counted, before it is bound.

use crate::base::error::{Error, Result};

/// Largest number of requests in one set. Bounded so that the sample path can use fixed-size
/// stack buffers (no allocation in signal handlers).
pub const MAX_REQUESTS: usize = 64;

/// Largest number of attributes on one request.
pub const MAX_ATTRS: usize = 50;

/// In which modes a request counts, and whether it notifies on overflow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RequestFlags {
    /// Count while the thread runs in user mode.
    pub user: bool,
    /// Count while the thread runs in kernel mode.
    pub system: bool,
    /// Count while the hypervisor runs on the thread's behalf.
    pub hypervisor: bool,
    /// Freeze the set and run the overflow hook when the 64-bit virtual counter wraps.
    pub notify_overflow: bool,
}

impl RequestFlags {
    /// User-mode counting only, no notification: the default of both legacy APIs.
    pub const USER: RequestFlags = RequestFlags {
        user: true,
        system: false,
        hypervisor: false,
        notify_overflow: false,
    };
}

/// A named numeric attribute of a request (`emask`, `umask`, ...).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attr {
    /// Attribute name.
    pub name: String,
    /// Its value.
    pub value: u64,
}

/// One event to count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// Event name or code, as the backend (or the `PERFCOMPAT_EVENTS` map) knows it.
    pub event: String,
    /// The value the 64-bit virtual counter starts from at every bind and restart.
    pub preset: u64,
    /// Modes and notification.
    pub flags: RequestFlags,
    /// The hardware counter this request must use, if pinned (libcpc's `picnum`).
    pub counter: Option<u32>,
    /// Backend-specific attributes.
    pub attrs: Vec<Attr>,
}

impl Request {
    /// A user-mode request for `event`, preset 0, unpinned, no attributes.
    pub fn new(event: impl Into<String>) -> Request {
        Request {
            event: event.into(),
            preset: 0,
            flags: RequestFlags::USER,
            counter: None,
            attrs: Vec::new(),
        }
    }

    /// Set the preset.
    pub fn preset(mut self, preset: u64) -> Request {
        self.preset = preset;
        self
    }

    /// Set the flags.
    pub fn flags(mut self, flags: RequestFlags) -> Request {
        self.flags = flags;
        self
    }

    /// Ask for an overflow notification when the virtual counter wraps past 2^64.
    pub fn notify(mut self) -> Request {
        self.flags.notify_overflow = true;
        self
    }

    /// Pin the request to hardware counter `n`.
    pub fn on_counter(mut self, n: u32) -> Request {
        self.counter = Some(n);
        self
    }

    /// Add an attribute.
    pub fn attr(mut self, name: impl Into<String>, value: u64) -> Request {
        self.attrs.push(Attr {
            name: name.into(),
            value,
        });
        self
    }
}

/// An ordered collection of requests that are counted together.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CounterSet {
    requests: Vec<Request>,
}

impl CounterSet {
    /// An empty set.
    pub fn new() -> CounterSet {
        CounterSet::default()
    }

    /// Append a request; returns its index (0, 1, 2, ... in the order added).
    pub fn add(&mut self, request: Request) -> Result<usize> {
        if self.requests.len() >= MAX_REQUESTS {
            return Err(Error::InvalidArgument(format!(
                "a set holds at most {MAX_REQUESTS} requests"
            )));
        }
        if request.attrs.len() > MAX_ATTRS {
            return Err(Error::InvalidArgument(format!(
                "a request has at most {MAX_ATTRS} attributes"
            )));
        }
        if request.event.is_empty() {
            return Err(Error::UnknownEvent {
                event: String::new(),
                backend: "any".into(),
            });
        }
        self.requests.push(request);
        Ok(self.requests.len() - 1)
    }

    /// Builder form of [`CounterSet::add`].
    pub fn with(mut self, request: Request) -> Result<CounterSet> {
        self.add(request)?;
        Ok(self)
    }

    /// The requests, in index order.
    pub fn requests(&self) -> &[Request] {
        &self.requests
    }

    /// Number of requests.
    pub fn len(&self) -> usize {
        self.requests.len()
    }

    /// Whether the set has no requests.
    pub fn is_empty(&self) -> bool {
        self.requests.is_empty()
    }
}

/// What a set is bound to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// The calling thread only.
    CurrentThread,
    /// The calling thread and every thread it creates after the bind (libcpc's
    /// `CPC_BIND_LWP_INHERIT`): their counts are summed into the binding.
    CurrentThreadInherit,
    /// Every thread of another process (and, on the perf backend, the threads and children it
    /// creates later).
    Process(i32),
    /// One thread (by its thread id), of this or another process, without inheritance: what
    /// libcpc's `cpc_bind_pctx` and `perfex -mp` bind (the perf backend; the emulated PMUs
    /// count only threads of the calling process).
    Thread(i32),
    /// Everything that runs on one CPU. The calling thread is not moved.
    Cpu(u32),
}
