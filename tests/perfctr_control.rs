//! perfctr's control data checked per CPU family (issue 47): the requests a valid control
//! programs (event, counter, modes, the preset that overflows after the hardware's distance),
//! and the `EINVAL` (with its cause) of too many counters, a `pmc_map` collision or out of
//! range, an `ireset` out of the family's range, an unknown `evntsel`, reserved bits; and the
//! perf backend's translations on hosts this one is not (issue 47 items 1 and 2 of the second
//! part): arm64's event numbers, a Pentium 4's CCCR/ESCR pairs as Linux's P4 raw events, pinned
//! bit by bit (no hardware PMU here to count them).

use perfcompat::api::perfctr::control::{
    arm64_event, is_netburst, raw_event, requests, CpuControl, Family, SOFTWARE,
};
use perfcompat::backend::sim::{model, ppc};
use perfcompat::Error;

fn p6() -> Family {
    Family::P6(model("pentium3").unwrap())
}

fn ppc750() -> Family {
    Family::Ppc(&ppc::PPC750)
}

/// `EINVAL` whose message contains `cause`.
fn refused(f: Family, c: &CpuControl, cause: &str) {
    match requests(f, c) {
        Err(e @ Error::InvalidArgument(_)) => {
            assert_eq!(e.errno(), libc::EINVAL);
            assert!(e.to_string().contains(cause), "{e}");
        }
        other => panic!("{c:?}: {other:?}, not EINVAL for {cause}"),
    }
}

const USR: u32 = 0x10000;
const OS: u32 = 0x20000;
const INT: u32 = 0x100000;
const EN: u32 = 0x400000;
/// Pentium 4 CCCR bits: ENABLE, ACTIVE_THREAD (both, without HyperThreading), OVF_PMI_T0.
const ENABLE: u32 = 1 << 12;
const ACTIVE: u32 = 3 << 16;
const PMI: u32 = 1 << 26;

#[test]
fn p6_control_programs_its_counters() {
    let mut c = CpuControl {
        nractrs: 1,
        nrictrs: 1,
        ..CpuControl::default()
    };
    c.pmc_map[..2].copy_from_slice(&[1, 0]);
    c.evntsel[0] = 0x79 | USR; // cycles on counter 1, user only
    c.evntsel[1] = 0xC1 | USR | OS | INT | EN; // FLOPS: counter 0 only
    c.ireset[1] = -5000;
    let r = requests(p6(), &c).unwrap();
    assert_eq!(r[0].event, "cpu_clk_unhalted");
    assert_eq!(r[0].counter, Some(1));
    assert!(r[0].flags.user && !r[0].flags.system && !r[0].flags.notify_overflow);
    assert_eq!(r[1].event, "flops");
    assert_eq!(r[1].counter, Some(0));
    assert!(r[1].flags.user && r[1].flags.system && r[1].flags.notify_overflow);
    assert_eq!(
        r[1].preset.wrapping_add(5000),
        0,
        "overflows after 5000 events"
    );
}

#[test]
fn p6_refuses_bad_control_data() {
    let ok = |evntsel: u32, pmc: u32| {
        let mut c = CpuControl {
            nractrs: 1,
            ..CpuControl::default()
        };
        c.evntsel[0] = evntsel;
        c.pmc_map[0] = pmc;
        c
    };
    assert!(requests(p6(), &ok(0xC0 | USR | EN, 0)).is_ok());
    let mut c = ok(0xC0 | USR | EN, 0);
    c.nractrs = 3;
    refused(
        p6(),
        &c,
        "3 counters (nractrs 3 + nrictrs 0): this CPU has 2",
    );
    c.nractrs = 2;
    c.evntsel[1] = 0x79 | USR;
    refused(p6(), &c, "counter 0 is mapped twice");
    refused(p6(), &ok(0xC0 | USR, 2), "pmc_map[0] = 2: no such counter");
    refused(
        p6(),
        &ok(0xEE | USR | EN, 0),
        "event 0xee is not a Pentium III event of counter 0",
    );
    refused(p6(), &ok(0x12 | USR | EN, 0), "event 0x12 is not"); // MUL: counter 1 only
    refused(p6(), &ok(0xC0 | USR, 0), "enable bit");
    refused(p6(), &ok(0xC0 | USR | EN, 1), "enable bit");
    refused(
        p6(),
        &ok(0xC0 | USR | EN | 0x80000, 0),
        "bits 19 and 21 are reserved",
    );
    refused(p6(), &ok(0xC0 | USR | EN | INT, 0), "INT bit");
    let mut c = ok(0xC0 | USR | EN | INT, 0);
    c.nractrs = 0;
    c.nrictrs = 1;
    c.ireset[0] = 0;
    refused(
        p6(),
        &c,
        "ireset[0] = 0: x86 i-mode counters restart from a negative value",
    );
    c.ireset[0] = -1;
    assert!(requests(p6(), &c).is_ok());
    c.evntsel[0] &= !INT;
    refused(p6(), &c, "INT bit");
}

