//! The system calls of the model ([`Kernel`] for [`Model`]): `perf_event_open` and its
//! checks, `read`, the ioctls, `fcntl` (the overflow signal's owner), `mmap`/`munmap`,
//! `rdpmc`, and the signal an overflow sends.

use std::ffi::c_void;
use std::mem::MaybeUninit;
use std::os::fd::{FromRawFd, OwnedFd};
use std::ptr;

use perf_event_open_sys::bindings::{self as b, perf_event_attr, perf_event_mmap_page};

use super::{
    fits, is_hardware, Event, GroupCheck, Model, Pending, State, F_OWNER_PID, F_OWNER_TID,
    F_SETOWN_EX, F_SETSIG, PAGE, POLL_HUP, SAMPLE_TYPES,
};
use crate::backend::perf::kernel::Kernel;
use crate::backend::perf::names::PerfCode;

impl Model {
    fn check_open(
        &self,
        st: &State,
        attr: &perf_event_attr,
        pid: i32,
        cpu: i32,
        group_fd: i32,
    ) -> Result<(), i32> {
        let code = PerfCode {
            type_: attr.type_,
            config: attr.config,
            // SAFETY: plain integers in unions.
            config1: unsafe { attr.__bindgen_anon_3.config1 },
            // SAFETY: as above.
            config2: unsafe { attr.__bindgen_anon_4.config2 },
        };
        if attr.size as usize != std::mem::size_of::<perf_event_attr>() {
            return Err(libc::E2BIG);
        }
        if pid == -1 && cpu == -1 {
            return Err(libc::EINVAL);
        }
        if cpu >= self.cfg.cpus || cpu < -1 {
            return Err(libc::EINVAL);
        }
        if let Some(&(_, errno)) = st.refused.iter().find(|(c, _)| *c == code) {
            return Err(errno);
        }
        match attr.type_ {
            b::PERF_TYPE_SOFTWARE if attr.config >= b::PERF_COUNT_SW_MAX as u64 => {
                return Err(libc::ENOENT)
            }
            b::PERF_TYPE_SOFTWARE => {}
            _ if !self.cfg.pmu => return Err(libc::ENOENT),
            b::PERF_TYPE_HARDWARE if attr.config >= b::PERF_COUNT_HW_MAX as u64 => {
                return Err(libc::EINVAL)
            }
            _ => {}
        }
        // SAFETY: a plain integer in a union.
        let sampling = unsafe { attr.__bindgen_anon_1.sample_period } != 0;
        if sampling && st.no_sampling.contains(&code) {
            return Err(libc::EOPNOTSUPP);
        }
        if attr.use_clockid() != 0 && !self.cfg.use_clockid {
            return Err(libc::EINVAL);
        }
        if attr.sample_type & !SAMPLE_TYPES != 0 || attr.read_format >= b::PERF_FORMAT_MAX as u64 {
            return Err(libc::EINVAL);
        }
        if !self.cfg.privileged {
            if pid == -1 && self.cfg.paranoid > 0 {
                return Err(libc::EACCES);
            }
            if attr.exclude_kernel() == 0 && self.cfg.paranoid > 1 {
                return Err(libc::EACCES);
            }
        }
        // SAFETY: kill with signal 0 only checks the target exists.
        if pid > 0 && unsafe { libc::kill(pid, 0) } != 0 && last_errno() == libc::ESRCH {
            return Err(libc::ESRCH);
        }
        if st.events.len() >= self.cfg.max_fds {
            return Err(libc::EMFILE);
        }
        if group_fd != -1 {
            let Some(l) = self.index(st, group_fd) else {
                return Err(libc::EBADF);
            };
            if st.events[l].leader != group_fd {
                return Err(libc::EINVAL);
            }
            if is_hardware(code) {
                // The driver's group validation: the hardware members (and the new one) must
                // fit an empty PMU; with GroupCheck::EnabledOnly the disabled ones are left out.
                let checked = |enabled: bool| match self.cfg.group_check {
                    GroupCheck::AllMembers => true,
                    GroupCheck::EnabledOnly => enabled,
                };
                let mut codes: Vec<PerfCode> = st
                    .events
                    .iter()
                    .filter(|e| e.leader == group_fd && e.hardware && checked(e.enabled))
                    .map(|e| e.code)
                    .collect();
                if checked(attr.disabled() == 0) {
                    codes.push(code);
                }
                if !fits(&codes, self.cfg.counters, self.cfg.cycle_counter) {
                    return Err(libc::EINVAL);
                }
            }
        }
        Ok(())
    }
}

