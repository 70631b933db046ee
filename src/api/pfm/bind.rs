//! Binding the device to the engine: the requests its active counters make, one counting
//! binding per CPU (or one for the process), the profile's notifying binding, and what an
//! engine error means in pfm's errno.

use super::profile::cell;
use super::table::{hook, TAG};
use super::{errno_of, menu_event, Device, Errno, Live, OpenMode, State, PFM_PROFILING};
use crate::engine;
use crate::{Binding, CounterSet, Error, Request, RequestFlags, Target};

/// User mode only, no notification.
const USER_MODE: RequestFlags = RequestFlags {
    user: true,
    system: false,
    hypervisor: false,
    notify_overflow: false,
};

impl Device {
    /// Fold the live bindings into `acc`/`rem` and drop them (and the profile's).
    pub(super) fn unbind(&self, st: &mut State) {
        let values = self.sample_live(st);
        let live = std::mem::take(&mut st.live);
        for (l, v) in live.iter().zip(values) {
            for c in 0..3 {
                st.rem[l.slot][c] += v[c].wrapping_sub(l.base[c]);
            }
        }
        drop(live);
        for s in 0..self.nslots {
            for c in 0..3 {
                let sh = st.shift[c];
                st.acc[s][c] += st.rem[s][c] >> sh;
                st.rem[s][c] &= (1u64 << sh) - 1;
            }
        }
        // SAFETY: inside `prof_mut`.
        self.prof_mut(|p| *unsafe { cell(&p.binding) } = None);
    }