#[test]
fn ppc_control_programs_its_counters_and_refuses_bad_data() {
    let mut c = CpuControl {
        nractrs: 1,
        nrictrs: 1,
        ppc_mmcr0: 0x2000_0000, // FCP: not in user mode
        ..CpuControl::default()
    };
    c.pmc_map[..2].copy_from_slice(&[2, 1]);
    c.evntsel[..2].copy_from_slice(&[5, 6]); // PMC3: L1 data misses; PMC2: ITLB misses
    c.ireset[1] = 0x7fff_ff00;
    let r = requests(ppc750(), &c).unwrap();
    assert_eq!(r[0].event, "l1_data_cache_misses");
    assert_eq!(r[1].event, "itlb_misses");
    assert!(!r[0].flags.user && r[0].flags.system);
    assert_eq!(r[1].preset.wrapping_add(0x100), 0, "2^31 - ireset events");
    let mut bad = c;
    bad.ireset[1] = -1;
    refused(
        ppc750(),
        &bad,
        "ireset[1] = -1: PowerPC i-mode counters restart from 0..0x7fffffff",
    );
    let mut bad = c;
    bad.evntsel[0] = 6; // code 6 is the ITLB misses on PMC2, the DTLB misses on PMC3
    assert_eq!(requests(ppc750(), &bad).unwrap()[0].event, "dtlb_misses");
    bad.evntsel[0] = 9;
    refused(
        ppc750(),
        &bad,
        "evntsel[0] = 0x9: not a PowerPC 750 event of PMC3",
    );
    let mut bad = c;
    bad.ppc_mmcr0 |= 0x40;
    refused(ppc750(), &bad, "PMC1SEL and PMC2SEL");
    let mut bad = c;
    bad.ppc_mmcr2 = 0x8000_0000;
    refused(ppc750(), &bad, "only THRESHMULT");
    // The 7450 takes THRESHMULT (cycles on PMC1, code 1).
    let mut g4 = CpuControl {
        nractrs: 1,
        ppc_mmcr2: 0x8000_0000,
        ..CpuControl::default()
    };
    g4.evntsel[0] = 1;
    assert_eq!(
        requests(Family::Ppc(&ppc::PPC7450), &g4).unwrap()[0].event,
        "cycles"
    );
    let mut bad = c;
    bad.nractrs = 4;
    refused(
        ppc750(),
        &bad,
        "5 counters (nractrs 4 + nrictrs 1): this CPU has 4",
    );
}

