//! The device's configuration: opening a [`Device`], its events, periods and counting modes
//! (`PCNTSETMUX`, `PCNT5MUX`, `PCNT5FREQ`, `PCNT5CTXT`, `PCNTSETITEMS`, the logging modes). A
//! change made while counting re-binds, the counts carrying over.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::Mutex;

use super::{
    default_shifts, menu_event, Chip, Device, Errno, OpenMode, Prof, State, NIPL, PF5_CTXT_KERNEL,
    PF5_CTXT_USER, PFM_COUNTERS, PFM_IPL, PFM_PROFILING,
};
use crate::backend::Backend;
use crate::engine;

impl Device {
    pub(super) fn new(
        slot: usize,
        mode: OpenMode,
        cpus: Vec<u32>,
        nslots: usize,
        backend: &'static dyn Backend,
        sim: Option<Chip>,
    ) -> Device {
        let chip = sim.unwrap_or(Chip::Ev4);
        Device {
            slot,
            mode,
            cpus,
            nslots,
            backend,
            sim,
            st: Mutex::new(State {
                chip,
                code: [0; 3],
                shift: default_shifts(chip),
                active: [true; 3],
                items: PFM_COUNTERS,
                select: false,
                marked: false,
                user: true,
                system: true,
                ctxt_set: false,
                chosen: false,
                pending: [false; 3],
                pending_said: false,
                enabled: false,
                live: Vec::new(),
                acc: vec![[0; 3]; nslots],
                rem: vec![[0; 3]; nslots],
                pcc0: engine::now_ns(),
                ipl0: vec![[0; NIPL]; nslots],
                ipl_carry: vec![0; nslots],
                ipl_base: vec![0; nslots],
                urange: None,
                read_pos: 0,
                fallback_said: false,
                cpu_wide: false,
            }),
            prof: Prof {
                in_hook: AtomicUsize::new(0),
                closed: AtomicBool::new(false),
                binding: UnsafeCell::new(None),
                periods: UnsafeCell::new([0; 3]),
                buckets: UnsafeCell::new(Box::new([])),
                start: AtomicUsize::new(0),
                end: AtomicUsize::new(0),
                shift: AtomicU32::new(64),
                nb: AtomicUsize::new(0),
            },
            original: AtomicBool::new(false),
        }
    }

    /// How the device was opened.
    pub fn mode(&self) -> OpenMode {
        self.mode
    }

    /// Elements of the per-CPU arrays (`PCNTGETCNT`, `PCNTGETIPLHIS`): the number of CPUs for
    /// `PCNTOPENEACH`, else 1.
    pub fn nslots(&self) -> usize {
        self.nslots
    }

    pub(super) fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.st.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The interface the device speaks now.
    pub fn chip(&self) -> Chip {
        self.state().chip
    }

    /// `PCNTSETMUX`: EV4 events and frequencies. `freq0`: counter 0 every 2^12 (else 2^16);
    /// `freq1`: counter 1 every 2^8 (else 2^12); `disable`: bit n disables counter n.
    /// `EINVAL` for an unknown event, `disable` 3 or more, a non-zero `mbz`, or an emulated EV5.
    pub fn set_mux_ev4(
        &self,
        freq0: bool,
        freq1: bool,
        mux0: u32,
        mux1: u32,
        disable: u32,
        mbz: u32,
    ) -> Result<(), Errno> {
        if disable >= 3
            || mbz != 0
            || self.sim == Some(Chip::Ev5)
            || menu_event(Chip::Ev4, 0, mux0).is_none()
            || menu_event(Chip::Ev4, 1, mux1).is_none()
        {
            return Err(libc::EINVAL);
        }
        self.reconfigure(|st| {
            st.chip = Chip::Ev4;
            st.code = [mux0, mux1, 0];
            st.shift = [if freq0 { 12 } else { 16 }, if freq1 { 8 } else { 12 }, 16];
            st.active = [disable & 1 == 0, disable & 2 == 0, false];
            st.chosen = true;
            Ok(())
        })
    }