pub(super) fn unsafe_wakeup_events(attr: &perf_event_attr) -> u32 {
    // SAFETY: a plain integer in a union.
    unsafe { attr.__bindgen_anon_2.wakeup_events }
}

/// Copy a `T` from (or, with `to_user`, to) address `addr` of this process, or fail with
/// `EFAULT` as the kernel's copy does when the address is not mapped (an integer passed where a
/// pointer was due).
fn copy_user<T: Copy>(addr: usize, val: &mut T, to_user: bool) -> Result<(), i32> {
    let len = std::mem::size_of::<T>();
    let local = libc::iovec {
        iov_base: (val as *mut T).cast(),
        iov_len: len,
    };
    let remote = libc::iovec {
        iov_base: addr as *mut c_void,
        iov_len: len,
    };
    // SAFETY: process_vm_readv/writev on our own process check the remote address and fail
    // with EFAULT where it is not mapped; the local one is `val`.
    let n = unsafe {
        if to_user {
            libc::process_vm_writev(libc::getpid(), &local, 1, &remote, 1, 0)
        } else {
            libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0)
        }
    };
    if n == len as isize {
        Ok(())
    } else {
        Err(libc::EFAULT)
    }
}

fn last_errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

pub(super) fn inode(fd: i32) -> Option<u64> {
    let mut st = MaybeUninit::<libc::stat>::uninit();
    // SAFETY: fstat writes into `st`.
    if unsafe { libc::fstat(fd, st.as_mut_ptr()) } != 0 {
        return None;
    }
    // SAFETY: fstat succeeded.
    Some(unsafe { st.assume_init() }.st_ino)
}

/// Send an overflow signal as the kernel's `send_sigio` does.
pub(super) fn send(p: &Pending) {
    // SAFETY: a zeroed siginfo filled in field by field at the kernel's SIGPOLL layout:
    // si_signo, si_errno, si_code, then in the union `long si_band` and `int si_fd`.
    unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        let base = &mut info as *mut libc::siginfo_t as *mut u8;
        let union = (3 * 4usize).next_multiple_of(std::mem::align_of::<libc::c_long>());
        *(base as *mut i32) = p.sig;
        let me = libc::syscall(libc::SYS_gettid) as i32;
        if p.tid == me {
            *(base.add(8) as *mut i32) = p.code;
            let band = if p.code == POLL_HUP {
                libc::POLLHUP
            } else {
                libc::POLLIN | libc::POLLRDNORM
            };
            *(base.add(union) as *mut libc::c_long) = band as libc::c_long;
        } else {
            // Only the calling thread may be sent a kernel-style siginfo: SI_QUEUE, with the
            // descriptor where si_fd would be (si_value).
            *(base.add(8) as *mut i32) = libc::SI_QUEUE;
            *(base.add(union) as *mut i32) = libc::getpid();
        }
        *(base.add(union + std::mem::size_of::<libc::c_long>()) as *mut i32) = p.fd;
        libc::syscall(
            libc::SYS_rt_tgsigqueueinfo,
            libc::getpid(),
            p.tid,
            p.sig,
            &info as *const libc::siginfo_t,
        );
    }
}

