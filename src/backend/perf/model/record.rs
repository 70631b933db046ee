//! What the modelled kernel writes for the backend to read: the mapped user page (for
//! `rdpmc`), an overflow (its signal and its sample record in the ring buffer), and the
//! layouts of `read()`.

use std::ptr;

use perf_event_open_sys::bindings as b;

use super::calls::unsafe_wakeup_events;
use super::{sext, Event, Model, Overflow, Pending, State, PAGE, POLL_HUP, POLL_IN};

impl Model {
    /// Rewrite event `i`'s user page under its sequence lock.
    pub(super) fn sync_page(&self, st: &State, i: usize) {
        let e = &st.events[i];
        if e.page.is_null() {
            return;
        }
        let running = self.on_pmu(st, i) && self.enabled(st, i);
        let p = e.page;
        // SAFETY: the model's own live mapping of at least one page.
        unsafe {
            let lock = ptr::read_volatile(&(*p).lock);
            ptr::write_volatile(&mut (*p).lock, lock.wrapping_add(1));
            std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
            let rdpmc = e.hardware && self.cfg.user_rdpmc;
            let (index, offset) = match e.counter {
                Some(c) if rdpmc && running => (
                    c as u32 + 1,
                    e.count.wrapping_sub(sext(e.hw, self.cfg.width) as u64) as i64,
                ),
                _ => (0, e.count as i64),
            };
            ptr::write_volatile(&mut (*p).index, index);
            ptr::write_volatile(&mut (*p).offset, offset);
            ptr::write_volatile(&mut (*p).time_enabled, e.enabled_ns);
            ptr::write_volatile(&mut (*p).time_running, e.running_ns);
            // Bit 1: cap_bit0_is_deprecated; bit 2: cap_user_rdpmc.
            let caps = 1u64 << 1 | u64::from(rdpmc) << 2;
            ptr::write_volatile(&mut (*p).__bindgen_anon_1.capabilities, caps);
            ptr::write_volatile(
                &mut (*p).pmc_width,
                if e.hardware { self.cfg.width as u16 } else { 0 },
            );
            std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
            ptr::write_volatile(&mut (*p).lock, lock.wrapping_add(2));
        }
    }

    /// Record event `i`'s overflow: the sample record, the refresh limit, the signal to send.
    pub(super) fn overflow(&self, st: &mut State, i: usize) -> Option<Pending> {
        st.events[i].overflows += 1;
        let mut code = POLL_IN;
        if let Some(l) = st.events[i].limit.as_mut() {
            *l = l.saturating_sub(1);
            if *l == 0 {
                st.events[i].limit = None;
                st.events[i].enabled = false;
                code = POLL_HUP;
            }
        }
        self.write_sample(st, i);
        let e = &st.events[i];
        let wakeup = u64::from(unsafe_wakeup_events(&e.attr)).max(1);
        let deliver = e.async_ && e.owner != 0 && e.overflows % wakeup == 0;
        let sig = if deliver {
            if e.sig != 0 {
                e.sig
            } else {
                libc::SIGIO
            }
        } else {
            0
        };
        let (fd, count, owner) = (e.fd, e.count, e.owner);
        st.log.push(Overflow {
            fd,
            count,
            signal: sig,
            tid: owner,
        });
        if code == POLL_HUP {
            self.schedule(st);
        }
        (sig != 0).then_some(Pending {
            sig,
            tid: owner,
            fd,
            code,
        })
    }