#[test]
fn perf_takes_software_events_generic_p6_ones_and_raw_events() {
    let mut c = CpuControl {
        nractrs: 2,
        nrictrs: 1,
        ..CpuControl::default()
    };
    c.pmc_map[..3].copy_from_slice(&[0, 1, 2]);
    c.evntsel[0] = SOFTWARE | 2 | USR | OS;
    c.evntsel[1] = 0x79 | USR;
    c.evntsel[2] = SOFTWARE | 1 | USR | INT;
    c.ireset[2] = -1_000_000;
    let r = requests(Family::Perf, &c).unwrap();
    let names: Vec<&str> = r.iter().map(|r| r.event.as_str()).collect();
    assert_eq!(names, ["page-faults", "cycles", "task-clock"]);
    assert_eq!(r[2].preset.wrapping_add(1_000_000), 0);
    c.evntsel[1] = SOFTWARE | 9 | USR;
    refused(
        Family::Perf,
        &c,
        "evntsel[1] = 0x210009: no such software event on the perf backend",
    );
    // Any other evntsel is the CPU's raw event: L2 requests with unit mask 0x41, edge, count
    // mask 2, OS only: the kernel's x86 raw config, the modes as flags.
    c.evntsel[1] = 0x0206_412E | OS;
    let r = requests(Family::Perf, &c).unwrap();
    assert_eq!(r[1].event, "r204412e", "OS is a flag, not config");
    assert!(!r[1].flags.user && r[1].flags.system);
    // A generic code with a unit mask is raw too.
    c.evntsel[1] = 0x0100 | 0xC0 | USR;
    assert_eq!(requests(Family::Perf, &c).unwrap()[1].event, "r1c0");
    c.evntsel[1] = 0x2E | USR | 0x80000;
    refused(Family::Perf, &c, "bits 19 and 21 are reserved");
    c.evntsel[1] = 0x2E;
    refused(Family::Perf, &c, "counts in no mode");
    let many = CpuControl {
        nractrs: 19,
        ..CpuControl::default()
    };
    refused(Family::Perf, &many, "this CPU has 18");
    // A huge count is refused, not wrapped.
    let huge = CpuControl {
        nractrs: u32::MAX,
        nrictrs: 2,
        ..CpuControl::default()
    };
    refused(Family::Perf, &huge, "this CPU has 18");
}

#[test]
fn a_cpu_without_translated_control_data_takes_only_the_tsc() {
    let tsc = CpuControl {
        tsc_on: 1,
        ..CpuControl::default()
    };
    assert!(requests(Family::TscOnly, &tsc).unwrap().is_empty());
    let one = CpuControl {
        nractrs: 1,
        ..CpuControl::default()
    };
    refused(Family::TscOnly, &one, "this CPU has 0");
}

#[test]
fn p4_control_finds_the_event_by_escr_select_and_event_select() {
    let p4 = Family::P4(model("pentium4").unwrap());
    let mut c = CpuControl {
        nractrs: 1,
        nrictrs: 1,
        ..CpuControl::default()
    };
    // Counter 0: FSB_ESCR0 (select 6), global_power_events (0x13, mask 1), user only.
    c.pmc_map[0] = 0x8000_0000;
    c.evntsel[0] = ENABLE | 6 << 13 | ACTIVE;
    c.p4_escr[0] = 0x13 << 25 | 1 << 9 | 1 << 2;
    // Counter 14: CRU_ESCR3 (select 5), branch_retired (6, mask 0xc), interrupting.
    c.pmc_map[1] = 14;
    c.evntsel[1] = ENABLE | 5 << 13 | ACTIVE | PMI;
    c.p4_escr[1] = 0x6 << 25 | 0xC << 9 | 1 << 2 | 1 << 3;
    c.ireset[1] = -100;
    let r = requests(p4, &c).unwrap();
    assert_eq!(
        (r[0].event.as_str(), r[0].counter),
        ("global_power_events", Some(0))
    );
    assert!(r[0].flags.user && !r[0].flags.system);
    assert_eq!(r[0].attrs[0].value, 1, "the event mask");
    assert_eq!(
        (r[1].event.as_str(), r[1].counter),
        ("branch_retired", Some(14))
    );
    assert!(r[1].flags.notify_overflow && r[1].flags.system);
    assert_eq!(r[1].preset.wrapping_add(100), 0);

    let with = |f: &dyn Fn(&mut CpuControl)| {
        let mut b = c;
        f(&mut b);
        b
    };
    refused(
        p4,
        &with(&|b| b.evntsel[0] |= 1 << 31),
        "CCCR bits 0xb80007ff are reserved",
    );
    refused(
        p4,
        &with(&|b| b.evntsel[0] &= !ENABLE),
        "ENABLE must be set",
    );
    refused(p4, &with(&|b| b.evntsel[0] &= !(1 << 17)), "ACTIVE_THREAD");
    refused(p4, &with(&|b| b.evntsel[1] &= !PMI), "OVF_PMI_T0");
    refused(p4, &with(&|b| b.evntsel[0] |= 1 << 25), "FORCE_OVF");
    refused(p4, &with(&|b| b.p4_escr[0] |= 1), "thread-1 CPL bits");
    refused(
        p4,
        &with(&|b| b.pmc_map[0] = 4),
        "select 6 names no ESCR of counter 4",
    );
    refused(
        p4,
        &with(&|b| b.p4_escr[0] = 0x3f << 25 | 1 << 2),
        "event select 0x3f is no event of FSB_ESCR0",
    );
    refused(
        p4,
        &with(&|b| b.pmc_map[1] = 0),
        "counter 0 is mapped twice",
    );
    refused(p4, &with(&|b| b.pmc_map[1] = 18), "no such counter");
    refused(
        p4,
        &with(&|b| b.ireset[1] = 1),
        "restart from a negative value",
    );
    refused(
        p4,
        &with(&|b| b.p4_pebs_matrix_vert = 1),
        "only replay tagging",
    );
    assert!(requests(
        p4,
        &with(&|b| {
            b.p4_pebs_enable = 1 << 24 | 1;
            b.p4_pebs_matrix_vert = 1;
        })
    )
    .is_ok());
    refused(p4, &with(&|b| b.p4_pebs_enable = 1), "only replay tagging");
}

