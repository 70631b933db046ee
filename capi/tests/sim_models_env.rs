//! The process's backend chosen as a new user would, `PERFCOMPAT_BACKEND=sim:ev5`, with a
//! `PERFCOMPAT_EVENTS` map: libperfex's R10000 event numbers and a map alias reach the Alpha
//! model's events, and `perfcompat_sim_advance` drives them. (Its own test binary: the backend
//! and the map are read once per process, from the environment.)

use std::ffi::{c_longlong, CString};

use perfcompat_capi::cpc::*;
use perfcompat_capi::perfex::{read_counters, start_counters};
use perfcompat_capi::sim::perfcompat_sim_advance;

fn advance(event: &str, n: u64) -> i32 {
    let c = CString::new(event).unwrap();
    // SAFETY: a NUL-terminated string.
    unsafe { perfcompat_sim_advance(c.as_ptr(), n) }
}

#[test]
fn perfex_numbers_and_aliases_on_the_emulated_ev5() {
    let dir = std::env::temp_dir().join(format!("perfcompat-sim-models-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let map = dir.join("events");
    // Event 0 (cycles) and 21 (graduated floating-point instructions) live on R10000 counters
    // 0 and 1, and libperfex pins them there: EV5 counts cycles on counter 0 and
    // floating-point operations on counter 1.
    std::fs::write(
        &map,
        "0 = PF5_CYCLES\n21 = PF5_MUX1_FPINST\nloads = PF5_MUX1_LOADI\n",
    )
    .unwrap();
    // Set before anything reads them (this file is its own process, with this one test).
    std::env::set_var("PERFCOMPAT_BACKEND", "sim:ev5");
    std::env::set_var("PERFCOMPAT_EVENTS", &map);

    let gen = start_counters(0, 21);
    assert!(gen > 0, "start_counters on sim:ev5");
    assert_eq!(advance("PF5_CYCLES", 100_000), 1);
    assert_eq!(advance("PAPI_fp_ins", 70_000), 1);
    // Code 21 on counter 1 is PF5_MUX1_SYSREQ: the map, not the raw code, decides.
    assert_eq!(advance("PF5_MUX1_SYSREQ", 9), 0);
    let (mut c0, mut c1): (c_longlong, c_longlong) = (0, 0);
    // SAFETY: valid out-pointers.
    let r = unsafe { read_counters(0, &mut c0, 21, &mut c1) };
    assert_eq!(r, gen);
    assert_eq!((c0, c1), (100_000, 70_000));

    // libcpc on the process's backend, with the alias.
    let cpc = cpc_open(CPC_VER_CURRENT);
    assert!(!cpc.is_null());
    assert_eq!(cpc_npic(cpc), 3);
    let set = cpc_set_create(cpc);
    let ev = CString::new("loads").unwrap();
    // SAFETY: valid handle, set and string; no attributes.
    let i = unsafe {
        cpc_set_add_request(
            cpc,
            set,
            ev.as_ptr(),
            u64::MAX - 999,
            CPC_COUNT_USER,
            0,
            std::ptr::null(),
        )
    };
    assert_eq!(i, 0);
    assert_eq!(cpc_bind_curlwp(cpc, set, 0), 0);
    assert_eq!(advance("loads", 1500), 1);
    let buf = cpc_buf_create(cpc, set);
    assert_eq!(cpc_set_sample(cpc, set, buf), 0);
    let mut v = 0u64;
    // SAFETY: a valid out-pointer.
    assert_eq!(unsafe { cpc_buf_get(cpc, buf, 0, &mut v) }, 0);
    assert_eq!(v, 500, "wrapped past 2^64 at the exact count");
    // SAFETY: the handle is live and not used afterwards.
    assert_eq!(unsafe { cpc_close(cpc) }, 0);
    let _ = std::fs::remove_dir_all(&dir);
}
