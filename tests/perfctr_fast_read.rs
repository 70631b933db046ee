//! perfctr's `vperfctr_read_ctrs` without a system call (issue 47 item 3): perfctr read the
//! counters through a mapped state page; here the engine's user-space read stands for it. Over
//! a model of the kernel with a PMU that allows user reads (`perfcompat::backend::perf::model`),
//! the calling thread's hardware counters are read with `rdpmc` from their perf pages, not with
//! `read()`; software events (no PMU counter, no user read) fall back to one `read()`. And
//! `vperfctr_read_state` gives the control as perfctr's driver did: `preserve` 0, and zeros
//! after a stop, with the sums kept.
//!
//! Each test runs on a thread of its own: a thread has one perfctr state.

use perf_event_open_sys::bindings as b;
use perfcompat::api::perfctr::{self as pc, Control, CpuControl};
use perfcompat::backend::perf::model::{Config, Model};
use perfcompat::backend::perf::names::PerfCode;
use perfcompat::backend::perf::PerfBackend;

const USR: u32 = 0x10000;

fn over() -> (&'static Model, &'static PerfBackend) {
    let m = Model::leak(Config::default());
    let be = PerfBackend::with_kernel(m).expect("the model answers the probe");
    (m, Box::leak(Box::new(be)))
}

fn hw(config: u32) -> PerfCode {
    PerfCode::new(b::PERF_TYPE_HARDWARE, config as u64)
}

/// Two a-mode counters of `evntsel`, without the TSC (its clock is not the counters' read).
fn control(evntsel: [u32; 2]) -> Control {
    let mut cpu = CpuControl {
        nractrs: 2,
        ..CpuControl::default()
    };
    cpu.pmc_map[..2].copy_from_slice(&[0, 1]);
    cpu.evntsel[..2].copy_from_slice(&evntsel);
    Control {
        cpu,
        ..Control::default()
    }
}

fn on_own_thread(f: impl FnOnce() + Send + 'static) {
    std::thread::spawn(f).join().unwrap();
}

#[test]
fn hardware_counters_are_read_with_rdpmc_not_read() {
    on_own_thread(|| {
        let (m, be) = over();
        pc::open().unwrap();
        // 0x79 cycles, 0xC0 instructions: the kernel's generic hardware events.
        pc::control_with(be, &control([0x79 | USR, 0xC0 | USR])).unwrap();
        m.advance(hw(b::PERF_COUNT_HW_CPU_CYCLES), 5000);
        m.advance(hw(b::PERF_COUNT_HW_INSTRUCTIONS), 1234);
        let (reads, rdpmcs) = (m.reads(), m.rdpmc_reads());
        let s = pc::read().unwrap();
        assert_eq!((s.pmc[0], s.pmc[1]), (5000, 1234));
        assert_eq!(m.reads(), reads, "no read() system call");
        assert_eq!(m.rdpmc_reads(), rdpmcs + 2, "one rdpmc per counter");
        pc::unlink().unwrap();
    });
}

#[test]
fn software_events_fall_back_to_one_read() {
    on_own_thread(|| {
        let (m, be) = over();
        pc::open().unwrap();
        let faults = PerfCode::new(b::PERF_TYPE_SOFTWARE, b::PERF_COUNT_SW_PAGE_FAULTS as u64);
        let switches = PerfCode::new(
            b::PERF_TYPE_SOFTWARE,
            b::PERF_COUNT_SW_CONTEXT_SWITCHES as u64,
        );
        pc::control_with(
            be,
            &control([
                pc::control::SOFTWARE | 2 | USR,
                pc::control::SOFTWARE | 3 | USR,
            ]),
        )
        .unwrap();
        m.advance(faults, 40);
        m.advance(switches, 3);
        let (reads, rdpmcs) = (m.reads(), m.rdpmc_reads());
        let s = pc::read().unwrap();
        assert_eq!((s.pmc[0], s.pmc[1]), (40, 3));
        assert_eq!(m.reads(), reads + 1, "one read() for the group");
        assert_eq!(m.rdpmc_reads(), rdpmcs, "no user read of a software event");
        pc::unlink().unwrap();
    });
}

#[test]
fn read_state_reports_the_control_as_perfctr_did() {
    on_own_thread(|| {
        let (m, be) = over();
        pc::open().unwrap();
        let mut c = control([0x79 | USR, 0xC0 | USR]);
        c.cpu.tsc_on = 1;
        c.preserve = 1;
        pc::control_with(be, &c).unwrap();
        m.advance(hw(b::PERF_COUNT_HW_INSTRUCTIONS), 77);
        let (s, now) = pc::read_state().unwrap();
        assert_eq!(s.pmc[1], 77);
        assert_eq!(now.cpu, c.cpu, "the control in force");
        assert_eq!(
            now.preserve, 0,
            "preserve belongs to a control, not to the state"
        );
        pc::stop().unwrap();
        assert!(!pc::is_running());
        let (s, now) = pc::read_state().unwrap();
        assert_eq!(s.pmc[1], 77, "the sums are kept");
        assert_eq!(
            now,
            Control::default(),
            "stopped: an empty control, as perfctr's library stopped"
        );
        pc::unlink().unwrap();
    });
}
