//! The perf backend on a PMU whose counters it measured (issue 28), over the kernel model
//! playing Linux 6.1's arm64 `armv8_pmuv3` driver as a QEMU guest has it: 6 general event
//! counters and the cycle counter only `cycles` can use; a group one member over opens and
//! never runs. libcpc's rules are checked through the engine's libcpc layer
//! (`perfcompat::api::cpc`: what `cpc_set_add_request`, `cpc_bind_curlwp` and the walkers call);
//! the subcode is the one the C layer derives from the error's kind
//! (`capi/src/edge/report.rs`: InvalidEvent is `CPC_INVALID_EVENT`, 1; Other is none).

use perf_event_open_sys::bindings as b;
use perfcompat::api::cpc::{self, set::Set, COUNT_USER};
use perfcompat::backend::perf::model::{Config, Model};
use perfcompat::backend::perf::names::PerfCode;
use perfcompat::backend::perf::{PerfBackend, PmuCounters, VIRTUAL_COUNTERS};
use perfcompat::backend::Backend;
use perfcompat::base::error::{ConflictReason, ErrorKind};
use perfcompat::{bind_with, CounterSet, Error, Request, Target};

mod common;
use common::{cpc_set, sample, NoSets};

fn hw(config: u32) -> PerfCode {
    PerfCode::new(b::PERF_TYPE_HARDWARE, u64::from(config))
}

fn instructions() -> PerfCode {
    hw(b::PERF_COUNT_HW_INSTRUCTIONS)
}

fn cycles() -> PerfCode {
    hw(b::PERF_COUNT_HW_CPU_CYCLES)
}

/// The arm64 guest's model and the backend over it, both leaked. The events QEMU's PMU lacks
/// answer `ENOENT`; without `-icount`, `instructions` too.
fn arm64(icount: bool) -> (&'static Model, &'static PerfBackend) {
    let m = Model::leak(Config::armv8_pmuv3());
    for config in [
        b::PERF_COUNT_HW_BRANCH_INSTRUCTIONS,
        b::PERF_COUNT_HW_CACHE_MISSES,
        b::PERF_COUNT_HW_BUS_CYCLES,
        b::PERF_COUNT_HW_REF_CPU_CYCLES,
    ] {
        m.refuse(hw(config), libc::ENOENT);
    }
    if !icount {
        m.refuse(instructions(), libc::ENOENT);
    }
    let be = PerfBackend::with_kernel(m).expect("the model answers the probe");
    (m, Box::leak(Box::new(be)))
}

fn set(events: &[&str]) -> CounterSet {
    let mut s = CounterSet::new();
    for e in events {
        s.add(Request::new(*e)).unwrap();
    }
    s
}

/// `cpc_bind_curlwp` of `s`.
fn bind_curlwp(be: &'static PerfBackend, s: &Set) -> perfcompat::Result<()> {
    s.bind_curlwp::<NoSets>(be, 1, false, 0)
}

/// `cpc_npic` is the PMU's counters: 6 general and the cycle counter; what `instructions`
/// can use where it is the general probe (with icount) and where it is missing (without:
/// the general counters are measured with `stalled-cycles-frontend`).
#[test]
fn npic_is_the_pmus_six_counters_and_the_cycle_counter() {
    for icount in [true, false] {
        let (_, be) = arm64(icount);
        assert_eq!(be.shape().counters, 7, "icount {icount}");
        assert_eq!(
            be.pmu_counters(),
            Some(PmuCounters {
                general: 6,
                cycles_only: 1,
                instructions_only: 0
            }),
            "icount {icount}"
        );
        assert_eq!(be.info().counters.len(), 7);
        assert!(
            be.info().notes.iter().any(|n| n.contains("6 that every")),
            "{:?}",
            be.info().notes
        );
    }
    // An x86-like PMU (the whole group checked at open) with 4 counters.
    let m = Model::leak(Config::default());
    let be = PerfBackend::with_kernel(m).unwrap();
    assert_eq!(be.shape().counters, 4);
    // Without a PMU, and where the measurement cannot tell (descriptors run out), the 16
    // virtual counters as before.
    for cfg in [
        Config {
            pmu: false,
            ..Config::default()
        },
        Config {
            max_fds: 2,
            ..Config::armv8_pmuv3()
        },
    ] {
        let be = PerfBackend::with_kernel(Model::leak(cfg.clone())).unwrap();
        assert_eq!(be.shape().counters, VIRTUAL_COUNTERS, "{cfg:?}");
        assert_eq!(be.pmu_counters(), None);
    }
}

