//! A malformed `PERFCOMPAT_EVENTS` file is rejected whole, with file and line, and the
//! built-in table stays in force.

use perfcompat::base::eventmap::EventMap;

mod common;
use common::TempDir;
use perfcompat::Error;

#[test]
fn bad_line_rejects_the_whole_file() {
    let dir = TempDir::new("badmap");
    let file = dir.0.join("events");
    std::fs::write(&file, "25 = page-faults\n40 = cycles\n").unwrap();
    let e = EventMap::load(&file).unwrap_err();
    match &e {
        Error::BadFile {
            file: f,
            line,
            reason,
        } => {
            assert!(f.ends_with("events"));
            assert_eq!(*line, 2);
            assert!(reason.contains("40"), "{reason}");
        }
        other => panic!("{other}"),
    }
    std::env::set_var("PERFCOMPAT_EVENTS", &file);
    // The global map falls back to the built-in table (and says so once on stderr).
    let g = EventMap::global();
    assert_eq!(g.number(25), None);
    assert_eq!(g.host_spec(25).unwrap(), "L1-dcache-load-misses");
}
