//! The engine's error type.
//!
//! Every failure names its cause in words a user can act on. The ABI layers map an [`Error`] to
//! their own conventions: [`Error::errno`] gives the `errno` value libcpc documents, and
//! [`Error::kind`] the libcpc error subcode family.

use std::fmt;

/// Why a set of requests cannot be placed on the counters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConflictReason {
    /// The requests can only be counted on the same hardware counter(s).
    SameCounter {
        /// The counters they all compete for.
        counters: Vec<u32>,
    },
    /// The requests need the same shared resource (a Pentium 4 ESCR, say).
    SharedResource {
        /// Name of the resource.
        resource: String,
    },
    /// More requests than the backend has counters.
    TooManyRequests {
        /// Number of requests in the set.
        requested: usize,
        /// Number of counters.
        available: usize,
    },
    /// The backend counts all requests of a set with the same user/system mode.
    DifferentFlags,
}

/// A set whose requests cannot all be counted at once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// Indices (into the set) and event names of the requests that conflict.
    pub requests: Vec<(usize, String)>,
    /// Why.
    pub reason: ConflictReason,
}

impl fmt::Display for Conflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<String> = self
            .requests
            .iter()
            .map(|(i, n)| format!("#{i} ({n})"))
            .collect();
        let who = names.join(" and ");
        match &self.reason {
            ConflictReason::SameCounter { counters } if counters.len() == 1 => write!(
                f,
                "conflicting counters: requests {who} can only be counted on hardware counter {}",
                counters[0]
            ),
            ConflictReason::SameCounter { counters } => write!(
                f,
                "conflicting counters: requests {who} can only be counted on hardware counters {:?}, \
                 fewer than there are requests",
                counters
            ),
            ConflictReason::SharedResource { resource } => write!(
                f,
                "conflicting requests: {who} all need the shared resource {resource}"
            ),
            ConflictReason::TooManyRequests {
                requested,
                available,
            } => write!(
                f,
                "too many requests: {requested} requested, the backend has {available} counters"
            ),
            ConflictReason::DifferentFlags => write!(
                f,
                "conflicting requests: {who} use different user/system modes, but this PMU counts \
                 all requests in one mode"
            ),
        }
    }
}

/// The family an error belongs to; the libcpc layer turns it into a subcode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Unknown event name or code.
    InvalidEvent,
    /// Bad counter number.
    InvalidPicnum,
    /// Unknown attribute.
    InvalidAttribute,
    /// Attribute value out of range.
    AttributeOutOfRange,
    /// Resources (counters, ESCRs) unavailable.
    ResourceUnavailable,
    /// Event cannot be counted on the requested counter.
    PicNotCapable,
    /// Unknown request flags.
    InvalidFlags,
    /// Requests conflict with each other.
    ConflictingRequests,
    /// Needs privileges the caller lacks.
    RequiresPrivilege,
    /// The calling thread could not be bound to the requested processor.
    PbindFailed,
    /// Anything else; only the errno matters.
    Other,
}