/// Six `instructions` and `cycles`: the PMU's seven counters, `cycles` on the cycle counter
/// (number 6 in the model). They bind, run and count; software events join them without a
/// counter.
#[test]
fn seven_hardware_requests_bind_and_count() {
    let (m, be) = arm64(true);
    let mut names = vec!["instructions"; 6];
    names.push("cycles");
    let s = cpc_set(be, &names);
    bind_curlwp(be, s).unwrap();
    m.advance(instructions(), 1000);
    m.advance(cycles(), 3000);
    m.tick(1_000_000);
    let fd = m.fds(cycles())[0];
    assert_eq!(
        m.event(fd).unwrap().1.map(|(c, _)| c),
        Some(6),
        "cycle counter"
    );
    let mut v = [0u64; 7];
    let info = s
        .with_counters(1, |b| b.sample(&mut v))
        .expect("bound")
        .unwrap();
    assert_eq!(v, [1000, 1000, 1000, 1000, 1000, 1000, 3000]);
    assert!(info.complete && info.running_ns > 0, "{info:?}");
    s.unbind(1).unwrap();
    // And with two software events beside them: 9 requests, 7 of them on counters.
    names.extend(["task-clock", "page-faults"]);
    let b = bind_with(be, &set(&names), Target::CurrentThread).unwrap();
    m.advance(cycles(), 5);
    m.advance(
        PerfCode::new(b::PERF_TYPE_SOFTWARE, b::PERF_COUNT_SW_TASK_CLOCK as u64),
        7,
    );
    assert_eq!(sample(&b), vec![0, 0, 0, 0, 0, 0, 5, 7, 0]);
}

/// Seven `instructions` need seven general counters: refused at bind (EINVAL, the conflict
/// naming the six counters they can use), before anything is opened. Eight hardware requests
/// (and nine) are more than the seven counters: EINVAL without a subcode, as libcpc's
/// `nreqs > npic`. The kernel would have opened the group of eight and never run it.
#[test]
fn over_full_sets_are_refused_at_bind() {
    let (m, be) = arm64(true);
    let s = cpc_set(be, &["instructions"; 7]);
    let e = bind_curlwp(be, s).unwrap_err();
    assert_eq!(e.errno(), libc::EINVAL);
    let Error::Conflict(c) = &e else {
        panic!("{e:?}")
    };
    assert_eq!(
        c.reason,
        ConflictReason::SameCounter {
            counters: (0..6).collect()
        },
        "{e}"
    );
    assert_eq!(c.requests.len(), 7);
    assert!(e.to_string().contains("[0, 1, 2, 3, 4, 5]"), "{e}");
    assert_eq!(m.open_events(), 0, "nothing opened");
    assert!(!s.is_bound());
    for n in [8, 9] {
        let mut names = vec!["instructions"; 6];
        names.extend(vec!["cycles"; n - 6]);
        let s = cpc_set(be, &names);
        let e = bind_curlwp(be, s).unwrap_err();
        assert_eq!(e.errno(), libc::EINVAL);
        assert_eq!(e.kind(), ErrorKind::Other, "no subcode: {e}");
        let Error::Conflict(c) = &e else {
            panic!("{e:?}")
        };
        assert_eq!(
            c.reason,
            ConflictReason::TooManyRequests {
                requested: n,
                available: 7
            }
        );
        assert_eq!(m.open_events(), 0, "nothing opened");
    }
}

/// What the PMU lacks is refused at `cpc_set_add_request`: EINVAL, `CPC_INVALID_EVENT`, the
/// message naming the event (also through a generic name and the R10000 number libperfex
/// uses); what it has, and software events, are added.
#[test]
fn an_event_the_pmu_lacks_is_refused_at_add() {
    let (_, be) = arm64(false);
    let s = Set::new();
    for event in ["instructions", "branches", "cache-misses", "PAPI_tot_ins"] {
        let e = s
            .reqs
            .add(be, event.as_bytes(), 0, COUNT_USER, Vec::new())
            .unwrap_err();
        assert_eq!(e.errno(), libc::EINVAL, "{event}");
        assert_eq!(e.kind(), ErrorKind::InvalidEvent, "{event}: {e}");
        let text = e.to_string();
        assert!(
            text.contains(&format!("'{event}'")) && text.contains("ENOENT"),
            "{text}"
        );
    }
    // The engine's check, as libperfex and perfex reach it at bind.
    let e = bind_with(be, &set(&["instructions"]), Target::CurrentThread).unwrap_err();
    assert!(
        matches!(&e, Error::EventUnavailable { event, .. } if event == "instructions"),
        "{e:?}"
    );
    for event in [
        "cycles",
        "stalled-cycles-frontend",
        "task-clock",
        "page-faults",
    ] {
        s.reqs
            .add(be, event.as_bytes(), 0, COUNT_USER, Vec::new())
            .unwrap_or_else(|e| panic!("{event}: {e}"));
    }
    assert_eq!(s.reqs.len(), 4);
}

