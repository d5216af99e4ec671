//! Named persistence points of the steps that move or delete data (docs/STORAGE.md, "Crash
//! safety"). The test-only environment variable `DITTO_TEST_CRASH_AT=<point>` makes the
//! process abort the first time it reaches that point, as a kill -9 would, so that the crash
//! tests can restart the server on exactly the on-disk state each point leaves. Failure and
//! delay points, below, make a step fail or take longer, for tests of what follows.

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
/// error would, an upload's commit as a connection lost after the database committed would
/// (`ingest:commit`) or as one that did not go through (`ingest:uncommitted`),
/// the open of a container file by recovery or for an append as an I/O error would; and
/// `pass:encode` changes each copy the delta pass makes, as an encoder fault would.
pub const FAILURE_POINTS: &[&str] = &[
    "pass:encode",
    "move:part",
    "move:write",
    "prune:icda",
    "base:read",
    "ingest:commit",
    "ingest:uncommitted",
    "recover:open",
    "append:open",
];

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

/// Delay points: the test-only `DITTO_TEST_DELAY_AT=<point>:<ms>` makes the step there take
/// that many milliseconds longer each time it is reached, so that a test can act while it
/// runs (a client that gives up on a search mid-way, a prune between a chunk's lookup and
/// its read, another server's sweep between the delta pass's puts and its switch).
pub const DELAY_POINTS: &[&str] = &["search:chunk", "read:located", "delta:copied"];

/// Sleeps at delay point `point` if it is the armed one.
pub fn delay(point: &str) {
    debug_assert!(DELAY_POINTS.contains(&point), "unknown delay point {point}");
    static AT: OnceLock<Option<(String, u64)>> = OnceLock::new();
    let armed = AT.get_or_init(|| {
        let v = std::env::var("DITTO_TEST_DELAY_AT").ok()?;
        let (at, ms) = v.rsplit_once(':')?;
        Some((at.to_string(), ms.parse().ok()?))
    });
    if let Some((at, ms)) = armed {
        if at == point {
            eprintln!("delay point {point}: {ms} ms");
            std::thread::sleep(std::time::Duration::from_millis(*ms));
        }
    }
}