#[test]
fn p4_refuses_cascaded_counters_with_the_cause() {
    let mut c = CpuControl {
        nractrs: 1,
        ..CpuControl::default()
    };
    c.pmc_map[0] = 12;
    // CRU_ESCR0 (select 4), instr_retired (2, mask 1), user mode.
    c.evntsel[0] = 1 << 12 | 4 << 13 | 3 << 16;
    c.p4_escr[0] = 2 << 25 | 1 << 9 | 1 << 2;
    let p4 = Family::P4(model("pentium4").unwrap());
    assert!(requests(p4, &c).is_ok());
    for cascade in [1u32 << 30, 1 << 11] {
        let mut b = c;
        b.evntsel[0] |= cascade;
        refused(p4, &b, "cascaded counters are not supported");
        refused(Family::PerfP4, &b, "cascaded counters are not supported");
    }
}

/// The ESCR and CCCR halves of a P4 raw event's name `r<config>`.
fn p4_config(event: &str) -> (u32, u32) {
    let config = u64::from_str_radix(event.strip_prefix('r').unwrap(), 16).unwrap();
    ((config >> 32) as u32, config as u32)
}

#[test]
fn perf_on_a_pentium_4_takes_its_pairs_as_the_kernels_p4_raw_events() {
    let mut c = CpuControl {
        nractrs: 2,
        nrictrs: 1,
        ..CpuControl::default()
    };
    // Counter 0 (fast RDPMC): FSB_ESCR0 (select 6), global_power_events (0x13, mask 1),
    // user mode: the kernel's event 24.
    c.pmc_map[0] = 0x8000_0000;
    c.evntsel[0] = ENABLE | 6 << 13 | ACTIVE;
    c.p4_escr[0] = 0x13 << 25 | 1 << 9 | 1 << 2;
    // Counter 12: ALF_ESCR0 (select 1), event 1: resource_stall (the kernel's 29), whose
    // select and event select are also tc_deliver_mode's (0) on counters 4-7.
    c.pmc_map[1] = 12;
    c.evntsel[1] = ENABLE | 1 << 13 | ACTIVE;
    c.p4_escr[1] = 1 << 25 | 1 << 14 | 1 << 3;
    // Counter 14, interrupting: CRU_ESCR3 (select 5), branch_retired (6, mask 0xc: the
    // kernel's 41), tag value 5 enabled, user and kernel mode; COMPARE, COMPLEMENT, THRESHOLD
    // 3 and EDGE.
    c.pmc_map[2] = 14;
    c.evntsel[2] = ENABLE | 5 << 13 | ACTIVE | PMI | 1 << 18 | 1 << 19 | 3 << 20 | 1 << 24;
    c.p4_escr[2] = 6 << 25 | 0xC << 9 | 5 << 5 | 1 << 4 | 1 << 3 | 1 << 2;
    c.ireset[2] = -100;
    let r = requests(Family::PerfP4, &c).unwrap();
    assert_eq!(r[0].event, "r3000020000030000");
    assert_eq!(p4_config(&r[0].event), (24 << 25 | 1 << 9, ACTIVE));
    assert!(r[0].flags.user && !r[0].flags.system, "T0_USR only");
    assert_eq!(r[0].counter, None, "the kernel places P4 events");
    assert_eq!(p4_config(&r[1].event), (29 << 25 | 1 << 14, ACTIVE));
    assert!(!r[1].flags.user && r[1].flags.system, "T0_OS only");
    assert_eq!(
        p4_config(&r[2].event),
        (
            41 << 25 | 0xC << 9 | 5 << 5 | 1 << 4,
            ACTIVE | 1 << 18 | 1 << 19 | 3 << 20 | 1 << 24
        ),
        "{}",
        r[2].event
    );
    assert!(r[2].flags.user && r[2].flags.system && r[2].flags.notify_overflow);
    assert_eq!(r[2].preset.wrapping_add(100), 0);

    // The same select and event select on counter 4 is tc_deliver_mode, the kernel's 0.
    let mut tc = c;
    tc.pmc_map[1] = 4;
    assert_eq!(
        p4_config(&requests(Family::PerfP4, &tc).unwrap()[1].event).0,
        1 << 14
    );
    // FORCE_OVF (with ireset -1) is the kernel's: a period of one event.
    let mut f = c;
    f.evntsel[2] |= 1 << 25;
    f.ireset[2] = -1;
    let r = requests(Family::PerfP4, &f).unwrap();
    assert_eq!(p4_config(&r[2].event).1 & (1 << 25), 0);
    assert_eq!(r[2].preset, u64::MAX);
    // Replay tagging: DTLB store misses (PEBS_ENABLE bit 2, matrix 2) is the kernel's metric 4,
    // in every counter's CCCR half.
    let mut t = c;
    t.p4_pebs_enable = 1 << 24 | 4;
    t.p4_pebs_matrix_vert = 2;
    let r = requests(Family::PerfP4, &t).unwrap();
    assert!(r.iter().all(|r| p4_config(&r.event).1 & 0x7f == 4), "{r:?}");
    t.p4_pebs_enable = 1 << 24 | 0x200;
    t.p4_pebs_matrix_vert = 1;
    assert_eq!(
        p4_config(&requests(Family::PerfP4, &t).unwrap()[0].event).1 & 0x7f,
        7
    );
    t.p4_pebs_enable = 1 << 24 | 3;
    refused(
        Family::PerfP4,
        &t,
        "no replay-tagging metric of Linux's P4 driver",
    );
    // UOP_TAG without a tagging bit: metric 6's placeholder matches nothing.
    t.p4_pebs_enable = 1 << 24;
    t.p4_pebs_matrix_vert = 0;
    refused(
        Family::PerfP4,
        &t,
        "no replay-tagging metric of Linux's P4 driver",
    );

    let with = |f: &dyn Fn(&mut CpuControl)| {
        let mut b = c;
        f(&mut b);
        b
    };
    refused(
        Family::PerfP4,
        &with(&|b| b.p4_escr[0] = 0x3f << 25 | 1 << 2),
        "ESCR select 6 with event select 0x3f on counter 0 is no event of Linux's P4 driver",
    );
    refused(
        Family::PerfP4,
        &with(&|b| b.pmc_map[1] = 0),
        "counter 0 is mapped twice",
    );
    refused(
        Family::PerfP4,
        &with(&|b| b.evntsel[1] |= PMI),
        "OVF_PMI_T0",
    );
    refused(
        Family::PerfP4,
        &with(&|b| b.p4_escr[0] |= 2),
        "thread-1 CPL bits",
    );
    refused(
        Family::PerfP4,
        &with(&|b| b.pmc_map[2] = 18),
        "no such counter",
    );
}