    /// The generic name that stands for counter `c`'s event on perf (`None`: no Linux
    /// counterpart), or the event's own `PF_*` name when the `PERFCOMPAT_EVENTS` map defines
    /// it (issue 46 item 9: such a line was once loaded and never used; the map's name now
    /// wins over the built-in counterpart, as a name of the map does everywhere).
    fn counterpart(st: &State, c: usize) -> Option<&'static str> {
        let name = menu_event(st.chip, c as u32, st.code[c])?;
        if crate::base::eventmap::EventMap::global()
            .alias(name)
            .is_some()
        {
            return Some(name);
        }
        st.chip
            .model()
            .generics
            .iter()
            .find(|g| g.event == name)
            .map(|g| g.name.as_str())
    }

    /// The event request of counter `c` (`ENOENT` when it has no Linux counterpart on perf).
    fn request(&self, st: &State, c: usize, flags: RequestFlags) -> Result<Request, Errno> {
        let name = menu_event(st.chip, c as u32, st.code[c]).ok_or(libc::EINVAL)?;
        if self.sim.is_some() {
            return Ok(Request::new(name)
                .flags(flags)
                .on_counter(c as u32)
                .attr("int_every", 1u64 << st.shift[c]));
        }
        match Self::counterpart(st, c) {
            Some(g) => Ok(Request::new(g).flags(flags)),
            None => {
                crate::stderr_line!(
                    "pfm: {name} (counter {c}) has no Linux counterpart; select another event \
                     or disable the counter"
                );
                Err(libc::ENOENT)
            }
        }
    }

    /// Whether the host can count counter `c`'s event: it has a Linux counterpart, and a
    /// binding of it alone to this thread does not fail for want of the event (any other
    /// failure is left to the real binding to report).
    fn countable_here(&self, st: &State, c: usize) -> bool {
        let Some(g) = Self::counterpart(st, c) else {
            return false;
        };
        let mut set = CounterSet::new();
        if set.add(Request::new(g).flags(USER_MODE)).is_err() {
            return false;
        }
        !matches!(
            engine::bind_with(self.backend, &set, Target::CurrentThread),
            Err(Error::UnknownEvent { .. } | Error::EventUnavailable { .. })
        )
    }

    /// The read found counters of pfm(7)'s default selection that the host cannot count (they
    /// read 0): say so, once per device.
    pub(super) fn say_pending(&self, st: &mut State) {
        if st.chosen || st.pending_said || !st.pending.iter().any(|&p| p) {
            return;
        }
        st.pending_said = true;
        for c in (0..st.chip.ncounters()).filter(|&c| st.pending[c]) {
            let name = menu_event(st.chip, c as u32, st.code[c]).unwrap_or("?");
            let why = match Self::counterpart(st, c) {
                Some(g) => format!("this host cannot count {g}"),
                None => "it has no Linux counterpart".to_string(),
            };
            crate::stderr_line!(
                "pfm: {name} (counter {c}) is pfm(7)'s default selection and {why}: it reads 0 \
                 until PCNTSETMUX selects an event"
            );
        }
    }

    /// Bind the active counters (and the profile) and mark the device enabled. On perf, a
    /// counter of pfm(7)'s default selection (the program has not selected events yet) whose
    /// event the host cannot count is left out, pending (it reads 0): enabling before
    /// `PCNTSETMUX`, as programs do, works, and the selection binds what it names.
    pub(super) fn bind(&self, st: &mut State) -> Result<(), Errno> {
        st.enabled = true;
        st.pending = [false; 3];
        let ncounters = st.chip.ncounters();
        let mut counters: Vec<usize> = (0..ncounters).filter(|&c| st.active[c]).collect();
        if self.sim.is_none() && !st.chosen {
            for &c in &counters {
                st.pending[c] = !self.countable_here(st, c);
            }
            counters.retain(|&c| !st.pending[c]);
        }
        if counters.is_empty() {
            return Ok(());
        }
        // SAFETY: getpid is a plain system call.
        let pid = unsafe { libc::getpid() };
        let mut targets: Vec<(Target, usize)> = Vec::new();
        let cpu_wide = !st.select;
        if cpu_wide {
            for (i, &c) in self.cpus.iter().enumerate() {
                let slot = if self.mode == OpenMode::Each { i } else { 0 };
                targets.push((Target::Cpu(c), slot));
            }
        } else if st.marked {
            targets.push((Target::Process(pid), 0));
        }
        let flags = RequestFlags {
            user: st.user,
            system: st.system && (cpu_wide || (self.sim.is_none() && st.ctxt_set)),
            hypervisor: false,
            notify_overflow: false,
        };
        let mut set = CounterSet::new();
        for &c in &counters {
            set.add(self.request(st, c, flags)?)
                .map_err(|e| errno_of(&e))?;
        }
        let mut live = Vec::new();
        for (t, slot) in targets {
            match engine::bind_with(self.backend, &set, t) {
                Ok(b) => live.push(self.live(b, slot, &counters)),
                Err(e)
                    if matches!(t, Target::Cpu(_))
                        && matches!(e.errno(), libc::EACCES | libc::EPERM) =>
                {
                    // No privilege to count a CPU: count this process instead.
                    live.clear();
                    if !st.fallback_said {
                        crate::stderr_line!(
                            "pfm: counting a CPU needs privilege ({e}); counting this process \
                             and its children instead"
                        );
                        st.fallback_said = true;
                    }
                    let mut set = CounterSet::new();
                    let user_only = RequestFlags {
                        system: false,
                        ..flags
                    };
                    for &c in &counters {
                        set.add(self.request(st, c, user_only)?)
                            .map_err(|e| errno_of(&e))?;
                    }
                    let b = engine::bind_with(self.backend, &set, Target::Process(pid))
                        .map_err(|e| self.bind_error(st, &counters, &e))?;
                    live.push(self.live(b, 0, &counters));
                    break;
                }
                Err(e) => {
                    st.enabled = false;
                    return Err(self.bind_error(st, &counters, &e));
                }
            }
        }
        let cpu_wide = live
            .iter()
            .any(|l| matches!(l.binding.target(), Target::Cpu(_)));
        if cpu_wide != st.cpu_wide {
            // The ticks now come from elsewhere (the CPUs or the process): start over.
            st.cpu_wide = cpu_wide;
            st.ipl0 = self.linux_ipl(st);
        }
        st.live = live;
        if st.items & PFM_PROFILING != 0 && st.urange.is_some() {
            self.bind_profile(st, &counters)?;
        }
        Ok(())
    }

    /// Say why a bind failed, naming the pfm event when it is the host that cannot count it
    /// (then `ENOENT`, the kernel's word for an event it does not have).
    fn bind_error(&self, st: &State, counters: &[usize], e: &Error) -> Errno {
        let unavailable = matches!(
            e,
            Error::UnknownEvent { .. } | Error::EventUnavailable { .. }
        );
        let which: Vec<String> = counters
            .iter()
            .filter_map(|&c| {
                menu_event(st.chip, c as u32, st.code[c]).map(|n| format!("{n} (counter {c})"))
            })
            .collect();
        crate::stderr_line!("pfm: counting {}: {e}", which.join(", "));
        if unavailable {
            libc::ENOENT
        } else {
            errno_of(e)
        }
    }

    fn live(&self, binding: Binding, slot: usize, counters: &[usize]) -> Live {
        let mut v = [0u64; 3];
        let mut base = [0u64; 3];
        if binding.sample(&mut v[..counters.len()]).is_ok() {
            for (i, &c) in counters.iter().enumerate() {
                base[c] = v[i];
            }
        }
        Live {
            binding,
            slot,
            counters: counters.to_vec(),
            base,
        }
    }

    /// The profile: the calling thread's notifying binding of the active counters.
    pub(super) fn bind_profile(&self, st: &State, counters: &[usize]) -> Result<(), Errno> {
        engine::add_overflow_hook(hook).map_err(|e| errno_of(&e))?;
        let flags = RequestFlags {
            notify_overflow: true,
            ..USER_MODE
        };
        let mut set = CounterSet::new();
        let mut periods = [0u64; 3];
        for (i, &c) in counters.iter().enumerate() {
            periods[i] = 1u64 << st.shift[c];
            set.add(
                self.request(st, c, flags)?
                    .preset(0u64.wrapping_sub(periods[i])),
            )
            .map_err(|e| errno_of(&e))?;
        }
        let b = engine::bind_with(self.backend, &set, Target::CurrentThread)
            .map_err(|e| self.bind_error(st, counters, &e))?;
        self.prof_mut(|p| {
            b.set_user_data(TAG | self.slot);
            // SAFETY: inside `prof_mut`.
            unsafe {
                *cell(&p.periods) = periods;
                *cell(&p.binding) = Some(b);
            }
        });
        Ok(())
    }
}
