//! The modelled PMU at work: events happening ([`Model::advance`]) and time passing
//! ([`Model::tick`]), the enabled groups placed on the counters in rotation, a counter's
//! register programmed for its next interrupt.

use super::calls::{inode, send};
use super::{fits, is_cycles, Event, Model, Pending, State};
use crate::backend::perf::names::PerfCode;

impl Model {
    /// `n` events of kind `code` happen: every event counting `code` that is enabled, whose
    /// leader is enabled and whose group is on the PMU counts them. Overflows signal at the
    /// exact event (see the [module documentation](self)).
    pub fn advance(&self, code: PerfCode, n: u64) {
        self.advance_where(n, |e| e.code == code);
    }

    /// `n` events happen for the event `fd` alone.
    pub fn advance_fd(&self, fd: i32, n: u64) {
        self.advance_where(n, |e| e.fd == fd);
    }

    fn advance_where(&self, mut n: u64, sel: impl Fn(&Event) -> bool) {
        // Signals of overflows not yet delivered, with the events still to come before they
        // are (the skid).
        let mut queued: Vec<(u64, Pending)> = Vec::new();
        while n > 0 {
            let due;
            {
                let mut st = self.lock();
                self.purge(&mut st);
                let counting: Vec<usize> = (0..st.events.len())
                    .filter(|&i| sel(&st.events[i]) && self.counts(&st, i))
                    .collect();
                if counting.is_empty() {
                    break;
                }
                // The largest step that crosses no interrupt, no overflow and no delivery.
                let mut step = queued.iter().fold(n, |s, (d, _)| s.min(*d));
                for &i in &counting {
                    let e = &st.events[i];
                    if e.period != 0 {
                        step = step.min(e.left);
                    }
                    if e.counter.is_some() {
                        step = step.min(self.to_interrupt(e.hw));
                    }
                }
                let mask = self.mask();
                let mut overflowed = Vec::new();
                for &i in &counting {
                    let e = &mut st.events[i];
                    e.count = e.count.wrapping_add(step);
                    let mut interrupt = false;
                    if e.counter.is_some() {
                        e.hw = e.hw.wrapping_add(step) & mask;
                        interrupt = e.hw == 0;
                    }
                    if e.period != 0 {
                        e.left -= step;
                        if e.left == 0 {
                            e.left = e.period;
                            overflowed.push(i);
                            interrupt = true;
                        }
                    }
                    if interrupt && e.counter.is_some() {
                        self.program(e);
                    }
                }
                n -= step;
                for q in &mut queued {
                    q.0 -= step;
                }
                for i in overflowed {
                    if let Some(p) = self.overflow(&mut st, i) {
                        queued.push((self.cfg.skid, p));
                    }
                }
                for i in 0..st.events.len() {
                    self.sync_page(&st, i);
                }
                let (now, later) = queued.into_iter().partition(|(d, _)| *d == 0);
                (due, queued) = (now, later);
            }
            // Without the lock: the handler re-enters the model.
            for (_, p) in due {
                send(&p);
            }
        }
        // The rest come when the thread returns to user space.
        for (_, p) in queued {
            send(&p);
        }
    }

    /// `ns` nanoseconds pass: enabled events accumulate `time_enabled`, those on the PMU
    /// `time_running`; then the groups rotate.
    pub fn tick(&self, ns: u64) {
        let mut st = self.lock();
        self.purge(&mut st);
        self.pass(&mut st, ns);
        st.rotation += 1;
        self.schedule(&mut st);
    }

    /// `ns` nanoseconds pass: enabled events accumulate `time_enabled`, those on the PMU
    /// `time_running`.
    pub(super) fn pass(&self, st: &mut State, ns: u64) {
        st.now_ns += ns;
        for i in 0..st.events.len() {
            if self.enabled(st, i) {
                let running = self.on_pmu(st, i);
                let e = &mut st.events[i];
                e.enabled_ns += ns;
                if running {
                    e.running_ns += ns;
                }
            }
        }
        for i in 0..st.events.len() {
            self.sync_page(st, i);
        }
    }