impl Kernel for Model {
    fn perf_event_open(
        &self,
        attr: &mut perf_event_attr,
        pid: i32,
        cpu: i32,
        group_fd: i32,
        _flags: u64,
    ) -> Result<OwnedFd, i32> {
        let mut st = self.lock();
        self.purge(&mut st);
        self.check_open(&st, attr, pid, cpu, group_fd)?;
        // SAFETY: memfd_create with a static name.
        let raw = unsafe { libc::memfd_create(c"perf-model-event".as_ptr(), libc::MFD_CLOEXEC) };
        if raw < 0 {
            return Err(last_errno());
        }
        // SAFETY: a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let code = PerfCode {
            type_: attr.type_,
            config: attr.config,
            // SAFETY: plain integers in unions.
            config1: unsafe { attr.__bindgen_anon_3.config1 },
            // SAFETY: as above.
            config2: unsafe { attr.__bindgen_anon_4.config2 },
        };
        // SAFETY: a plain integer in a union (attr.freq is not modelled: periods only).
        let period = unsafe { attr.__bindgen_anon_1.sample_period };
        let id = st.next_id;
        st.next_id += 1;
        let leader = if group_fd == -1 { raw } else { group_fd };
        st.events.push(Event {
            fd: raw,
            ino: inode(raw).unwrap_or(0),
            code,
            attr: *attr,
            leader,
            id,
            hardware: is_hardware(code),
            enabled: attr.disabled() == 0,
            count: 0,
            enabled_ns: 0,
            running_ns: 0,
            period,
            left: period,
            overflows: 0,
            limit: None,
            async_: false,
            sig: 0,
            owner: 0,
            counter: None,
            hw: 0,
            page: ptr::null_mut(),
            map_len: 0,
            output: None,
        });
        self.schedule(&mut st);
        Ok(fd)
    }

    fn read(&self, fd: i32, buf: &mut [MaybeUninit<u64>]) -> Result<usize, i32> {
        let mut st = self.lock();
        st.reads += 1;
        let i = self.index(&st, fd).ok_or(libc::EBADF)?;
        let mut w = Vec::with_capacity(8);
        self.read_words(&st, i, &mut w);
        if w.len() > buf.len() {
            return Err(libc::ENOSPC);
        }
        for (o, v) in buf.iter_mut().zip(&w) {
            o.write(*v);
        }
        Ok(w.len() * 8)
    }

    fn ioctl(&self, fd: i32, request: u64, arg: usize) -> Result<i32, i32> {
        let mut st = self.lock();
        let i = self.index(&st, fd).ok_or(libc::EBADF)?;
        let group = arg as u64 & b::PERF_IOC_FLAG_GROUP as u64 != 0;
        let targets: Vec<usize> = if group {
            let l = st.events[i].leader;
            (0..st.events.len())
                .filter(|&k| st.events[k].leader == l)
                .collect()
        } else {
            vec![i]
        };
        match request as u32 {
            b::ENABLE | b::DISABLE => {
                for k in targets {
                    st.events[k].enabled = request as u32 == b::ENABLE;
                }
                self.schedule(&mut st);
                if self.cfg.ioctl_ns != 0 {
                    self.pass(&mut st, self.cfg.ioctl_ns);
                }
            }
            b::RESET => {
                for k in targets {
                    let e = &mut st.events[k];
                    e.count = 0;
                    if e.counter.is_some() {
                        self.program(e);
                    }
                    self.sync_page(&st, k);
                }
            }
            b::REFRESH => {
                if arg == 0 || st.events[i].period == 0 {
                    return Err(libc::EINVAL);
                }
                let e = &mut st.events[i];
                e.limit = Some(e.limit.unwrap_or(0) + arg as u64);
                e.enabled = true;
                self.schedule(&mut st);
            }
            b::PERIOD => {
                let mut p = 0u64;
                copy_user(arg, &mut p, false)?;
                let e = &mut st.events[i];
                if p == 0 || e.period == 0 || p >> 63 != 0 {
                    return Err(libc::EINVAL);
                }
                e.period = p;
                e.left = p;
                if e.counter.is_some() {
                    self.program(e);
                }
                self.sync_page(&st, i);
            }
            b::ID => {
                let mut id = st.events[i].id;
                copy_user(arg, &mut id, true)?;
            }
            b::SET_OUTPUT => {
                let target = arg as i32;
                if target == -1 {
                    st.events[i].output = None;
                } else {
                    self.index(&st, target).ok_or(libc::EBADF)?;
                    st.events[i].output = Some(target);
                }
            }
            _ => return Err(libc::ENOTTY),
        }
        Ok(0)
    }

    fn fcntl(&self, fd: i32, cmd: i32, arg: usize) -> Result<i32, i32> {
        let mut st = self.lock();
        let i = self.index(&st, fd).ok_or(libc::EBADF)?;
        let e = &mut st.events[i];
        match cmd {
            libc::F_SETFL => e.async_ = arg as i32 & libc::O_ASYNC != 0,
            F_SETSIG => {
                if arg as i32 > libc::SIGRTMAX() {
                    return Err(libc::EINVAL);
                }
                e.sig = arg as i32;
            }
            F_SETOWN_EX => {
                let mut owner = [0i32; 2];
                copy_user(arg, &mut owner, false)?;
                let [kind, pid] = owner;
                match kind {
                    F_OWNER_TID | F_OWNER_PID => e.owner = pid,
                    _ => return Err(libc::EINVAL),
                }
            }
            libc::F_SETOWN => e.owner = arg as i32,
            _ => return Err(libc::EINVAL),
        }
        Ok(0)
    }

    fn mmap(&self, fd: i32, len: usize, prot: i32, flags: i32) -> Result<*mut c_void, i32> {
        let mut st = self.lock();
        let i = self.index(&st, fd).ok_or(libc::EBADF)?;
        let pages = len / PAGE;
        if len % PAGE != 0 || pages == 0 || !(pages - 1).is_power_of_two() && pages != 1 {
            return Err(libc::EINVAL);
        }
        if flags & libc::MAP_SHARED == 0 || prot & libc::PROT_EXEC != 0 {
            return Err(libc::EINVAL);
        }
        if !st.events[i].page.is_null() {
            return Err(libc::EINVAL);
        }
        if st.mapped_pages + pages > self.cfg.max_mapped_pages {
            return Err(libc::EPERM);
        }
        // SAFETY: a fresh private anonymous mapping.
        let p = unsafe {
            libc::mmap(
                ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(last_errno());
        }
        let page = p as *mut perf_event_mmap_page;
        // SAFETY: the fresh mapping holds at least one page.
        unsafe {
            (*page).data_offset = if pages > 1 { PAGE as u64 } else { 0 };
            (*page).data_size = ((pages - 1) * PAGE) as u64;
        }
        st.mapped_pages += pages;
        let e = &mut st.events[i];
        e.page = page;
        e.map_len = len;
        self.sync_page(&st, i);
        Ok(p)
    }

    unsafe fn munmap(&self, addr: *mut c_void, len: usize) -> Result<(), i32> {
        let mut st = self.lock();
        let Some(i) = st.events.iter().position(|e| e.page as *mut c_void == addr) else {
            return Err(libc::EINVAL);
        };
        if st.events[i].map_len != len {
            return Err(libc::EINVAL);
        }
        st.events[i].page = ptr::null_mut();
        st.events[i].map_len = 0;
        st.mapped_pages -= len / PAGE;
        // SAFETY: the model's own mapping, forgotten above.
        unsafe { libc::munmap(addr, len) };
        Ok(())
    }

    fn rdpmc(&self, counter: u32) -> u64 {
        let mut st = self.lock();
        st.rdpmc_reads += 1;
        let Some(i) = st
            .events
            .iter()
            .position(|e| e.counter == Some(counter as usize))
        else {
            // A counter nobody uses reads as whatever it last held: 0 here.
            return 0;
        };
        if st.interfere > 0 {
            st.interfere -= 1;
            // An interrupt between the reader's reads of `lock`: the register is reprogrammed
            // and the offset moves with it.
            let e = &mut st.events[i];
            e.hw = if e.hw == self.mask() {
                self.mask() - 1
            } else {
                self.mask()
            };
            self.sync_page(&st, i);
        }
        st.events[i].hw
    }

    fn perf_event_paranoid(&self) -> i32 {
        self.cfg.paranoid
    }
}

impl Drop for Model {
    fn drop(&mut self) {
        let st = self.state.get_mut().unwrap_or_else(|e| e.into_inner());
        for e in &st.events {
            if !e.page.is_null() {
                // SAFETY: the model's own mapping.
                unsafe { libc::munmap(e.page.cast(), e.map_len) };
            }
        }
    }
}