    /// `PCNT5MUX`: the three EV5 events, one byte each ([`pf5_mux`](super::pf5_mux)). `EINVAL` for a code not
    /// in its counter's menu, or on an emulated EV4.
    pub fn set_mux_ev5(&self, v: u64) -> Result<(), Errno> {
        let codes = [0, 1, 2].map(|c| ((v >> (8 * c)) & 0xff) as u32);
        if self.sim == Some(Chip::Ev4)
            || v >> 24 != 0
            || (0..3).any(|c| menu_event(Chip::Ev5, c as u32, codes[c]).is_none())
        {
            return Err(libc::EINVAL);
        }
        self.reconfigure(|st| {
            if st.chip != Chip::Ev5 {
                st.chip = Chip::Ev5;
                st.shift = default_shifts(Chip::Ev5);
                st.active = [false; 3];
            }
            st.code = codes;
            st.chosen = true;
            Ok(())
        })
    }

    /// `PCNT5FREQ`: per counter 0 (unchanged), 1 (65536, 65536, 16384 events) or 2 (256).
    pub fn set_freq_ev5(&self, v: u64) -> Result<(), Errno> {
        if self.sim == Some(Chip::Ev4) || v >> 6 != 0 || (0..3).any(|c| (v >> (2 * c)) & 3 == 3) {
            return Err(libc::EINVAL);
        }
        self.reconfigure(|st| {
            if st.chip != Chip::Ev5 {
                st.chip = Chip::Ev5;
                st.code = [0; 3];
                st.chosen = false;
                st.active = [false; 3];
            }
            let low = default_shifts(Chip::Ev5);
            for c in 0..3 {
                match (v >> (2 * c)) & 3 {
                    1 => st.shift[c] = low[c],
                    2 => st.shift[c] = 8,
                    _ => {}
                }
            }
            Ok(())
        })
    }

    /// `PCNT5CTXT`: count in user mode, kernel mode or both. `EINVAL` for none or unknown bits.
    pub fn set_ctxt_ev5(&self, v: u64) -> Result<(), Errno> {
        if v == 0 || v & !(PF5_CTXT_USER | PF5_CTXT_KERNEL) != 0 {
            return Err(libc::EINVAL);
        }
        self.reconfigure(|st| {
            st.user = v & PF5_CTXT_USER != 0;
            st.system = v & PF5_CTXT_KERNEL != 0;
            st.ctxt_set = true;
            Ok(())
        })
    }

    /// `PCNTSETITEMS`: `EINVAL` when no item (or an unknown bit) is selected.
    pub fn set_items(&self, items: u32) -> Result<(), Errno> {
        if items == 0 || items & !(PFM_COUNTERS | PFM_IPL | PFM_PROFILING) != 0 {
            return Err(libc::EINVAL);
        }
        self.reconfigure(|st| {
            st.items = items;
            Ok(())
        })
    }

    /// `PCNTLOGALL` (`select` false), `PCNTLOGSELECT` (true, and this process is marked).
    pub fn set_log(&self, select: bool) -> Result<(), Errno> {
        self.reconfigure(|st| {
            st.select = select;
            if select {
                st.marked = true;
            }
            Ok(())
        })
    }

    /// `PCNTLOGUSER`: unmark this process (with `PCNTLOGSELECT`, nothing is counted then).
    pub fn unmark(&self) -> Result<(), Errno> {
        self.reconfigure(|st| {
            st.marked = false;
            Ok(())
        })
    }

    /// `PCNTRENABLE`/`PCNTRDISABLE` were used on this device: the program was written to the
    /// original header, whose array requests take the array itself ([`req::ArrayArg`](super::req::ArrayArg)).
    pub fn speaks_original(&self) -> bool {
        self.original.load(Ordering::Relaxed)
    }

    /// Note that the program uses the original header's names (see [`Device::speaks_original`]).
    pub fn heard_original(&self) {
        self.original.store(true, Ordering::Relaxed);
    }

    /// Apply a configuration change; re-bind when enabled (counts carry over).
    fn reconfigure(&self, f: impl FnOnce(&mut State) -> Result<(), Errno>) -> Result<(), Errno> {
        let mut st = self.state();
        let was = st.enabled;
        if was {
            self.unbind(&mut st);
        }
        f(&mut st)?;
        if was {
            self.bind(&mut st)
        } else {
            Ok(())
        }
    }
}
