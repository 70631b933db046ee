//! How a traced thread's `cpc_enable`/`cpc_disable` reach its controller (cpc_enable(3CPC):
//! "the LWP's counting context", which on Solaris a cputrack'd program could stop and start
//! itself; on Linux the counters belong to the controller's perf events, which the traced
//! program cannot touch).
//!
//! - The command a libpctx controller starts ([`super::Pctx::create_for_cpc`]) gets, between
//!   its fork and its exec, a seccomp filter that passes every system call through except one
//!   `prctl(2)` option no kernel has ([`DISABLE`], [`ENABLE`]): for those it asks the tracer
//!   (`SECCOMP_RET_TRACE`).
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
//! - A process taken with `pctx_capture` (`cputrack -p pid`) has no filter (none can be added
//!   to a running process): its `cpc_disable` does not reach the controller.
//! - The program may install seccomp filters of its own (issue 44 item 5). The controller asks
//!   for every seccomp stop (`PTRACE_O_TRACESECCOMP`), so it also gets the stops of the
//!   program's `SECCOMP_RET_TRACE`: it takes a stop only for the private `prctl` itself, read
//!   from the thread (`PTRACE_GET_SYSCALL_INFO`, the registers before Linux 5.3), and makes
//!   any other traced call fail with `ENOSYS` without running, as with no tracer (seccomp(2)),
//!   whatever data the program's filter returns ([`stopped`]). A program's filter that answers
//!   our `prctl` with a stronger action than `SECCOMP_RET_TRACE` (`SECCOMP_RET_ERRNO`,
//!   `_TRAP`, `_KILL_*`, `_USER_NOTIF`) wins over ours (the kernel takes the most restrictive
//!   action of all filters): that `cpc_disable` is not heard, and the thread is counted
//!   throughout, as for a captured process.

/// The `prctl(2)` option of `cpc_disable` ("PCTD"): no kernel defines it.
pub const DISABLE: u32 = 0x5043_5444;
/// The `prctl(2)` option of `cpc_enable` ("PCTE").
pub const ENABLE: u32 = 0x5043_5445;

/// The seccomp event data of [`DISABLE`] and [`ENABLE`]: the controller decides by the call
/// itself, the data only tells whether our filter made the stop (see [`stopped`]).
const DATA_DISABLE: u32 = 1;
const DATA_ENABLE: u32 = 2;

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
///
/// The call's number is looked at first, its architecture second (issue 48). Installing a
/// filter, the kernel runs it once per system call number of each architecture to find the
/// numbers it always allows (its action cache, Linux 5.11): about 900 runs on arm64, each
/// running the filter's instructions up to its `RET`. Number first, every number but
/// `prctl`'s leaves after two instructions instead of four: about 18 k instructions less
/// per command started in the arm64 guest. The decisions are the same (the unit tests run
/// both orders).
const FILTER: [libc::sock_filter; 12] = [
    op(LD_W_ABS, 0, 0, NR),
    op(JEQ_K, 0, 7, libc::SYS_prctl as u32), // any other call: allow (index 9)
    op(LD_W_ABS, 0, 0, ARCH),
    op(JEQ_K, 0, 5, AUDIT_ARCH), // prctl of another architecture's numbering: allow
    op(LD_W_ABS, 0, 0, ARG0_HI),
    op(JEQ_K, 0, 3, 0),
    op(LD_W_ABS, 0, 0, ARG0_LO),
    op(JEQ_K, 2, 0, DISABLE),   // to index 10
    op(JEQ_K, 2, 0, ENABLE),    // to index 11
    op(RET_K, 0, 0, RET_ALLOW), // 9
    op(RET_K, 0, 0, RET_TRACE | DATA_DISABLE),
    op(RET_K, 0, 0, RET_TRACE | DATA_ENABLE),
];

// ptrace(2)'s PTRACE_GET_SYSCALL_INFO (Linux 5.3) and its answer at a seccomp stop
// (struct ptrace_syscall_info with its seccomp member).
const PTRACE_GET_SYSCALL_INFO: libc::c_uint = 0x420e;
const INFO_SECCOMP: u8 = 3;

#[repr(C)]
struct SyscallInfo {
    op: u8,
    _pad: u8,
    _flags: u16,
    arch: u32,
    _ip: u64,
    _sp: u64,
    nr: u64,
    args: [u64; 6],
    _ret_data: u32,
    _pad2: u32,
}

