//! The engine's libcpc requests and walkers ([`perfcompat::api::cpc`]) on an emulated R10000: what is
//! checked when a request is added and what when its set is bound, the set's limit, the
//! walkers' split of generic and platform events. (An integration test: the backend's event
//! list reads the process-wide event map, which a unit test of `eventmap` sets.)

use perfcompat::api::cpc::*;
use perfcompat::backend::sim::SimBackend;
use perfcompat::backend::Backend;
use perfcompat::base::set::MAX_REQUESTS;
use perfcompat::Error;

fn r10000() -> &'static dyn Backend {
    Box::leak(Box::new(SimBackend::new("r10000").unwrap()))
}

#[test]
fn requests_are_checked_at_add_and_flags_at_bind() {
    let b = r10000();
    let r = Requests::new();
    assert_eq!(r.add(b, b"cycles", 5, COUNT_USER, vec![]), Ok(0));
    assert!(matches!(
        r.add(b, b"", 0, COUNT_USER, vec![]),
        Err(Error::MissingEvent(_))
    ));
    assert!(matches!(
        r.add(b, b"no such event", 0, COUNT_USER, vec![]),
        Err(Error::UnknownEvent { .. })
    ));
    assert!(matches!(
        r.add(b, &[0xff, 0xfe], 0, COUNT_USER, vec![]),
        Err(Error::UnknownEvent { .. })
    ));
    assert!(matches!(
        r.add(b, b"cycles", 0, COUNT_USER, vec![(PICNUM.into(), 99)]),
        Err(Error::InvalidPicnum { .. })
    ));
    // Unknown flags are libcpc's bind-time error, not add-time.
    assert_eq!(r.add(b, b"cycles", 0, 0x100, vec![]), Ok(1));
    assert_eq!(r.len(), 2);
    assert_eq!(
        r.counter_set().unwrap_err(),
        Error::InvalidFlags { flags: 0x100 }
    );
    let snap = r.snapshot();
    assert_eq!((snap[0].event.as_str(), snap[0].preset), ("cycles", 5));
    assert!(!r.notifies());
    assert_eq!(Requests::new().counter_set().unwrap_err(), Error::EmptySet);
}

#[test]
fn a_set_holds_at_most_max_requests() {
    let b = r10000();
    let r = Requests::new();
    for i in 0..MAX_REQUESTS {
        assert_eq!(r.add(b, b"cycles", 0, COUNT_USER, vec![]), Ok(i));
    }
    assert_eq!(
        r.add(b, b"cycles", 0, COUNT_USER, vec![]),
        Err(Error::SetFull { max: MAX_REQUESTS })
    );
}

#[test]
fn walkers_split_generic_and_platform_events_and_check_the_counter() {
    let b = r10000();
    let platform = walk_events(b, false, None).unwrap();
    let generic = walk_events(b, true, None).unwrap();
    assert!(platform.iter().any(|e| e == "cycles"));
    assert!(generic.iter().all(|e| is_generic(e)) && !generic.is_empty());
    assert!(platform.iter().all(|e| !is_generic(e)));
    let on0 = walk_events(b, false, Some((0, 2))).unwrap();
    assert!(on0.iter().any(|e| e == "cycles"));
    assert_eq!(
        walk_events(b, false, Some((2, 2))),
        Err(Error::NoSuchPic { picnum: 2, npic: 2 })
    );
}