/// An engine error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// The backend does not know this event.
    UnknownEvent {
        /// The event as given.
        event: String,
        /// The backend that was asked.
        backend: String,
    },
    /// The event is known but cannot be counted on this host.
    EventUnavailable {
        /// The event as given.
        event: String,
        /// Why (no PMU, no host equivalent, ...).
        reason: String,
    },
    /// An attribute the backend does not know.
    InvalidAttribute {
        /// Attribute name.
        name: String,
        /// The backend that was asked.
        backend: String,
    },
    /// An attribute value out of range.
    AttributeOutOfRange {
        /// Attribute name.
        name: String,
        /// The value given.
        value: u64,
        /// The largest accepted value.
        max: u64,
    },
    /// A counter number that does not exist.
    InvalidPicnum {
        /// The counter number given.
        picnum: u32,
        /// How many counters there are.
        npic: u32,
    },
    /// The event cannot be counted on the pinned counter.
    PicNotCapable {
        /// The event.
        event: String,
        /// The counter it was pinned to.
        picnum: u32,
    },
    /// Request flags outside the known set.
    InvalidFlags {
        /// The flags given.
        flags: u32,
    },
    /// The event cannot count the privilege levels the request's flags ask for (a clock that
    /// counts user and system time together asked for system time alone).
    ModeNotCountable {
        /// The event as given.
        event: String,
        /// Why, and what can be asked instead.
        reason: String,
    },
    /// The requests cannot all be counted at once.
    Conflict(Conflict),
    /// A set without requests cannot be bound.
    EmptySet,
    /// The operation needs a bound set.
    NotBound,
    /// The operation needs a frozen (or a running) set, and it is in the other state.
    WrongState(&'static str),
    /// Overflow notification asked of a backend that cannot interrupt on overflow.
    OverflowUnsupported {
        /// The backend.
        backend: String,
    },
    /// The kernel refused for lack of privilege.
    PermissionDenied {
        /// What was attempted.
        what: String,
        /// What would fix it.
        fix: String,
    },
    /// The counters were taken away (invalidated) or are in use by someone else.
    Busy(String),
    /// No such process or thread.
    NoSuchProcess(i32),
    /// The process has exited and is a zombie (its parent has not waited for it): nothing of
    /// it is left to trace or count.
    Zombie(i32),
    /// No such CPU (or it is offline).
    NoSuchCpu(u32),
    /// The operation is not supported by this backend.
    Unsupported(String),
    /// A configuration file (event map, cost table) is malformed.
    BadFile {
        /// The file.
        file: String,
        /// 1-based line number (0 when the whole file is at fault).
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// A configuration file (event map, cost table) cannot be read.
    FileUnreadable {
        /// The file.
        file: String,
        /// The errno of the failed open or read.
        errno: i32,
    },
    /// Any other invalid argument.
    InvalidArgument(String),
    /// A request index outside the set (no allocation: used on signal-safe paths).
    IndexOutOfRange {
        /// The index given, as the caller gave it (a C caller's may be negative).
        index: i64,
        /// Number of requests in the set.
        len: usize,
    },
    /// A sample buffer smaller than the set (no allocation: used on signal-safe paths).
    BufferTooSmall {
        /// Values the buffer holds.
        len: usize,
        /// Requests in the set.
        need: usize,
    },
    /// A command to count (the `perfex` command's) could not be started.
    CannotRun {
        /// The command name.
        command: String,
        /// The errno of the failed `execvp`.
        errno: i32,
    },
    /// A C caller's argument that cannot be used (a NULL pointer, a handle that is not a live
    /// one of its kind): the whole message, fixed so that it costs no allocation.
    BadArgument(&'static str),
    /// A NULL pointer where the C function writes or reads through it (`EFAULT`): the message.
    Fault(&'static str),
    /// No event name given (NULL or empty): the libcpc subcode `CPC_INVALID_EVENT`.
    MissingEvent(&'static str),
    /// A libcpc version this library does not implement.
    Version {
        /// The version asked for.
        requested: i32,
        /// The one implemented.
        implemented: i32,
    },
    /// A program's callback returned non-zero, which ends the process-control run it was
    /// called from (libpctx's rule).
    CallbackRefused {
        /// Which callback.
        what: &'static str,
        /// What it returned.
        rc: i32,
    },
    /// An empty file name where a file is to be read (`ENOENT`).
    NoFileName,
    /// An MPI rank that is not counting (`ESRCH`).
    NotCounting,
    /// An MPI rank's record that does not fit its buffer (`ENOSPC`).
    RecordTooSmall {
        /// Bytes the record needs, its NUL included.
        need: usize,
        /// Bytes the buffer has.
        len: usize,
    },
    /// Too many live C handles (`ENOMEM`).
    OutOfHandles,
    /// A bound set cannot be changed.
    SetBound,
    /// A set already holds as many requests as a set can.
    SetFull {
        /// The most a set holds.
        max: usize,
    },
    /// Bind flags other than the ones allowed.
    BindFlags {
        /// The flags given.
        flags: u32,
        /// Whether `CPC_BIND_LWP_INHERIT` (0x1) is allowed (otherwise only 0 is).
        inherit_allowed: bool,
    },
    /// A thread that is not a thread of the process (`ESRCH`).
    NotAThreadOf {
        /// The thread id.
        tid: i32,
        /// The process id.
        pid: i32,
    },
    /// A processor number beyond the machine's.
    NoSuchProcessor {
        /// The number given.
        id: i64,
        /// How many processors the machine has.
        ncpu: i64,
    },
    /// An offline processor (`ENOSYS`, libcpc's errno for it).
    ProcessorOffline(u32),
    /// A processor a set of this process is already bound to (`EAGAIN`).
    ProcessorTaken(u32),
    /// The calling thread could not be moved to the processor (the libcpc subcode
    /// `CPC_PBIND_FAILED`).
    PbindFailed {
        /// The processor.
        cpu: u32,
        /// The errno of `sched_setaffinity`.
        errno: i32,
    },
    /// A counter number walked that does not exist (no subcode, unlike [`Error::InvalidPicnum`]
    /// in a request).
    NoSuchPic {
        /// The counter number given.
        picnum: u32,
        /// How many counters there are.
        npic: u32,
    },
    /// The calling thread has no bound libcpc set.
    NoCurrentSet,
    /// A counter's descriptor is no longer the library's: the program closed it
    /// (`close_range`, a loop of `close`, `dup2` over it), and perhaps opened something else
    /// at its number. The set's counts are lost; its other calls fail the same way, and
    /// unbinding it closes only the descriptors still its own. errno `EBADF`.
    DescriptorClosed {
        /// The descriptor's number.
        fd: i32,
    },
    /// A system call failed in a way not covered above.
    Os {
        /// What the engine was doing.
        op: &'static str,
        /// The errno it got.
        errno: i32,
    },
}

impl Error {
    /// The `errno` value the C ABIs report for this error.
    pub fn errno(&self) -> i32 {
        match self {
            Error::PermissionDenied { .. } => libc::EACCES,
            Error::Busy(_) => libc::EAGAIN,
            Error::NoSuchProcess(_) | Error::Zombie(_) => libc::ESRCH,
            Error::OverflowUnsupported { .. } => libc::ENOTSUP,
            Error::NoSuchCpu(_) => libc::EINVAL,
            Error::Unsupported(_) => libc::ENOTSUP,
            Error::Fault(_) => libc::EFAULT,
            Error::OutOfHandles => libc::ENOMEM,
            Error::NoFileName => libc::ENOENT,
            Error::NotCounting => libc::ESRCH,
            Error::RecordTooSmall { .. } => libc::ENOSPC,
            Error::NotAThreadOf { .. } => libc::ESRCH,
            Error::ProcessorOffline(_) => libc::ENOSYS,
            Error::ProcessorTaken(_) => libc::EAGAIN,
            Error::PbindFailed { errno, .. } => *errno,
            Error::BadFile { .. } => libc::EINVAL,
            Error::DescriptorClosed { .. } => libc::EBADF,
            Error::Os { errno, .. }
            | Error::FileUnreadable { errno, .. }
            | Error::CannotRun { errno, .. } => *errno,
            _ => libc::EINVAL,
        }
    }

    /// The family of the error (the libcpc subcode).
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::UnknownEvent { .. } | Error::EventUnavailable { .. } => ErrorKind::InvalidEvent,
            Error::InvalidAttribute { .. } => ErrorKind::InvalidAttribute,
            Error::AttributeOutOfRange { .. } => ErrorKind::AttributeOutOfRange,
            Error::InvalidPicnum { .. } => ErrorKind::InvalidPicnum,
            Error::PicNotCapable { .. } => ErrorKind::PicNotCapable,
            Error::InvalidFlags { .. } | Error::ModeNotCountable { .. } => ErrorKind::InvalidFlags,
            Error::Conflict(c) => match c.reason {
                ConflictReason::SharedResource { .. } => ErrorKind::ResourceUnavailable,
                ConflictReason::TooManyRequests { .. } => ErrorKind::Other,
                _ => ErrorKind::ConflictingRequests,
            },
            Error::PermissionDenied { .. } => ErrorKind::RequiresPrivilege,
            Error::MissingEvent(_) => ErrorKind::InvalidEvent,
            // libcpc's cpc_bind_cpu first binds the thread to the processor (processor_bind),
            // which is what fails for a processor that does not exist or is offline: the
            // handler gets CPC_PBIND_FAILED for those too (errno stays EINVAL / ENOSYS).
            Error::PbindFailed { .. }
            | Error::NoSuchProcessor { .. }
            | Error::ProcessorOffline(_) => ErrorKind::PbindFailed,
            _ => ErrorKind::Other,
        }
    }

    /// Build an [`Error::Os`] from the current `errno`.
    pub fn last_os(op: &'static str) -> Error {
        Error::Os {
            op,
            errno: std::io::Error::last_os_error().raw_os_error().unwrap_or(0),
        }
    }
}

/// The text of `errno` alone, as `strerror(3)` gives it ("No such file or directory"):
/// `std::io::Error`'s `Display` adds " (os error 2)", Rust's own detail, which no message of
/// the library or its commands shows (issue 46 item 11). Every message built from an errno or
/// an I/O error goes through this or [`io_text`].
pub fn strerror(errno: i32) -> String {
    io_text(&std::io::Error::from_raw_os_error(errno))
}

/// The text of an I/O error without Rust's " (os error N)" (see [`strerror`]).
pub fn io_text(e: &std::io::Error) -> String {
    let text = e.to_string();
    match e.raw_os_error() {
        Some(n) => match text.strip_suffix(&format!(" (os error {n})")) {
            Some(t) => t.to_string(),
            None => text,
        },
        None => text,
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::UnknownEvent { event, backend } => {
                // Every unknown event says where the known ones are (issue 46 item 8).
                write!(
                    f,
                    "unknown event '{event}' on the {backend} backend (`perfex -l` lists the \
                     events that count here)"
                )
            }
            Error::EventUnavailable { event, reason } => {
                write!(f, "event '{event}' cannot be counted here: {reason}")
            }
            Error::InvalidAttribute { name, backend } => {
                write!(f, "unknown attribute '{name}' on the {backend} backend")
            }
            Error::AttributeOutOfRange { name, value, max } => write!(
                f,
                "attribute '{name}' value {value:#x} out of range (at most {max:#x})"
            ),
            Error::InvalidPicnum { picnum, npic } | Error::NoSuchPic { picnum, npic } => write!(
                f,
                "counter number {picnum} does not exist (counters are 0..{})",
                npic.saturating_sub(1)
            ),
            Error::PicNotCapable { event, picnum } => {
                write!(f, "event '{event}' cannot be counted on counter {picnum}")
            }
            Error::InvalidFlags { flags } => write!(f, "invalid request flags {flags:#x}"),
            Error::ModeNotCountable { event, reason } => {
                write!(
                    f,
                    "event '{event}' cannot count system mode alone: {reason}"
                )
            }
            Error::Conflict(c) => c.fmt(f),
            Error::EmptySet => write!(f, "the set does not contain any requests"),
            Error::NotBound => write!(f, "the set is not bound"),
            Error::WrongState(s) => write!(f, "{s}"),
            Error::OverflowUnsupported { backend } => write!(
                f,
                "the {backend} backend cannot interrupt on counter overflow"
            ),
            Error::PermissionDenied { what, fix } => {
                write!(f, "permission denied: {what}; {fix}")
            }
            Error::Busy(s) => write!(f, "counters unavailable: {s}"),
            Error::NoSuchProcess(p) => write!(f, "no such process or thread {p}"),
            Error::Zombie(p) => write!(
                f,
                "process {p} has exited: a zombie its parent has not waited for, with nothing \
                 left to trace"
            ),
            Error::NoSuchCpu(c) => write!(f, "no such CPU {c}, or it is offline"),
            Error::Unsupported(s) => write!(f, "not supported: {s}"),
            // A privileged process shows no part of a file's content: its user may not be
            // allowed to read the file (`sys::secure`).
            Error::BadFile { file, line, .. } if crate::base::sys::secure() => write!(
                f,
                "{file}:{line}: not a valid line (a privileged program does not show what it \
                 holds)"
            ),
            Error::BadFile { file, line, reason } if *line > 0 => {
                write!(f, "{file}:{line}: {reason}")
            }
            Error::BadFile { file, reason, .. } => write!(f, "{file}: {reason}"),
            Error::FileUnreadable { file, errno } => {
                write!(f, "{file}: cannot read it: {}", strerror(*errno))
            }
            Error::InvalidArgument(s) => write!(f, "invalid argument: {s}"),
            Error::IndexOutOfRange { index, len } => write!(
                f,
                "request index {index} out of range (the set has {len} requests)"
            ),
            Error::BufferTooSmall { len, need } => write!(
                f,
                "sample buffer holds {len} values, the set has {need} requests"
            ),
            Error::CannotRun { command, errno } => {
                write!(f, "cannot run '{command}': {}", strerror(*errno))
            }
            Error::BadArgument(s) | Error::Fault(s) | Error::MissingEvent(s) => write!(f, "{s}"),
            Error::Version {
                requested,
                implemented,
            } => write!(
                f,
                "version {requested} requested, this library implements version {implemented}"
            ),
            Error::OutOfHandles => write!(f, "too many live handles"),
            Error::NoFileName => write!(f, "empty cost file name"),
            Error::CallbackRefused { what, rc } => write!(
                f,
                "invalid argument: a callback refused: the {what} callback returned {rc}"
            ),
            Error::NotCounting => write!(
                f,
                "this rank is not counting (perfcompat_mpi_start failed or was not called)"
            ),
            Error::RecordTooSmall { need, len } => {
                write!(f, "the record needs {need} bytes, the buffer has {len}")
            }
            Error::SetBound => write!(f, "the set is bound: unbind it first"),
            Error::SetFull { max } => write!(f, "a set holds at most {max} requests"),
            Error::BindFlags {
                flags,
                inherit_allowed: true,
            } => write!(
                f,
                "invalid flags {flags:#x}: only CPC_BIND_LWP_INHERIT (0x1) is allowed"
            ),
            Error::BindFlags { flags, .. } => write!(f, "flags {flags:#x}: must be 0"),
            Error::NotAThreadOf { tid, pid } => {
                write!(f, "thread {tid} is not a thread of process {pid}")
            }
            Error::NoSuchProcessor { id, ncpu } => {
                write!(f, "processor {id} does not exist (this machine has {ncpu})")
            }
            Error::ProcessorOffline(id) => write!(f, "processor {id} is offline"),
            Error::ProcessorTaken(id) => write!(f, "a set is already bound to processor {id}"),
            Error::PbindFailed { cpu, .. } => {
                write!(f, "cannot move this thread to processor {cpu}")
            }
            Error::NoCurrentSet => write!(f, "the calling thread has no bound set"),
            Error::DescriptorClosed { fd } => write!(
                f,
                "the counter's descriptor {fd} was closed by the program (close_range, close or \
                 dup2 over it): its counts are lost; unbind the set and bind it again"
            ),
            Error::Os { op, errno } => write!(f, "{op} failed: {}", strerror(*errno)),
        }
    }
}

impl std::error::Error for Error {}

/// The engine's result type.
pub type Result<T> = std::result::Result<T, Error>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn os_error_texts_have_no_rust_suffix() {
        assert_eq!(strerror(libc::ENOENT), "No such file or directory");
        let e = Error::CannotRun {
            command: "x".into(),
            errno: libc::EACCES,
        };
        assert_eq!(e.to_string(), "cannot run 'x': Permission denied");
        let custom = std::io::Error::other("a custom error");
        assert_eq!(io_text(&custom), "a custom error");
    }
}