/// Thread `tid` is stopped in `PTRACE_EVENT_SECCOMP`, before its call runs: what it asks.
/// `Some(false)` for `cpc_disable`'s private `prctl` ([`DISABLE`]), `Some(true)` for
/// `cpc_enable`'s ([`ENABLE`]): the caller stops or resumes the thread's counters. `None` for
/// any other call: a trace stop that a filter of the program's own asked for
/// (`SECCOMP_RET_TRACE`), not ours to take, so the call fails with `ENOSYS` as it does with no
/// tracer ([`refuse`]). The call itself decides, read from the thread (its number, its
/// architecture, its first argument), never the event's data: a program's filter may return
/// any data for any call. Where a program's filter traces our `prctl` too, the kernel reports
/// the program's data (the newest filter's, among equal actions): the call is heard, and fails
/// with `ENOSYS` as it would with the program's filter and no tracer. The caller resumes the
/// thread. With the answer, whether the stop was our filter's (the call not refused: the
/// caller may [`answer`] it).
pub(super) fn stopped(tid: i32) -> Option<(bool, bool)> {
    let mut data: libc::c_ulong = 0;
    // SAFETY: GETEVENTMSG writes one unsigned long.
    unsafe { libc::ptrace(libc::PTRACE_GETEVENTMSG, tid, 0usize, &mut data) };
    let asked = call(tid).and_then(|(nr, arg0)| {
        if nr != libc::SYS_prctl as u64 {
            return None;
        }
        match arg0 {
            a if a == u64::from(DISABLE) => Some(false),
            a if a == u64::from(ENABLE) => Some(true),
            _ => None,
        }
    });
    let ours = match asked {
        Some(false) => data == libc::c_ulong::from(DATA_DISABLE),
        Some(true) => data == libc::c_ulong::from(DATA_ENABLE),
        None => false,
    };
    if !ours {
        refuse(tid);
    }
    asked.map(|counting| (counting, ours))
}

/// The system call number and first argument of thread `tid` in a seccomp stop, `None` if it
/// is not a call of the native architecture (a 32-bit call of an x86-64 process) or cannot be
/// read.
fn call(tid: i32) -> Option<(u64, u64)> {
    // SAFETY: plain data.
    let mut info: SyscallInfo = unsafe { std::mem::zeroed() };
    // SAFETY: the kernel writes at most `size_of::<SyscallInfo>()` bytes into `info`.
    let n = unsafe {
        libc::ptrace(
            PTRACE_GET_SYSCALL_INFO,
            tid,
            std::mem::size_of::<SyscallInfo>(),
            &mut info as *mut SyscallInfo,
        )
    };
    if n > 0 {
        return (info.op == INFO_SECCOMP && info.arch == AUDIT_ARCH)
            .then_some((info.nr, info.args[0]));
    }
    // EIO: a kernel before 5.3; read the registers.
    (super::errno() == libc::EIO)
        .then(|| regs::call(tid))
        .flatten()
}

/// Make thread `tid`, stopped in `PTRACE_EVENT_SECCOMP` by a filter of the program's own, go on
/// as it would with no tracer: seccomp(2) says a `SECCOMP_RET_TRACE` with no tracer fails the
/// call with `ENOSYS` without running it. The call is skipped (its number set to -1) and its
/// result set to `-ENOSYS`; the caller then resumes the thread. Where the registers cannot be
/// written (another architecture, the thread gone) the call runs.
fn refuse(tid: i32) {
    regs::skip(tid, -libc::c_long::from(libc::ENOSYS));
}

#[cfg(target_arch = "x86_64")]
mod regs {
    // struct user_regs_struct: rax, rdi and orig_rax are its 11th, 15th and 16th words.
    const RAX: usize = 10 * 8;
    const RDI: usize = 14 * 8;
    const ORIG_RAX: usize = 15 * 8;

    fn peek(tid: i32, off: usize) -> Option<u64> {
        // SAFETY: PEEKUSER reads one word of the tracee's user area at a valid offset.
        unsafe {
            *libc::__errno_location() = 0;
            let v = libc::ptrace(libc::PTRACE_PEEKUSER, tid, off, 0usize);
            (v != -1 || super::super::errno() == 0).then_some(v as u64)
        }
    }

    pub(super) fn call(tid: i32) -> Option<(u64, u64)> {
        Some((peek(tid, ORIG_RAX)?, peek(tid, RDI)?))
    }

    pub(super) fn skip(tid: i32, ret: libc::c_long) {
        // SAFETY: POKEUSER writes one word of the tracee's user area at a valid offset.
        unsafe {
            libc::ptrace(libc::PTRACE_POKEUSER, tid, ORIG_RAX, -1 as libc::c_long);
            libc::ptrace(libc::PTRACE_POKEUSER, tid, RAX, ret);
        }
    }
}