/// The walkers see each counter's events: the cycle counter only `cycles` (and its generic
/// name), the general ones every hardware event the PMU has, software events everywhere;
/// what the PMU lacks nowhere.
#[test]
fn walkers_list_each_counters_events() {
    let (_, be) = arm64(true);
    let npic = be.shape().counters as u32;
    let walk = |generic: bool, pic: u32| cpc::walk_events(be, generic, Some((pic, npic))).unwrap();
    let general = walk(false, 0);
    for want in [
        "instructions",
        "cycles",
        "stalled-cycles-frontend",
        "task-clock",
    ] {
        assert!(general.iter().any(|n| n == want), "{want} on pic 0");
    }
    for absent in ["branch-instructions", "cache-misses", "bus-cycles"] {
        assert!(!general.iter().any(|n| n == absent), "{absent} listed");
    }
    let cycle_counter = walk(false, 6);
    assert!(cycle_counter.iter().any(|n| n == "cycles"));
    assert!(cycle_counter.iter().any(|n| n == "task-clock"));
    assert!(
        !cycle_counter
            .iter()
            .any(|n| n == "instructions" || n == "stalled-cycles-frontend"),
        "{cycle_counter:?}"
    );
    assert_eq!(walk(true, 6), vec!["PAPI_tot_cyc".to_string()]);
    assert!(walk(true, 5).iter().any(|n| n == "PAPI_tot_ins"));
    let all = cpc::walk_events(be, false, None).unwrap();
    assert!(!all.iter().any(|n| n == "branch-instructions"));
    assert!(matches!(
        cpc::walk_events(be, false, Some((7, npic))),
        Err(Error::NoSuchPic { picnum: 7, npic: 7 })
    ));
}

/// Open a user-mode event on model `m` as the backend opens a set's members: in `leader`'s
/// group (a new group without one), disabled or not, read with the group format and times.
fn open_in_group(
    m: &Model,
    code: PerfCode,
    disabled: bool,
    leader: Option<&std::os::fd::OwnedFd>,
) -> Result<std::os::fd::OwnedFd, i32> {
    use perfcompat::backend::perf::kernel::Kernel;
    use std::os::fd::AsRawFd;
    let mut a = b::perf_event_attr {
        size: std::mem::size_of::<b::perf_event_attr>() as u32,
        type_: code.type_,
        config: code.config,
        read_format: (b::PERF_FORMAT_GROUP
            | b::PERF_FORMAT_TOTAL_TIME_ENABLED
            | b::PERF_FORMAT_TOTAL_TIME_RUNNING) as u64,
        ..Default::default()
    };
    a.set_disabled(u64::from(disabled));
    a.set_exclude_kernel(1);
    m.perf_event_open(&mut a, 0, -1, leader.map_or(-1, |l| l.as_raw_fd()), 0)
}

