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
    /// A chunk of an uploaded bundle is refused (the whole bundle is: nothing is stored).
    BadChunk {
        fp: Fingerprint,
        why: BadChunk,
        message: String,
    },
    /// A version references chunks that are not stored (distinct, in first-reference order).
    MissingChunks(Vec<Fingerprint>),
    /// A manifest entry's size differs from the sum of its chunks' raw lengths.
    SizeMismatch {
        path: String,
        size: u64,
        sum: u64,
    },
    /// Requested chunks that cannot be served: quarantined ones and ones never stored.
    Unavailable {
        damaged: Vec<Fingerprint>,
        missing: Vec<Fingerprint>,
    },
    /// The named thing (version, container, chunk) is not in the repository.
    NotFound(String),
    /// A search would answer more matches than the server holds for one answer (the limit).
    TooManyMatches(usize),
    /// Whoever asked for the search stopped waiting for it ([`super::search::Abandon`]): it
    /// stopped before its end, and nothing is answered.
    Abandoned,
    /// What the request was decided on changed before it could be carried out (versions
    /// committed or removed since a retention preview); nothing of it was done.
    Changed(String),
    /// The maintenance lease ended while its pass ran (PostgreSQL: the lease's connection
    /// closed); the pass stopped before its next change, and nothing of that change was made.
    LeaseLost,
    /// A failure that is the server's, not the request's (a panicked worker, an
    /// unencodable value).
    Internal(String),
    Io(std::io::Error),
    /// The index backend failed (its own message).
    Index(String),
}

/// Why an uploaded chunk is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BadChunk {
    /// Its stored bytes do not decode with its codec, or not to its declared length.
    DecodeFailed,
    /// Its bytes decode but their fingerprint is not the one it is sent under.
    FingerprintMismatch,
    /// Its codec is reserved and not accepted yet.
    UnsupportedCodec,
}

pub type StoreResult<T> = Result<T, StoreError>;

impl StoreError {
    /// Fingerprints as the hex strings the API lists.
    pub fn hex_list(fps: &[Fingerprint]) -> Vec<String> {
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
            StoreError::BadChunk { message, .. } => f.write_str(message),
            StoreError::MissingChunks(fps) => write!(
                f,
                "{} referenced chunk(s) are not stored; upload them first",
                fps.len()
            ),
            StoreError::SizeMismatch { path, size, sum } => {
                write!(f, "{path}: size {size} but its chunks add up to {sum} bytes")
            }
            StoreError::Unavailable { damaged, missing } if damaged.is_empty() => write!(
                f,
                "{} requested chunk(s) are not stored",
                missing.len()
            ),
            StoreError::Unavailable { damaged, .. } => {
                StoreError::Damaged(damaged.clone()).fmt(f)
            }
            StoreError::NotFound(what) | StoreError::Changed(what) => f.write_str(what),
            StoreError::Abandoned => f.write_str("the search was abandoned by whoever asked for it"),
            StoreError::TooManyMatches(max) => write!(
                f,
                "the keywords match more than {max} times: the server answers at most that \
                 many; search for something rarer, or in a narrower scope"
            ),
            StoreError::LeaseLost => f.write_str(
                "the maintenance lease ended during the pass (its database connection closed); \
                 the pass stopped before its next change: run it again",
            ),
            StoreError::Internal(e) => f.write_str(e),
            StoreError::Io(e) => write!(f, "i/o: {e}"),
            StoreError::Index(e) => write!(f, "index: {e}"),
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