#[cfg(target_arch = "aarch64")]
mod regs {
    const NT_PRSTATUS: usize = 1;
    const NT_ARM_SYSTEM_CALL: usize = 0x404;

    /// struct user_pt_regs: x0-x30, sp, pc, pstate.
    type Regs = [u64; 34];

    fn regset<T>(req: libc::c_uint, tid: i32, set: usize, v: &mut T) -> bool {
        let mut iov = libc::iovec {
            iov_base: (v as *mut T).cast(),
            iov_len: std::mem::size_of::<T>(),
        };
        // SAFETY: GETREGSET writes, SETREGSET reads, at most iov_len bytes of `v`.
        unsafe { libc::ptrace(req, tid, set, &mut iov as *mut libc::iovec) == 0 }
    }

    pub(super) fn call(tid: i32) -> Option<(u64, u64)> {
        let (mut nr, mut regs): (i32, Regs) = (-1, [0; 34]);
        (regset(libc::PTRACE_GETREGSET, tid, NT_ARM_SYSTEM_CALL, &mut nr)
            && regset(libc::PTRACE_GETREGSET, tid, NT_PRSTATUS, &mut regs))
        .then_some((nr as i64 as u64, regs[0]))
    }

    pub(super) fn skip(tid: i32, ret: libc::c_long) {
        // x0 holds the result once the call is skipped: arm64 does not set it.
        let mut regs: Regs = [0; 34];
        if regset(libc::PTRACE_GETREGSET, tid, NT_PRSTATUS, &mut regs) {
            regs[0] = ret as u64;
            regset(libc::PTRACE_SETREGSET, tid, NT_PRSTATUS, &mut regs);
        }
        let mut nr: i32 = -1;
        regset(libc::PTRACE_SETREGSET, tid, NT_ARM_SYSTEM_CALL, &mut nr);
    }
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
mod regs {
    pub(super) fn call(_tid: i32) -> Option<(u64, u64)> {
        None
    }

    pub(super) fn skip(_tid: i32, _ret: libc::c_long) {}
}

/// (In the controller's child, between fork and exec: async-signal-safe.) Install the filter;
/// without `CAP_SYS_ADMIN`, set `no_new_privs` first. Nothing is done where seccomp is not
/// available: the command then runs unheard.
pub(super) fn install_filter() {
    use crate::base::signal::syscall3_keeping_errno as sys;
    let prog = libc::sock_fprog {
        len: FILTER.len() as u16,
        filter: FILTER.as_ptr().cast_mut(),
    };
    // A system call that leaves `errno` alone (it fails with EACCES without CAP_SYS_ADMIN):
    // the child may run on its creator's thread's (`Child::spawn_traced`).
    let set = |prog: &libc::sock_fprog| {
        // SAFETY: PR_SET_SECCOMP reads the program, which outlives the call.
        unsafe {
            sys(
                libc::SYS_prctl,
                libc::PR_SET_SECCOMP as usize,
                libc::SECCOMP_MODE_FILTER as usize,
                prog as *const libc::sock_fprog as usize,
            )
        }
    };
    if set(&prog) == -(libc::EACCES as isize) {
        // SAFETY: a flag of the calling process (a call that cannot fail: errno untouched).
        if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } == 0 {
            set(&prog);
        }
    }
}

/// Tell the controller tracing this thread, if any, that its program asked its counting to
/// stop (`counting` false) or go on; see the module documentation. Returns whether a
/// controller that counts the thread heard it: it makes the call return 0 (`answer`);
/// without one, or without a filter, the call itself fails (`EINVAL`, or `ENOSYS` from a
/// filter with no tracer). libcpc version 1's `cpc_count_usr_events` fails as Solaris's
/// system call does then (no context); version 2's `cpc_enable` returns 0 either way.
/// Async-signal-safe; `errno` is kept.
pub fn tell_controller(counting: bool) -> bool {
    let option = if counting { ENABLE } else { DISABLE };
    // SAFETY: the thread's own errno, and an unknown prctl option: the kernel only returns an
    // error.
    unsafe {
        let errno = libc::__errno_location();
        let saved = *errno;
        let rc = libc::syscall(libc::SYS_prctl, libc::c_ulong::from(option), 0, 0, 0, 0);
        *errno = saved;
        rc == 0
    }
}