#[test]
fn a_pentium_4_host_is_told_by_its_cpu_family() {
    let p4 = "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 15\nmodel\t\t: 2\n";
    assert!(is_netburst(p4));
    assert!(!is_netburst(&p4.replace("15", "6")));
    assert!(!is_netburst(&p4.replace("GenuineIntel", "AuthenticAMD")));
    assert!(!is_netburst("processor\t: 0\nCPU implementer\t: 0x41\n"));
}

#[test]
fn x86_evntsel_fields_map_bit_by_bit_to_the_raw_config() {
    // Every field alone: event, unit mask, edge, invert, count mask keep their bits; USR and
    // OS become the exclude bits; INT and EN are dropped.
    let cases: [(u32, u64); 6] = [
        (0x0000_00ff, 0xff),
        (0x0000_ff00, 0xff00),
        (1 << 18, 1 << 18),
        (1 << 23, 1 << 23),
        (0xff00_0000, 0xff00_0000),
        (1 << 20 | 1 << 22, 0),
    ];
    for (field, config) in cases {
        let e = raw_event(field | USR).unwrap();
        assert_eq!(e.config, config, "{field:#x}");
        assert!(!e.exclude_user && e.exclude_kernel);
    }
    let e = raw_event(0x2e | OS).unwrap();
    assert!(e.exclude_user && !e.exclude_kernel);
}

