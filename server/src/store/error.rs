//! The store's own errors: what went wrong in terms of storage, not of HTTP. The API layer
//! (`crate::error`) chooses the status for each.

use wasm_core::hash::{to_hex, Fingerprint};

#[derive(Debug)]
pub enum StoreError {
    /// Stored chunks whose bytes do not decode to their fingerprint (or are gone). They are
    /// quarantined: reported missing, so that the next upload of the good bytes heals them.
    Damaged(Vec<Fingerprint>),
    /// The file system is full (or a file size or quota limit was hit); nothing of the
    /// failed operation was committed.
    NoSpace(String),
    /// SQLite's write-ahead log was removed or replaced under the running server; writes are
    /// refused until a restart (docs/API.md).
    WalLost,
    Io(std::io::Error),
    Db(rusqlite::Error),
}

pub type StoreResult<T> = Result<T, StoreError>;

impl StoreError {
    pub fn damaged_hex(fps: &[Fingerprint]) -> Vec<String> {
        fps.iter().map(to_hex).collect()
    }
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreError::Damaged(fps) => write!(
                f,
                "{} stored chunk(s) are damaged and quarantined; upload them again to heal the repository",
                fps.len()
            ),
            StoreError::NoSpace(e) => write!(f, "the server is out of space ({e})"),
            StoreError::WalLost => write!(
                f,
                "the database's write-ahead log was removed or replaced while the server runs; \
                 writes are refused until the server is restarted"
            ),
            StoreError::Io(e) => write!(f, "i/o: {e}"),
            StoreError::Db(e) => write!(f, "database: {e}"),
        }
    }
}

/// An I/O error that means "no room left": the disk is full, a quota or the file size limit
/// was hit.
pub fn is_no_space(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENOSPC) | Some(libc::EFBIG) | Some(libc::EDQUOT)
    )
}

impl From<std::io::Error> for StoreError {
    fn from(e: std::io::Error) -> Self {
        if is_no_space(&e) {
            StoreError::NoSpace(e.to_string())
        } else {
            StoreError::Io(e)
        }
    }
}

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        match e.sqlite_error_code() {
            Some(rusqlite::ErrorCode::DiskFull) => StoreError::NoSpace(e.to_string()),
            _ => StoreError::Db(e),
        }
    }
}
