//! Enabling and disabling the device's counters: `PCNTENABLE`/`PCNTDISABLE` (all of them) and
//! EV5's `PCNT5ENABLE`/`PCNT5RESTART`/`PCNT5DISABLE`/`PCNT5WRITE` (chosen counters, on a CPU
//! or all).

use super::{default_shifts, Chip, Device, Errno, Ev5Op, OpenMode, PMCTRS_ALL_CPUS};

impl Device {
    /// `PCNTENABLE`: start counting the active counters (all of them when none is).
    pub fn enable(&self) -> Result<(), Errno> {
        let mut st = self.state();
        self.unbind(&mut st);
        if !st.active.iter().any(|&a| a) {
            // EV5 counters start disabled (PCNT5ENABLE selects them): enable them all.
            st.active = [true; 3];
        }
        self.bind(&mut st)
    }

    /// `PCNTDISABLE`: stop counting; the counts stay.
    pub fn disable(&self) -> Result<(), Errno> {
        let mut st = self.state();
        self.unbind(&mut st);
        st.enabled = false;
        Ok(())
    }

    pub(super) fn disable_all(&self) {
        let _ = self.disable();
    }

    /// EV5 `PCNT5ENABLE`/`PCNT5RESTART`/`PCNT5DISABLE`: `select` counters (`PF5_SEL_*`),
    /// `cpu` a CPU or [`PMCTRS_ALL_CPUS`] (`EINVAL` otherwise, or for an empty selection).
    pub fn select_ev5(&self, select: u64, cpu: i64, op: Ev5Op) -> Result<(), Errno> {
        self.check_cpu(cpu)?;
        if select == 0 || select & !7 != 0 || self.sim == Some(Chip::Ev4) {
            return Err(libc::EINVAL);
        }
        let mut st = self.state();
        self.unbind(&mut st);
        if st.chip != Chip::Ev5 {
            st.chip = Chip::Ev5;
            st.code = [0; 3];
            st.chosen = false;
            st.shift = default_shifts(Chip::Ev5);
            st.active = [false; 3];
        }
        let before = st.active;
        for c in 0..3 {
            if select & (1 << c) == 0 {
                continue;
            }
            match op {
                Ev5Op::Enable => st.active[c] = true,
                Ev5Op::Restart => {
                    st.active[c] = true;
                    for s in 0..self.nslots {
                        st.acc[s][c] = 0;
                        st.rem[s][c] = 0;
                    }
                }
                Ev5Op::Disable => st.active[c] = false,
            }
        }
        if op == Ev5Op::Disable && !st.enabled {
            return Ok(());
        }
        if st.active.iter().any(|&a| a) {
            // A selection that cannot be counted changes nothing.
            self.bind(&mut st).inspect_err(|_| st.active = before)
        } else {
            st.enabled = false;
            Ok(())
        }
    }

    /// `PCNT5WRITE`: set the raw counters of `select` (on `cpu`'s slot, or every slot) to
    /// `values`; the interrupt counts stay. `EINVAL` for a value of a whole period or more.
    pub fn write_ev5(&self, select: u64, cpu: i64, values: [u64; 3]) -> Result<(), Errno> {
        self.check_cpu(cpu)?;
        if select & !7 != 0 || self.sim == Some(Chip::Ev4) {
            return Err(libc::EINVAL);
        }
        let mut st = self.state();
        if (0..3).any(|c| select & (1 << c) != 0 && values[c] >> st.shift[c] != 0) {
            return Err(libc::EINVAL);
        }
        let was = st.enabled;
        self.unbind(&mut st);
        for s in 0..self.nslots {
            if self.mode == OpenMode::Each && cpu >= 0 && s != cpu as usize {
                continue;
            }
            for c in 0..3 {
                if select & (1 << c) != 0 {
                    st.rem[s][c] = values[c];
                }
            }
        }
        if was {
            self.bind(&mut st)?;
        }
        Ok(())
    }

    pub(super) fn check_cpu(&self, cpu: i64) -> Result<(), Errno> {
        if cpu == PMCTRS_ALL_CPUS || (cpu >= 0 && self.cpus.contains(&(cpu as u32))) {
            Ok(())
        } else {
            Err(libc::EINVAL)
        }
    }
}