#[test]
fn perf_on_arm64_takes_the_armv8_event_number() {
    let mut c = CpuControl {
        nractrs: 2,
        nrictrs: 1,
        ..CpuControl::default()
    };
    c.pmc_map[..3].copy_from_slice(&[0, 1, 2]);
    c.evntsel[0] = 0x08 | USR | EN; // INST_RETIRED, user mode; EN accepted and ignored
    c.evntsel[1] = 0xC0 | USR | OS; // an ARMv8 number, not the x86 generic "instructions"
    c.evntsel[2] = 0x11 | USR | INT; // CPU_CYCLES, interrupting
    c.ireset[2] = -4096;
    let r = requests(Family::PerfArm64, &c).unwrap();
    let names: Vec<&str> = r.iter().map(|r| r.event.as_str()).collect();
    assert_eq!(names, ["r8", "rc0", "r11"]);
    assert!(r[0].flags.user && !r[0].flags.system);
    assert!(r[1].flags.user && r[1].flags.system);
    assert!(r[2].flags.notify_overflow && r[2].preset.wrapping_add(4096) == 0);
    // All 16 bits of the event number (ARMv8.1's PMU), software events as on x86.
    c.evntsel[1] = 0xffff | OS;
    c.evntsel[0] = SOFTWARE | 2 | USR;
    let r = requests(Family::PerfArm64, &c).unwrap();
    assert_eq!(
        (r[0].event.as_str(), r[1].event.as_str()),
        ("page-faults", "rffff")
    );
    assert_eq!(arm64_event(0x4004 | USR).unwrap().config, 0x4004);
    for x86 in [1u32 << 18, 1 << 19, 1 << 23, 1 << 24, 0x8000_0000] {
        c.evntsel[1] = 0x08 | USR | x86;
        refused(Family::PerfArm64, &c, "have no meaning on arm64");
    }
    c.evntsel[1] = 0x08;
    refused(Family::PerfArm64, &c, "counts in no mode");
    c.evntsel[1] = 0x08 | USR;
    c.evntsel[2] = 0x11 | USR; // an i-mode counter without INT
    refused(Family::PerfArm64, &c, "the INT bit");
}
