//! `engine::check_request`: the per-request checks libcpc makes when a request is added, in
//! their order, on the emulated PMUs (deterministic) and on perf.

use perfcompat::backend::perf::PerfBackend;
use perfcompat::backend::sim::SimBackend;
use perfcompat::base::error::ErrorKind;
use perfcompat::engine::check_request;
use perfcompat::Request;

fn kind(b: &dyn perfcompat::backend::Backend, r: Request) -> Option<ErrorKind> {
    check_request(b, &r).err().map(|e| e.kind())
}

#[test]
fn ultrasparc_events_counters_and_attributes() {
    let us = SimBackend::new("ultrasparc").unwrap();
    assert_eq!(kind(&us, Request::new("Cycle_cnt")), None);
    assert_eq!(kind(&us, Request::new("PAPI_tot_cyc")), None);
    assert_eq!(kind(&us, Request::new("EC_ref").on_counter(0)), None);
    assert_eq!(
        kind(&us, Request::new("No_such_event")),
        Some(ErrorKind::InvalidEvent)
    );
    // EC_ref is a PIC0 event: pinned to PIC1 it cannot be counted; PIC2 does not exist.
    assert_eq!(
        kind(&us, Request::new("EC_ref").on_counter(1)),
        Some(ErrorKind::PicNotCapable)
    );
    assert_eq!(
        kind(&us, Request::new("EC_ref").on_counter(2)),
        Some(ErrorKind::InvalidPicnum)
    );
    // The UltraSPARC has no attributes; the event is checked before the attributes.
    assert_eq!(
        kind(&us, Request::new("EC_ref").attr("emask", 1)),
        Some(ErrorKind::InvalidAttribute)
    );
    assert_eq!(
        kind(&us, Request::new("bogus").attr("emask", 1)),
        Some(ErrorKind::InvalidEvent)
    );
}

#[test]
fn pentium4_attribute_values_wait_for_the_bind() {
    let p4 = SimBackend::new("pentium4").unwrap();
    assert_eq!(
        kind(&p4, Request::new("branch_retired").attr("emask", 0xc)),
        None
    );
    // Out of range, but only the name is checked here (Solaris checks values at bind).
    assert_eq!(
        kind(&p4, Request::new("branch_retired").attr("emask", 0xffff)),
        None
    );
    assert_eq!(
        kind(&p4, Request::new("branch_retired").attr("umask", 1)),
        Some(ErrorKind::InvalidAttribute)
    );
    assert_eq!(
        kind(&p4, Request::new("branch_retired").on_counter(0)),
        Some(ErrorKind::PicNotCapable)
    );
    assert_eq!(
        kind(&p4, Request::new("branch_retired").on_counter(12)),
        None
    );
}

#[test]
fn perf_generic_names_and_software_events() {
    let perf = PerfBackend::new().unwrap();
    assert_eq!(kind(&perf, Request::new("page-faults")), None);
    assert_eq!(
        kind(&perf, Request::new("no-such-event")),
        Some(ErrorKind::InvalidEvent)
    );
    assert_eq!(
        kind(&perf, Request::new("page-faults").attr("umask", 1)),
        Some(ErrorKind::InvalidAttribute)
    );
    assert_eq!(
        kind(&perf, Request::new("page-faults").on_counter(99)),
        Some(ErrorKind::InvalidPicnum)
    );
    // PAPI_tot_ins is instructions: countable exactly when the host has a PMU.
    let ins = kind(&perf, Request::new("PAPI_tot_ins"));
    assert_eq!(ins.is_none(), perf.caps().pmu, "{ins:?}");
    use perfcompat::backend::Backend;
    let generics: Vec<String> = perf
        .events()
        .into_iter()
        .filter(|e| e.generic)
        .map(|e| e.name)
        .collect();
    assert!(
        generics.iter().all(|g| g.starts_with("PAPI_")),
        "{generics:?}"
    );
    assert_eq!(
        generics.iter().any(|g| g == "PAPI_tot_ins"),
        perf.caps().pmu,
        "{generics:?}"
    );
}
