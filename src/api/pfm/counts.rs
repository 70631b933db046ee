//! Reading the device's counters: the interrupt counts and raw counters of each CPU slot
//! (`PCNTGETCNT`, `PCNT5GETCNT2`, `PCNT5READCNTRS`), clearing them, and the IPL histogram
//! (`PCNTGETIPLHIS`) from the emulated PMU's interrupts or Linux's clock ticks.

use super::{Counts, Device, Errno, OpenMode, State, NIPL, PFM_COUNTERS, PFM_IPL};
use crate::engine;

impl Device {
    /// `PCNTCLEARCNT`: clear the counts (with `PFM_COUNTERS`) and the IPL histogram (with
    /// `PFM_IPL`); `EINVAL` with neither selected.
    pub fn clear(&self) -> Result<(), Errno> {
        let mut st = self.state();
        let counters = st.items & PFM_COUNTERS != 0;
        let ipl = st.items & PFM_IPL != 0;
        if !counters && !ipl {
            return Err(libc::EINVAL);
        }
        let now = self.counts_locked(&mut st);
        if counters {
            for s in 0..self.nslots {
                st.ipl_carry[s] += sim_ticks(&now[s], &st.active).saturating_sub(st.ipl_base[s]);
                st.ipl_base[s] = 0;
            }
            let values = self.sample_live(&st);
            for (l, v) in st.live.iter_mut().zip(values) {
                l.base = v;
            }
            st.acc = vec![[0; 3]; self.nslots];
            st.rem = vec![[0; 3]; self.nslots];
            st.pcc0 = engine::now_ns();
        }
        if ipl {
            let now = self.counts_locked(&mut st);
            for s in 0..self.nslots {
                st.ipl_carry[s] = 0;
                st.ipl_base[s] = sim_ticks(&now[s], &st.active);
            }
            st.ipl0 = self.linux_ipl(&st);
        }
        Ok(())
    }

    /// `PCNTGETCNT`/`PCNT5GETCNT`: the counts per slot ([`Device::nslots`]). `EINVAL` without
    /// `PFM_COUNTERS`.
    pub fn counts(&self) -> Result<Vec<Counts>, Errno> {
        let mut st = self.state();
        if st.items & PFM_COUNTERS == 0 {
            return Err(libc::EINVAL);
        }
        self.say_pending(&mut st);
        Ok(self.counts_locked(&mut st))
    }

    /// `PCNT5READCNTRS`: the raw counters of `cpu`'s slot (the sum of every slot for
    /// [`PMCTRS_ALL_CPUS`](super::PMCTRS_ALL_CPUS)).
    pub fn raw_ev5(&self, cpu: i64) -> Result<[u64; 3], Errno> {
        self.check_cpu(cpu)?;
        let mut st = self.state();
        let all = self.counts_locked(&mut st);
        let mut out = [0u64; 3];
        for (s, c) in all.iter().enumerate() {
            if self.mode == OpenMode::Each && cpu >= 0 && s != cpu as usize {
                continue;
            }
            for i in 0..3 {
                out[i] += c.raw[i];
            }
        }
        Ok(out)
    }

    /// `PCNTGETIPLHIS`: the IPL histogram per slot (see the module documentation). `EINVAL`
    /// without `PFM_IPL`.
    pub fn ipl(&self) -> Result<Vec<[u64; NIPL]>, Errno> {
        let mut st = self.state();
        if st.items & PFM_IPL == 0 {
            return Err(libc::EINVAL);
        }
        if self.sim.is_some() {
            let now = self.counts_locked(&mut st);
            return Ok((0..self.nslots)
                .map(|s| {
                    let mut h = [0u64; NIPL];
                    h[8] = st.ipl_carry[s]
                        + sim_ticks(&now[s], &st.active).saturating_sub(st.ipl_base[s]);
                    h
                })
                .collect());
        }
        let now = self.linux_ipl(&st);
        Ok(now
            .iter()
            .zip(&st.ipl0)
            .map(|(n, z)| {
                let mut h = [0u64; NIPL];
                for i in 0..NIPL {
                    h[i] = n[i].saturating_sub(z[i]);
                }
                h
            })
            .collect())
    }

    /// The Linux clock ticks per slot as IPL entries.
    pub(super) fn linux_ipl(&self, st: &State) -> Vec<[u64; NIPL]> {
        let mut out = vec![[0u64; NIPL]; self.nslots];
        if st.cpu_wide {
            let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
            for line in stat.lines() {
                let mut w = line.split_whitespace();
                let Some(cpu) = w.next().and_then(|n| n.strip_prefix("cpu")) else {
                    continue;
                };
                let Ok(cpu) = cpu.parse::<u32>() else {
                    continue;
                };
                if !self.cpus.contains(&cpu) {
                    continue;
                }
                let f: Vec<u64> = w.filter_map(|x| x.parse().ok()).collect();
                let g = |i: usize| f.get(i).copied().unwrap_or(0);
                let s = if self.mode == OpenMode::Each {
                    cpu as usize
                } else {
                    0
                };
                let Some(h) = out.get_mut(s) else { continue };
                h[8] += g(0) + g(1);
                h[0] += g(2);
                h[7] += g(3) + g(4);
                h[4] += g(5);
                h[1] += g(6);
            }
        } else {
            let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
            // Fields after the command name (which ends at the last ')'): state is field 3.
            let rest = stat.rsplit_once(')').map_or("", |r| r.1);
            let f: Vec<u64> = rest
                .split_whitespace()
                .map(|x| x.parse().unwrap_or(0))
                .collect();
            let g = |n: usize| f.get(n - 3).copied().unwrap_or(0);
            out[0][8] = g(14) + g(16);
            out[0][0] = g(15) + g(17);
        }
        out
    }

    fn counts_locked(&self, st: &mut State) -> Vec<Counts> {
        let values = self.sample_live(st);
        let mut out: Vec<Counts> = (0..self.nslots)
            .map(|_| Counts {
                ticks: [0; 3],
                raw: [0; 3],
                shift: st.shift,
                pcc: (engine::now_ns() - st.pcc0).max(0) as u64,
            })
            .collect();
        // Whole periods: folded ones, plus those of the live bindings' events and the
        // leftovers they started from; the leftover of all that is the raw counter.
        let mut events = st.rem.clone();
        for (l, v) in st.live.iter().zip(&values) {
            for c in 0..3 {
                events[l.slot][c] += v[c].wrapping_sub(l.base[c]);
            }
        }
        for s in 0..self.nslots {
            for c in 0..3 {
                let sh = st.shift[c];
                out[s].ticks[c] = st.acc[s][c] + (events[s][c] >> sh);
                out[s].raw[c] = events[s][c] & ((1u64 << sh) - 1);
            }
        }
        out
    }

    /// Per live binding, per counter: its engine value now (0 for counters it does not count).
    pub(super) fn sample_live(&self, st: &State) -> Vec<[u64; 3]> {
        st.live
            .iter()
            .map(|l| {
                let mut v = [0u64; 3];
                let mut vals = [0u64; 3];
                if l.binding.sample(&mut vals[..l.counters.len()]).is_ok() {
                    for (i, &c) in l.counters.iter().enumerate() {
                        v[c] = vals[i];
                    }
                } else {
                    // Unbound (after fork): nothing more than at the last fold.
                    v = l.base;
                }
                v
            })
            .collect()
    }
}

/// The sim's IPL user ticks: interrupts of the active counters.
fn sim_ticks(c: &Counts, active: &[bool; 3]) -> u64 {
    (0..3).filter(|&i| active[i]).map(|i| c.ticks[i]).sum()
}
