//! How a traced thread's `cpc_enable`/`cpc_disable` reach its controller (cpc_enable(3CPC):
//! "the LWP's counting context", which on Solaris a cputrack'd program could stop and start
//! itself; on Linux the counters belong to the controller's perf events, which the traced
//! program cannot touch).
//!
//! - The command a libpctx controller starts ([`super::Pctx::create_for_cpc`]) gets, between
//!   its fork and its exec, a seccomp filter that passes every system call through except one
//!   `prctl(2)` option no kernel has ([`DISABLE`], [`ENABLE`]): for those it asks the tracer
//!   (`SECCOMP_RET_TRACE`, the event's data saying which).
//! - libcpc's `cpc_disable`/`cpc_enable` on a thread without a set of its own make that
//!   `prctl` ([`tell_controller`]). Traced by a controller, the thread stops in
//!   `PTRACE_EVENT_SECCOMP` before the call runs, the controller stops or resumes the counters
//!   it bound to the thread ([`crate::base::held`]) and lets the thread go on: the change takes
//!   effect before `cpc_disable` returns. Untraced, or traced by a tool that does not ask for
//!   seccomp events, the call fails (`ENOSYS` or `EINVAL`) and nothing else happens.
//! - Installing a filter needs `CAP_SYS_ADMIN` or the `no_new_privs` bit: a controller without
//!   the capability sets the bit on the command. A traced exec gains no privileges on Linux
//!   anyway (a set-user-ID program runs with the caller's ids under an unprivileged tracer), so
//!   this changes nothing for the processes the controller follows; a child it does not follow
//!   (libpctx without a fork callback) keeps the bit and cannot gain privileges through
//!   set-user-ID programs either.
//! - A process taken with `pctx_capture` (`cputrack -o pid`) has no filter (none can be added
//!   to a running process): its `cpc_disable` does not reach the controller.

/// The `prctl(2)` option of `cpc_disable` ("PCTD"): no kernel defines it.
pub const DISABLE: u32 = 0x5043_5444;
/// The `prctl(2)` option of `cpc_enable` ("PCTE").
pub const ENABLE: u32 = 0x5043_5445;

/// The seccomp event data of [`DISABLE`] and [`ENABLE`].
pub(super) const DATA_DISABLE: libc::c_ulong = 1;
pub(super) const DATA_ENABLE: libc::c_ulong = 2;

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7;
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const AUDIT_ARCH: u32 = 0; // matches no architecture: the filter passes everything

const LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
const JEQ_K: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
const RET_K: u16 = 0x06; // BPF_RET | BPF_K
const RET_ALLOW: u32 = 0x7fff_0000;
const RET_TRACE: u32 = 0x7ff0_0000;
// struct seccomp_data: nr at 0, arch at 4, args[0] at 16 (little-endian: low half first).
const NR: u32 = 0;
const ARCH: u32 = 4;
const ARG0_LO: u32 = 16;
const ARG0_HI: u32 = 20;

const fn op(code: u16, jt: u8, jf: u8, k: u32) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

/// The filter: `prctl(DISABLE or ENABLE)` asks the tracer, everything else runs.
const FILTER: [libc::sock_filter; 12] = [
    op(LD_W_ABS, 0, 0, ARCH),
    op(JEQ_K, 0, 7, AUDIT_ARCH), // other architecture: allow (index 9)
    op(LD_W_ABS, 0, 0, NR),
    op(JEQ_K, 0, 5, libc::SYS_prctl as u32),
    op(LD_W_ABS, 0, 0, ARG0_HI),
    op(JEQ_K, 0, 3, 0),
    op(LD_W_ABS, 0, 0, ARG0_LO),
    op(JEQ_K, 2, 0, DISABLE),   // to index 10
    op(JEQ_K, 2, 0, ENABLE),    // to index 11
    op(RET_K, 0, 0, RET_ALLOW), // 9
    op(RET_K, 0, 0, RET_TRACE | DATA_DISABLE as u32),
    op(RET_K, 0, 0, RET_TRACE | DATA_ENABLE as u32),
];

/// (In the controller's child, between fork and exec: async-signal-safe.) Install the filter;
/// without `CAP_SYS_ADMIN`, set `no_new_privs` first. Nothing is done where seccomp is not
/// available: the command then runs unheard.
pub(super) fn install_filter() {
    let prog = libc::sock_fprog {
        len: FILTER.len() as u16,
        filter: FILTER.as_ptr().cast_mut(),
    };
    let set = |prog: &libc::sock_fprog| {
        // SAFETY: PR_SET_SECCOMP reads the program, which outlives the call.
        unsafe {
            libc::prctl(
                libc::PR_SET_SECCOMP,
                libc::SECCOMP_MODE_FILTER,
                prog as *const libc::sock_fprog,
            )
        }
    };
    // SAFETY: the thread's own errno.
    if set(&prog) < 0 && unsafe { *libc::__errno_location() } == libc::EACCES {
        // SAFETY: a flag of the calling process.
        if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } == 0 {
            set(&prog);
        }
    }
}

/// Tell the controller tracing this thread, if any, that its program asked its counting to
/// stop (`counting` false) or go on; see the module documentation. Nothing is returned: with a
/// controller, without one and without a filter, the call itself fails alike (`EINVAL`, or
/// `ENOSYS` from a filter with no tracer). Async-signal-safe; `errno` is kept.
pub fn tell_controller(counting: bool) {
    let option = if counting { ENABLE } else { DISABLE };
    // SAFETY: the thread's own errno, and an unknown prctl option: the kernel only returns an
    // error.
    unsafe {
        let errno = libc::__errno_location();
        let saved = *errno;
        libc::syscall(libc::SYS_prctl, libc::c_ulong::from(option), 0, 0, 0, 0);
        *errno = saved;
    }
}
