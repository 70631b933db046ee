//! libcpc version 1's engine part (`perfcompat::api::cpc::v1`, issue 31): the specification syntax
//! of cpc_strtoevent(3CPC) and its messages, the %pcr image of the UltraSPARC models, the
//! request table elsewhere, the two requests of a binding, `cpc_walk_names`' data. (The C
//! functions are tested from C by capi/tests/cpc_v1.rs.)

use perfcompat::api::cpc::v1::*;
use perfcompat::api::cpc::{COUNT_SYSTEM, COUNT_USER, OVF_NOTIFY_EMT, PICNUM};
use perfcompat::backend::sim::{self, model::Model};
use perfcompat::backend::{Backend, BackendKind};

/// The %pcr's user-mode and system-mode bits.
const PCR_USR: u32 = 1 << 2;
const PCR_SYS: u32 = 1 << 1;
/// The table's tag (the high byte of a request's number).
const TABLE_TAG: u32 = 0x5c00_0000;

fn sim(m: &'static Model) -> &'static dyn Backend {
    backend_for(cpuver(BackendKind::Sim(m)), None).unwrap()
}

#[test]
fn an_ultrasparc_spec_is_a_pcr_image() {
    let b = sim(&sim::sparc::ULTRASPARC2);
    let ev = parse(CPC_ULTRA2, b, "pic0=EC_ref,pic1=EC_hit").unwrap();
    let w = encode(&ev);
    // EC_ref is PIC0 select 0xc, EC_hit PIC1 select 0xc, user mode only.
    assert_eq!(w, [0xc << 4 | 0xc << 11 | PCR_USR, 0]);
    assert_eq!(decode(CPC_ULTRA2, w).unwrap(), ev);
    assert_eq!(to_spec(&ev), "pic0=EC_ref,pic1=EC_hit");
    // Bare names go to a PIC that counts them; nouser and sys move the mode bits.
    let ev = parse(CPC_ULTRA2, b, "EC_hit,Cycle_cnt,nouser,sys").unwrap();
    assert_eq!(to_spec(&ev), "pic0=Cycle_cnt,pic1=EC_hit,nouser,sys");
    assert_eq!(encode(&ev)[0] & 0x7, PCR_SYS);
    // Raw select codes and generic names.
    let ev = parse(CPC_ULTRA2, b, "pic0=0xc,pic1=PAPI_tot_ins").unwrap();
    assert_eq!(to_spec(&ev), "pic0=EC_ref,pic1=Instr_cnt");
}

#[test]
fn bad_specifications_get_libcpcs_messages() {
    let b = sim(&sim::sparc::ULTRASPARC2);
    let e = |s: &str| parse(CPC_ULTRA2, b, s).unwrap_err().0;
    assert_eq!(
        e("pic0=EC_hit,pic1=EC_ref"),
        "%pic0 cannot measure event 'EC_hit' on this cpu\n"
    );
    assert_eq!(e("pic0=EC_ref"), "two events must be specified\n");
    assert_eq!(e("pic0,pic1=EC_hit"), "missing 'pic0' value\n");
    assert_eq!(e("pic0=EC_ref,pic0=IC_ref"), "repeated 'pic0' token\n");
    assert_eq!(
        e("nouser=1,pic0=EC_ref,pic1=EC_hit"),
        "bad arg to 'nouser'\n"
    );
    assert_eq!(e("pic0=EC_ref,pic1=EC_hit,bogus=2"), "bad token 'bogus'\n");
    assert_eq!(
        e("pic0=EC_ref,pic1=EC_hit,Cycle_cnt"),
        "bad token 'Cycle_cnt'\n"
    );
    // Per-PIC modes are for the processors without a shared %pcr.
    assert_eq!(
        e("pic0=EC_ref,pic1=EC_hit,nouser0"),
        "bad token 'nouser0'\n"
    );
}

#[test]
fn pentium4_events_are_numbered_and_keep_their_attributes() {
    let b = sim(&sim::p4::PENTIUM4);
    let ev = parse(
        CPC_PENTIUM4,
        b,
        "pic0=branch_retired,emask0=0xc,pic1=instr_retired,emask1=3,sys1,nouser0",
    )
    .unwrap();
    assert_eq!(ev.pics[0].attrs, [("emask".to_string(), 0xc)]);
    assert!(!ev.pics[0].user && !ev.pics[0].system && ev.pics[1].system);
    let w = encode(&ev);
    assert_eq!(w, encode(&ev), "the same event gets the same numbers");
    assert_eq!(decode(CPC_PENTIUM4, w).unwrap(), ev);
    let s = to_spec(&ev);
    assert_eq!(
        s,
        "pic0=branch_retired,pic1=instr_retired,nouser0,sys1,emask0=0xc,emask1=0x3"
    );
    assert_eq!(parse(CPC_PENTIUM4, b, &s).unwrap(), ev);
    assert!(decode(CPC_PENTIUM4, [0, 0]).is_err());
    assert!(decode(CPC_PENTIUM4, [TABLE_TAG | 0xff_fff0, w[1]]).is_err());
    let e = parse(
        CPC_PENTIUM4,
        b,
        "pic0=branch_retired,pic1=instr_retired,emask=x",
    );
    assert_eq!(
        e.unwrap_err().0,
        "invalid value 'x' for attribute 'emask'\n"
    );
}

#[test]
fn requests_carry_presets_flags_and_picnum() {
    let b = sim(&sim::sparc::ULTRASPARC);
    let ev = parse(CPC_ULTRA3_PLUS, b, "pic0=Cycle_cnt,pic1=Instr_cnt,sys").unwrap();
    let r = requests(&ev, [u64::MAX - 999, 5], true);
    assert_eq!(r[0].preset, u64::MAX - 999);
    assert_eq!(r[1].flags, COUNT_USER | COUNT_SYSTEM | OVF_NOTIFY_EMT);
    assert_eq!(r[1].attrs, [(PICNUM.to_string(), 1)]);
}

#[test]
fn walk_names_gives_each_pics_events_and_select_bits() {
    let b = sim(&sim::sparc::ULTRASPARC2);
    let n0 = names(CPC_ULTRA2, b, 0);
    assert!(n0.contains(&("EC_ref".to_string(), 0xc)));
    assert!(!n0
        .iter()
        .any(|(n, _)| n == "EC_hit" || n.starts_with("PAPI")));
    assert!(names(CPC_ULTRA2, b, 1).contains(&("EC_hit".to_string(), 0xc)));
    assert!(names(CPC_ULTRA2, b, 2).is_empty() && names(CPC_ULTRA2, b, -1).is_empty());
    assert_eq!(
        usage(CPC_ULTRA2, b),
        "pic0=<event0>,pic1=<event1> [,sys] [,nouser]"
    );
    assert!(usage(CPC_PENTIUM4, sim(&sim::p4::PENTIUM4)).contains("[,emask[0|1]=<value>]"));
}

/// Specifications made of the syntax's words, event names, numbers and stray bytes (100,000 of
/// them, the same each run) never panic; each one accepted gives a canonical form that parses
/// back to the same event and the same control fields, and each refused one says why in one
/// line.
#[test]
fn random_specifications_round_trip_or_are_refused_with_a_message() {
    let models = [
        (&sim::sparc::ULTRASPARC2, CPC_ULTRA2),
        (&sim::sparc::ULTRASPARC, CPC_ULTRA3_PLUS),
        (&sim::p4::PENTIUM4, CPC_PENTIUM4),
    ];
    let words = [
        "pic0=",
        "pic1=",
        "pic0",
        "pic1",
        "nouser",
        "sys",
        "nouser0",
        "sys1",
        "emask0=",
        "emask=",
        "tag1=",
        "edge",
        "picnum=1",
        "=",
        ",",
        ",,",
        "EC_ref",
        "EC_hit",
        "Cycle_cnt",
        "Instr_cnt",
        "IC_miss",
        "PAPI_tot_cyc",
        "instr_retired",
        "branch_retired",
        "0xc",
        "12",
        "0x3f",
        "010",
        "-1",
        "x",
        "%s%n",
        "\u{e9}",
        " ",
    ];
    let mut seed: u64 = 0x5eed_0031;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let (mut accepted, mut refused) = (0, 0);
    for _ in 0..100_000 {
        let (m, cpuver) = models[(next() % 3) as usize];
        let b = sim(m);
        // Half of them start from two of the model's events, then words follow.
        let mut spec = String::new();
        if next() % 2 == 0 {
            let e = |n: u64| m.events[(n % m.events.len() as u64) as usize].name;
            spec = format!("pic0={},pic1={},", e(next()), e(next()));
        }
        for _ in 0..next() % 6 {
            spec.push_str(words[(next() % words.len() as u64) as usize]);
            if next() % 2 == 0 {
                spec.push(',');
            }
        }
        match parse(cpuver, b, &spec) {
            Ok(ev) => {
                accepted += 1;
                let w = encode(&ev);
                let canonical = to_spec(&ev);
                let again = parse(cpuver, b, &canonical)
                    .unwrap_or_else(|e| panic!("{spec:?} -> {canonical:?}: {e}"));
                assert_eq!(again, ev, "{spec:?} -> {canonical:?}");
                assert_eq!(encode(&again), w, "{spec:?}");
                assert_eq!(decode(cpuver, w).as_ref(), Ok(&ev), "{spec:?}");
            }
            Err(e) => {
                refused += 1;
                assert!(
                    e.0.ends_with('\n') && e.0.matches('\n').count() == 1 && e.0.len() > 5,
                    "{spec:?}: {e:?}"
                );
            }
        }
    }
    assert!(accepted > 5000 && refused > 5000, "{accepted} {refused}");
}
