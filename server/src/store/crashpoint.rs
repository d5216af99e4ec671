//! Named persistence points of the steps that move or delete data (docs/STORAGE.md, "Crash
//! safety"). The test-only environment variable `DITTO_TEST_CRASH_AT=<point>` makes the
//! process abort the first time it reaches that point, as a kill -9 would, so that the crash
//! tests can restart the server on exactly the on-disk state each point leaves.

use std::sync::OnceLock;

/// Every point, for tests that loop over them.
pub const POINTS: &[&str] = &[
    "move:copied",
    "move:switched",
    "forget:deleted",
    "icda:switched",
    "sweep:switched",
    "compact:copied",
    "compact:switched",
    "delta:copied",
    "delta:switched",
    "delta:recorded",
];

fn armed() -> Option<&'static str> {
    static AT: OnceLock<Option<String>> = OnceLock::new();
    AT.get_or_init(|| {
        std::env::var("DITTO_TEST_CRASH_AT")
            .ok()
            .filter(|s| !s.is_empty())
    })
    .as_deref()
}

/// Failure points: the test-only `DITTO_TEST_FAIL_AT=<point>` makes the step there fail,
/// every time it is reached, with an error and the process going on: the mover's writes as a
/// full disk would make them fail, a prune's ICDA and the read of a delta's base as an I/O
/// error would.
pub const FAILURE_POINTS: &[&str] = &["move:part", "move:write", "prune:icda", "base:read"];

/// Whether the step at failure point `point` is to fail.
pub fn fails(point: &str) -> bool {
    debug_assert!(
        FAILURE_POINTS.contains(&point),
        "unknown failure point {point}"
    );
    static AT: OnceLock<Option<String>> = OnceLock::new();
    AT.get_or_init(|| std::env::var("DITTO_TEST_FAIL_AT").ok())
        .as_deref()
        == Some(point)
}

/// Aborts the process if `point` is the armed one.
pub fn reached(point: &str) {
    debug_assert!(POINTS.contains(&point), "unknown crash point {point}");
    if armed() == Some(point) {
        eprintln!("crash point {point} reached: aborting (DITTO_TEST_CRASH_AT)");
        std::process::abort();
    }
}