/// The model as the arm64 driver: with the leader disabled, a group of 8 (7 enabled members)
/// opens on 6 + 1 counters and never runs after the enable (`time_running` 0 while
/// `time_enabled` grows); a 9th member fails with EINVAL; `cycles` takes the cycle counter.
/// The x86-like check refuses the member that does not fit at open.
#[test]
fn the_model_plays_the_arm64_driver() {
    use perfcompat::backend::perf::kernel::Kernel;
    use std::mem::MaybeUninit;
    use std::os::fd::{AsRawFd, OwnedFd};
    let open = |m: &Model, code: PerfCode, leader: Option<&OwnedFd>| {
        open_in_group(m, code, leader.is_none(), leader)
    };
    let times = |m: &Model, leader: &OwnedFd| {
        let fd = leader.as_raw_fd();
        m.ioctl(fd, b::ENABLE as u64, 0).unwrap();
        let mut buf = [MaybeUninit::<u64>::uninit(); 16];
        m.read(fd, &mut buf).unwrap();
        m.ioctl(fd, b::DISABLE as u64, 0).unwrap();
        // SAFETY: the read wrote nr, enabled, running first.
        unsafe { (buf[1].assume_init(), buf[2].assume_init()) }
    };
    let m = Model::leak(Config::armv8_pmuv3());
    let leader = open(m, instructions(), None).unwrap();
    let mut members: Vec<OwnedFd> = (0..5)
        .map(|_| open(m, instructions(), Some(&leader)).unwrap())
        .collect();
    members.push(open(m, cycles(), Some(&leader)).unwrap());
    let (enabled, running) = times(m, &leader);
    assert!(
        enabled > 0 && running == enabled,
        "7 run: {enabled} {running}"
    );
    let on = m.event(members[5].as_raw_fd()).unwrap().1;
    assert_eq!(on, None, "disabled again");
    members.push(open(m, cycles(), Some(&leader)).unwrap());
    let (enabled2, running2) = times(m, &leader);
    assert!(enabled2 > enabled && running2 == running, "8 never run");
    assert_eq!(open(m, cycles(), Some(&leader)).err(), Some(libc::EINVAL));
    // Seven instructions: the 7th member-to-be is the 6th enabled general event, fine at open;
    // the group does not run.
    let leader = open(m, instructions(), None).unwrap();
    let _six: Vec<OwnedFd> = (0..6)
        .map(|_| open(m, instructions(), Some(&leader)).unwrap())
        .collect();
    assert_eq!(times(m, &leader).1, 0, "7 instructions never run");
    assert_eq!(
        open(m, instructions(), Some(&leader)).err(),
        Some(libc::EINVAL)
    );
    // cycles alone takes the cycle counter (number 6), while enabled.
    let c = open(m, cycles(), None).unwrap();
    m.ioctl(c.as_raw_fd(), b::ENABLE as u64, 0).unwrap();
    assert_eq!(m.event(c.as_raw_fd()).unwrap().1.map(|(n, _)| n), Some(6));
    // x86: the whole group is checked at open.
    let x86 = Model::leak(Config {
        cycle_counter: true,
        ..Config::default()
    });
    let leader = open(x86, cycles(), None).unwrap();
    let _four: Vec<OwnedFd> = (0..4)
        .map(|_| open(x86, cycles(), Some(&leader)).unwrap())
        .collect();
    assert_eq!(
        open(x86, cycles(), Some(&leader)).err(),
        Some(libc::EINVAL),
        "4 + 1 counters"
    );
}

/// The cases of `tests/guest/facts.c`, which the arm64 guest runs against the real
/// `armv8_pmuv3` driver (`bash .ci/arm64`), played on the model's arm64 configuration: each
/// group as a string of its events (`c` cycles, `i` instructions; the first is the leader),
/// the leader disabled or not, how many events open before the first `EINVAL`, and whether the
/// group runs once enabled. Where the driver and the model part, one of these fails.
#[test]
fn the_model_answers_as_the_real_driver_did_in_the_guest() {
    use perfcompat::backend::perf::kernel::Kernel;
    use std::mem::MaybeUninit;
    use std::os::fd::{AsRawFd, OwnedFd};
    let m = Model::leak(Config::armv8_pmuv3());
    let open = |code: PerfCode, disabled: bool, leader: Option<&OwnedFd>| {
        open_in_group(m, code, disabled, leader)
    };
    /// Events, leader disabled, events opened, errno of the next one, runs once enabled.
    type Case = (&'static str, bool, usize, Option<i32>, Option<bool>);
    let cases: [Case; 5] = [
        ("ciiiiii", true, 7, None, Some(true)),
        ("iiiiiiic", true, 8, None, Some(false)),
        ("ciiiiiii", true, 7, Some(libc::EINVAL), None),
        ("iiiiiiicc", true, 8, Some(libc::EINVAL), None),
        ("iiiiiiic", false, 6, Some(libc::EINVAL), None),
    ];
    for (spec, disabled, want_open, want_err, want_runs) in cases {
        let mut fds: Vec<OwnedFd> = Vec::new();
        let mut err = None;
        for (i, e) in spec.chars().enumerate() {
            let code = if e == 'c' { cycles() } else { instructions() };
            match open(code, i == 0 && disabled, fds.first()) {
                Ok(fd) => fds.push(fd),
                Err(e) => {
                    err = Some(e);
                    break;
                }
            }
        }
        assert_eq!(
            (fds.len(), err),
            (want_open, want_err),
            "{spec}: opened, errno"
        );
        if let Some(runs) = want_runs {
            let fd = fds[0].as_raw_fd();
            m.ioctl(fd, b::ENABLE as u64, 0).unwrap();
            m.tick(1000);
            let mut buf = [MaybeUninit::<u64>::uninit(); 16];
            m.read(fd, &mut buf).unwrap();
            m.ioctl(fd, b::DISABLE as u64, 0).unwrap();
            // SAFETY: the read wrote nr, enabled, running first.
            let (en, run) = unsafe { (buf[1].assume_init(), buf[2].assume_init()) };
            assert!(en > 0, "{spec}: time_enabled {en}");
            assert_eq!(run == en, runs, "{spec}: enabled {en}, running {run}");
            assert_eq!(run == 0, !runs, "{spec}: enabled {en}, running {run}");
        }
    }
}