    /// Events until the register wraps through zero.
    fn to_interrupt(&self, hw: u64) -> u64 {
        (self.mask() - hw).wrapping_add(1) & self.mask()
    }

    /// Program the register of an event on a counter with minus the events to its next
    /// interrupt (the kernel's x86 scheme).
    pub(super) fn program(&self, e: &mut Event) {
        let left = if e.period != 0 { e.left } else { u64::MAX };
        let left = left.min(self.max_period()).max(1);
        e.hw = left.wrapping_neg() & self.mask();
    }

    pub(super) fn index(&self, st: &State, fd: i32) -> Option<usize> {
        // A number whose event was closed and which now holds another file (a program's pipe)
        // is not the event, as in the kernel (issue 48: kept counters are checked by id).
        st.events
            .iter()
            .position(|e| e.fd == fd && inode(fd) == Some(e.ino))
    }

    /// Forget the events whose descriptors were closed.
    pub(super) fn purge(&self, st: &mut State) {
        let before = st.events.len();
        // A page still mapped when its descriptor is closed stays mapped (as in the kernel).
        st.events.retain(|e| inode(e.fd) == Some(e.ino));
        if st.events.len() != before {
            self.schedule(st);
        }
    }

    pub(super) fn leader_of(&self, st: &State, i: usize) -> Option<usize> {
        self.index(st, st.events[i].leader)
    }

    pub(super) fn enabled(&self, st: &State, i: usize) -> bool {
        st.events[i].enabled && self.leader_of(st, i).is_some_and(|l| st.events[l].enabled)
    }

    /// Whether event `i`'s group is on the PMU: every enabled hardware member has a counter
    /// (groups are scheduled whole; one without hardware members always is).
    pub(super) fn on_pmu(&self, st: &State, i: usize) -> bool {
        let leader = st.events[i].leader;
        st.events
            .iter()
            .filter(|e| e.leader == leader && e.hardware && e.enabled)
            .all(|e| e.counter.is_some())
    }

    fn counts(&self, st: &State, i: usize) -> bool {
        self.enabled(st, i) && self.on_pmu(st, i)
    }

    /// Place the enabled groups on the counters, round-robin from the rotation point.
    pub(super) fn schedule(&self, st: &mut State) {
        let leaders: Vec<i32> = st
            .events
            .iter()
            .filter(|e| e.leader == e.fd && e.enabled)
            .map(|e| e.fd)
            .collect();
        let mut assigned: Vec<(i32, usize)> = Vec::new();
        let mut free: Vec<usize> = (0..self.cfg.counters).collect();
        // The dedicated cycle counter (number `counters`), while free.
        let mut cycle_free = self.cfg.cycle_counter;
        let k = leaders.len();
        for j in 0..k {
            let l = leaders[(st.rotation + j) % k];
            let members: Vec<usize> = (0..st.events.len())
                .filter(|&i| {
                    st.events[i].leader == l && st.events[i].hardware && st.events[i].enabled
                })
                .collect();
            let codes: Vec<PerfCode> = members.iter().map(|&m| st.events[m].code).collect();
            if fits(&codes, free.len(), cycle_free) {
                // As the driver does: `cycles` takes the cycle counter while it is free, the
                // rest the general counters in order.
                for &m in &members {
                    let c = if cycle_free && is_cycles(st.events[m].code) {
                        cycle_free = false;
                        self.cfg.counters
                    } else {
                        free.remove(0)
                    };
                    assigned.push((st.events[m].fd, c));
                }
            }
        }
        for i in 0..st.events.len() {
            let new = assigned
                .iter()
                .find(|(fd, _)| *fd == st.events[i].fd)
                .map(|(_, c)| *c);
            let e = &mut st.events[i];
            if e.counter != new {
                e.counter = new;
                if new.is_some() {
                    self.program(e);
                }
            }
            self.sync_page(st, i);
        }
    }
}