/// (The controller, thread `tid` stopped in [`stopped`] for our `prctl`, which it heard and
/// counts the thread.) Make the call return 0 without running, so that the thread knows it
/// was heard ([`tell_controller`]). The caller resumes the thread.
pub(super) fn answer(tid: i32) {
    regs::skip(tid, 0);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Run a filter of loads, equality jumps and returns (all `FILTER` uses) on a call as the
    /// kernel's classic BPF does: its action and how many instructions ran.
    fn run(f: &[libc::sock_filter], nr: u32, arch: u32, arg0: u64) -> (u32, usize) {
        let (mut a, mut pc, mut steps) = (0u32, 0usize, 0usize);
        loop {
            let i = f[pc];
            steps += 1;
            pc += 1;
            match i.code {
                LD_W_ABS => {
                    a = match i.k {
                        NR => nr,
                        ARCH => arch,
                        ARG0_LO => arg0 as u32,
                        ARG0_HI => (arg0 >> 32) as u32,
                        k => panic!("load of offset {k}"),
                    }
                }
                JEQ_K => pc += usize::from(if a == i.k { i.jt } else { i.jf }),
                RET_K => return (i.k, steps),
                c => panic!("instruction {c:#x}"),
            }
        }
    }

    /// The filter before issue 48's reordering: the architecture first.
    const ARCH_FIRST: [libc::sock_filter; 12] = [
        op(LD_W_ABS, 0, 0, ARCH),
        op(JEQ_K, 0, 7, AUDIT_ARCH),
        op(LD_W_ABS, 0, 0, NR),
        op(JEQ_K, 0, 5, libc::SYS_prctl as u32),
        op(LD_W_ABS, 0, 0, ARG0_HI),
        op(JEQ_K, 0, 3, 0),
        op(LD_W_ABS, 0, 0, ARG0_LO),
        op(JEQ_K, 2, 0, DISABLE),
        op(JEQ_K, 2, 0, ENABLE),
        op(RET_K, 0, 0, RET_ALLOW),
        op(RET_K, 0, 0, RET_TRACE | DATA_DISABLE),
        op(RET_K, 0, 0, RET_TRACE | DATA_ENABLE),
    ];

    const OTHER_ARCH: u32 = 0x4000_0028; // AUDIT_ARCH_ARM, arm64's 32-bit numbering

    #[test]
    fn the_filter_asks_the_tracer_for_libcpcs_prctl_alone() {
        let prctl = libc::SYS_prctl as u32;
        let cases = [
            (
                prctl,
                AUDIT_ARCH,
                u64::from(DISABLE),
                RET_TRACE | DATA_DISABLE,
            ),
            (
                prctl,
                AUDIT_ARCH,
                u64::from(ENABLE),
                RET_TRACE | DATA_ENABLE,
            ),
            (prctl, AUDIT_ARCH, 15, RET_ALLOW), // PR_SET_NAME
            (prctl, AUDIT_ARCH, 1 << 32 | u64::from(DISABLE), RET_ALLOW),
            (prctl, OTHER_ARCH, u64::from(DISABLE), RET_ALLOW),
            (prctl + 1, AUDIT_ARCH, u64::from(DISABLE), RET_ALLOW),
            (0, AUDIT_ARCH, 0, RET_ALLOW),
        ];
        for (nr, arch, arg0, want) in cases {
            assert_eq!(
                run(&FILTER, nr, arch, arg0).0,
                want,
                "{nr} {arch:#x} {arg0:#x}"
            );
        }
        // The same decisions as the architecture-first filter, call by call.
        for nr in 0..1024 {
            for arch in [AUDIT_ARCH, OTHER_ARCH] {
                for arg0 in [
                    0,
                    u64::from(DISABLE),
                    u64::from(ENABLE),
                    1 << 32 | 0x5043_5444,
                ] {
                    assert_eq!(
                        run(&FILTER, nr, arch, arg0).0,
                        run(&ARCH_FIRST, nr, arch, arg0).0,
                        "{nr} {arch:#x} {arg0:#x}"
                    );
                }
            }
        }
    }

    /// Issue 48: the kernel runs a new filter once per call number of each architecture when
    /// it is installed (its action cache): every call but `prctl` must leave after its number's
    /// load and test (three instructions with the `RET`; five with the architecture first,
    /// about 18 k instructions more per command started in the arm64 guest).
    #[test]
    fn every_other_call_is_let_go_after_its_number_alone() {
        let prctl = libc::SYS_prctl as u32;
        for nr in (0..1024).filter(|&n| n != prctl) {
            for arch in [AUDIT_ARCH, OTHER_ARCH] {
                let (action, steps) = run(&FILTER, nr, arch, 0);
                assert_eq!((action, steps), (RET_ALLOW, 3), "call {nr} of {arch:#x}");
            }
        }
    }
}