    /// The read-format words of event `i` (its group's, with `PERF_FORMAT_GROUP`).
    pub(super) fn read_words(&self, st: &State, i: usize, out: &mut Vec<u64>) {
        let e = &st.events[i];
        let f = e.attr.read_format;
        let times = |out: &mut Vec<u64>, l: &Event| {
            if f & b::PERF_FORMAT_TOTAL_TIME_ENABLED as u64 != 0 {
                out.push(l.enabled_ns);
            }
            if f & b::PERF_FORMAT_TOTAL_TIME_RUNNING as u64 != 0 {
                out.push(l.running_ns);
            }
        };
        let id_lost = |out: &mut Vec<u64>, m: &Event| {
            if f & b::PERF_FORMAT_ID as u64 != 0 {
                out.push(m.id);
            }
            if f & b::PERF_FORMAT_LOST as u64 != 0 {
                out.push(0);
            }
        };
        if f & b::PERF_FORMAT_GROUP as u64 != 0 {
            let l = self.leader_of(st, i).unwrap_or(i);
            let members: Vec<&Event> = st
                .events
                .iter()
                .filter(|m| m.leader == st.events[l].fd)
                .collect();
            out.push(members.len() as u64);
            times(out, &st.events[l]);
            for m in members {
                out.push(m.count);
                id_lost(out, m);
            }
        } else {
            out.push(e.count);
            times(out, e);
            id_lost(out, e);
        }
    }

    /// Append a `PERF_RECORD_SAMPLE` for event `i` to its ring buffer (or its `SET_OUTPUT`
    /// target's), if one is mapped.
    fn write_sample(&self, st: &State, i: usize) {
        let e = &st.events[i];
        let ring = match e.output {
            Some(fd) => self.index(st, fd),
            None => Some(i),
        };
        let Some(r) = ring else { return };
        let re = &st.events[r];
        if re.page.is_null() || re.map_len <= PAGE {
            return;
        }
        let t = e.attr.sample_type;
        let mut w: Vec<u64> = Vec::new();
        if t & b::PERF_SAMPLE_IDENTIFIER as u64 != 0 {
            w.push(e.id);
        }
        if t & b::PERF_SAMPLE_IP as u64 != 0 {
            w.push(0);
        }
        if t & b::PERF_SAMPLE_TID as u64 != 0 {
            // SAFETY: plain system calls.
            let (pid, tid) = unsafe { (libc::getpid(), libc::syscall(libc::SYS_gettid) as i32) };
            w.push(pid as u32 as u64 | (tid as u32 as u64) << 32);
        }
        if t & b::PERF_SAMPLE_TIME as u64 != 0 {
            // With use_clockid, the clock asked for; else the model's own time.
            w.push(if e.attr.use_clockid() != 0 {
                let mut ts = libc::timespec {
                    tv_sec: 0,
                    tv_nsec: 0,
                };
                // SAFETY: writes into `ts`.
                unsafe { libc::clock_gettime(e.attr.clockid, &mut ts) };
                ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
            } else {
                st.now_ns
            });
        }
        if t & b::PERF_SAMPLE_ID as u64 != 0 {
            w.push(e.id);
        }
        if t & b::PERF_SAMPLE_STREAM_ID as u64 != 0 {
            w.push(e.id);
        }
        if t & b::PERF_SAMPLE_CPU as u64 != 0 {
            w.push(0);
        }
        if t & b::PERF_SAMPLE_PERIOD as u64 != 0 {
            w.push(e.period);
        }
        if t & b::PERF_SAMPLE_READ as u64 != 0 {
            self.read_words(st, i, &mut w);
        }
        let size = 8 + 8 * w.len();
        let header = b::PERF_RECORD_SAMPLE as u64
            | (b::PERF_RECORD_MISC_USER as u64) << 32
            | (size as u64) << 48;
        let p = re.page;
        let data = re.map_len - PAGE;
        // SAFETY: the model's own mapping: `PAGE` header bytes then `data` ring bytes.
        unsafe {
            let head = ptr::read_volatile(&(*p).data_head);
            let tail = ptr::read_volatile(&(*p).data_tail);
            if head.wrapping_sub(tail) as usize + size > data {
                return;
            }
            let base = (p as *mut u8).add(PAGE);
            let mut at = head as usize;
            for word in std::iter::once(header).chain(w) {
                for (k, byte) in word.to_ne_bytes().into_iter().enumerate() {
                    ptr::write_volatile(base.add((at + k) % data), byte);
                }
                at += 8;
            }
            std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
            ptr::write_volatile(&mut (*p).data_head, head + size as u64);
        }
    }
}
