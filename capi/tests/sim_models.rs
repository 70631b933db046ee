//! libcpc on the emulated Alpha EV4/EV5 and PowerPC 750/7450: the handle's counters and
//! implementation name, the walkers per counter, `picnum` and the `int_every` attribute through
//! `cpc_set_add_request`, and exact counts through a bound set. No special case in libcpc: it
//! sees the models through the backend's description only.

use std::ffi::{c_char, c_void, CStr, CString};

use perfcompat::backend::sim::SimBackend;
use perfcompat_capi::cpc::*;

/// What the walkers reported: (counter, event) pairs.
unsafe extern "C" fn collect(arg: *mut c_void, picno: uint_t, event: *const c_char) {
    // SAFETY: `arg` is the Vec the test passed; the event is a NUL-terminated string.
    let v = unsafe { &mut *arg.cast::<Vec<(u32, String)>>() };
    v.push((
        picno,
        unsafe { CStr::from_ptr(event) }
            .to_string_lossy()
            .into_owned(),
    ));
}

unsafe extern "C" fn collect_attr(arg: *mut c_void, attr: *const c_char) {
    // SAFETY: as above.
    let v = unsafe { &mut *arg.cast::<Vec<String>>() };
    v.push(
        unsafe { CStr::from_ptr(attr) }
            .to_string_lossy()
            .into_owned(),
    );
}

/// Add `event` with the given attributes; the request index or -1.
fn add(cpc: *mut cpc_t, set: *mut cpc_set_t, event: &str, attrs: &[(&str, u64)]) -> i32 {
    let ev = CString::new(event).unwrap();
    let names: Vec<CString> = attrs.iter().map(|a| CString::new(a.0).unwrap()).collect();
    let cattrs: Vec<cpc_attr_t> = names
        .iter()
        .zip(attrs)
        .map(|(n, a)| cpc_attr_t {
            ca_name: n.as_ptr().cast_mut(),
            ca_val: a.1,
        })
        .collect();
    // SAFETY: valid handle, set, string and attribute array.
    unsafe {
        cpc_set_add_request(
            cpc,
            set,
            ev.as_ptr(),
            0,
            CPC_COUNT_USER,
            cattrs.len() as uint_t,
            if cattrs.is_empty() {
                std::ptr::null()
            } else {
                cattrs.as_ptr()
            },
        )
    }
}

#[test]
fn libcpc_sees_the_seed_models_through_the_backend() {
    for (model, npic, cci, (ev0, pic0), (ev1, pic1), has_int_every) in [
        (
            "ev4",
            2,
            "21064",
            ("PF_CYCLES", 0u32),
            ("PF_DCACHE", 1u32),
            true,
        ),
        (
            "ev5",
            3,
            "21164",
            ("PF5_CYCLES", 2),
            ("PF5_MUX1_LOADI", 1),
            true,
        ),
        ("ppc750", 4, "750", ("cycles", 3), ("dtlb_misses", 2), false),
        (
            "ppc7450",
            6,
            "7450",
            ("cycles", 5),
            ("altivec_float_instr", 3),
            false,
        ),
    ] {
        let be: &'static SimBackend = Box::leak(Box::new(SimBackend::new(model).unwrap()));
        let cpc = cpc_open_on(be);
        assert!(!cpc.is_null());
        assert_eq!(cpc_npic(cpc), npic, "{model}");
        // SAFETY: the name is a NUL-terminated string owned by the handle.
        let name = unsafe { CStr::from_ptr(cpc_cciname(cpc)) }.to_string_lossy();
        assert!(name.contains(cci), "{model}: {name}");
        assert_eq!(
            cpc_caps(cpc),
            CPC_CAP_OVERFLOW_INTERRUPT | CPC_CAP_OVERFLOW_PRECISE
        );

        // Each counter's walk lists exactly the events the model routes through it.
        for pic in 0..npic {
            let mut got: Vec<(u32, String)> = Vec::new();
            // SAFETY: a live handle, a callback matching the walker's type.
            unsafe {
                cpc_walk_events_pic(
                    cpc,
                    pic,
                    (&mut got as *mut Vec<(u32, String)>).cast(),
                    Some(collect),
                )
            };
            let mut want: Vec<String> = perfcompat::backend::Backend::events(be)
                .into_iter()
                .filter(|e| !e.generic && e.counters & (1 << pic) != 0)
                .map(|e| e.name)
                .collect();
            let mut names: Vec<String> = got.iter().map(|g| g.1.clone()).collect();
            want.sort();
            names.sort();
            assert!(!names.is_empty(), "{model} pic{pic}");
            assert_eq!(names, want, "{model} pic{pic}");
            assert!(got.iter().all(|g| g.0 == pic));
        }
        let mut attrs: Vec<String> = Vec::new();
        // SAFETY: as above.
        unsafe {
            cpc_walk_attrs(
                cpc,
                (&mut attrs as *mut Vec<String>).cast(),
                Some(collect_attr),
            )
        };
        assert_eq!(
            attrs.iter().any(|a| a == "int_every"),
            has_int_every,
            "{model}: {attrs:?}"
        );

        // picnum places the requests; the bound set counts them exactly.
        let set = cpc_set_create(cpc);
        assert!(!set.is_null());
        assert_eq!(add(cpc, set, ev0, &[("picnum", u64::from(pic0))]), 0);
        let mut attr1 = vec![("picnum", u64::from(pic1))];
        if has_int_every {
            attr1.push(("int_every", 256));
        }
        assert_eq!(add(cpc, set, ev1, &attr1), 1, "{model}");
        assert_eq!(cpc_bind_curlwp(cpc, set, 0), 0, "{model}");
        let n = (1u64 << 32) + 12_345;
        be.advance(ev0, n).unwrap();
        be.advance(ev1, n / 7).unwrap();
        let buf = cpc_buf_create(cpc, set);
        assert_eq!(cpc_set_sample(cpc, set, buf), 0);
        let (mut v0, mut v1) = (0u64, 0u64);
        // SAFETY: valid out-pointers.
        unsafe {
            assert_eq!(cpc_buf_get(cpc, buf, 0, &mut v0), 0);
            assert_eq!(cpc_buf_get(cpc, buf, 1, &mut v1), 0);
        }
        assert_eq!((v0, v1), (n, n / 7), "{model}");
        assert_eq!(cpc_unbind(cpc, set), 0);

        // A counter the event is not on: CPC_PIC_NOT_CAPABLE at add time.
        let set2 = cpc_set_create(cpc);
        let wrong = (pic1 + 1) % npic;
        assert_eq!(add(cpc, set2, ev1, &[("picnum", u64::from(wrong))]), -1);
        // SAFETY: the handle is live and not used afterwards.
        assert_eq!(unsafe { cpc_close(cpc) }, 0);
    }
}
