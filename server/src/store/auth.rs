//! Repositories and their access tokens, with scopes (docs/API.md, Authentication).
//!
//! A token is 192 random bits shown once; the server keeps only its SHA-256. Each token
//! belongs to one repository and has a scope: `full`, `backup` (add versions, never read
//! chunk bytes, delete, or see versions it did not commit) or `read` (restore, browse,
//! search; never change anything). What each operation needs is decided by the API layer
//! from [`Scope`]'s predicates, so the rules live in one place.

use rusqlite::{params, Connection, OptionalExtension};
use sha2::{Digest, Sha256};

use super::now_ms;

/// What a token may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Full,
    Backup,
    Read,
}

impl Scope {
    pub fn parse(s: &str) -> Option<Scope> {
        match s {
            "full" => Some(Scope::Full),
            "backup" => Some(Scope::Backup),
            "read" => Some(Scope::Read),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Full => "full",
            Scope::Backup => "backup",
            Scope::Read => "read",
        }
    }

    /// Upload chunks and commit versions.
    pub fn can_backup(self) -> bool {
        matches!(self, Scope::Full | Scope::Backup)
    }

    /// Read stored chunk bytes and containers (restore, search, verify).
    pub fn can_read_data(self) -> bool {
        matches!(self, Scope::Full | Scope::Read)
    }

    /// See every version of the repository and its statistics, not only the token's own.
    pub fn can_browse(self) -> bool {
        matches!(self, Scope::Full | Scope::Read)
    }

    /// Delete versions (and, later, expire and prune).
    pub fn can_delete(self) -> bool {
        self == Scope::Full
    }

    /// One line for error messages: what this scope allows.
    pub fn describe(self) -> &'static str {
        match self {
            Scope::Full => "a full token may do everything in its repository",
            Scope::Backup => {
                "a backup token may upload chunks, commit versions and read the versions it committed"
            }
            Scope::Read => "a read token may restore, browse and search, and change nothing",
        }
    }
}

/// A presented token, resolved.
#[derive(Debug, Clone)]
pub struct TokenAccess {
    pub repo_id: i64,
    pub scope: Scope,
    /// The token's id: the first 12 hex digits of its hash, as `token list` shows it.
    pub id: String,
}

/// One row of `token list`.
#[derive(Debug, Clone)]
pub struct TokenInfo {
    pub id: String,
    pub scope: Scope,
    pub created_ms: i64,
}

/// A new token: 192 random bits as 48 lower-case hex characters.
pub fn new_token() -> std::io::Result<String> {
    let mut bytes = [0u8; 24];
    getrandom::fill(&mut bytes).map_err(|e| std::io::Error::other(e.to_string()))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

pub fn hash_token(token: &str) -> Vec<u8> {
    Sha256::digest(token.as_bytes()).to_vec()
}

/// The id a token is listed and revoked by: enough of its hash to tell tokens apart, nothing
/// that helps to guess the token.
fn token_id(hash: &[u8]) -> String {
    hash.iter().take(6).map(|b| format!("{b:02x}")).collect()
}

pub fn valid_repo_name(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= 64
        && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
        && b.iter()
            .all(|&c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_' || c == b'-')
}

pub fn repo_id(conn: &Connection, name: &str) -> rusqlite::Result<Option<i64>> {
    conn.prepare_cached("SELECT id FROM repos WHERE name = ?1")?
        .query_row([name], |r| r.get(0))
        .optional()
}

pub fn create_repo(conn: &Connection, name: &str) -> rusqlite::Result<i64> {
    conn.execute(
        "INSERT INTO repos(name, created_ms) VALUES (?1, ?2)",
        params![name, now_ms() as i64],
    )?;
    Ok(conn.last_insert_rowid())
}

/// Records a token (by its hash) for a repository; returns its id.
pub fn add_token(
    conn: &Connection,
    repo_id: i64,
    token: &str,
    scope: Scope,
) -> rusqlite::Result<String> {
    let hash = hash_token(token);
    conn.execute(
        "INSERT OR IGNORE INTO tokens(hash, repo_id, created_ms, scope) VALUES (?1, ?2, ?3, ?4)",
        params![hash, repo_id, now_ms() as i64, scope.as_str()],
    )?;
    Ok(token_id(&hash))
}

/// The repository and scope of a token, or `None` for an unknown (or revoked) one.
pub fn token_access(conn: &Connection, token: &str) -> rusqlite::Result<Option<TokenAccess>> {
    let hash = hash_token(token);
    let row: Option<(i64, String)> = conn
        .prepare_cached("SELECT repo_id, scope FROM tokens WHERE hash = ?1")?
        .query_row([&hash], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    // A scope this version does not know (written by a newer server) grants nothing.
    Ok(row.and_then(|(repo_id, scope)| {
        Some(TokenAccess {
            repo_id,
            scope: Scope::parse(&scope)?,
            id: token_id(&hash),
        })
    }))
}

pub fn list_tokens(conn: &Connection, repo_id: i64) -> rusqlite::Result<Vec<TokenInfo>> {
    let mut st = conn.prepare(
        "SELECT hash, scope, created_ms FROM tokens WHERE repo_id = ?1 ORDER BY created_ms, hash",
    )?;
    let rows = st.query_map([repo_id], |r| {
        let hash: Vec<u8> = r.get(0)?;
        let scope: String = r.get(1)?;
        Ok((token_id(&hash), Scope::parse(&scope), r.get(2)?))
    })?;
    let mut out = Vec::new();
    for row in rows {
        if let (id, Some(scope), created_ms) = row? {
            out.push(TokenInfo {
                id,
                scope,
                created_ms,
            });
        }
    }
    Ok(out)
}

/// Why a revoke did nothing.
#[derive(Debug, PartialEq, Eq)]
pub enum RevokeError {
    /// Ids are at least 6 hex digits, so that a typo cannot match many tokens.
    TooShort,
    NoMatch,
    /// The prefix matches several tokens: `token list` shows longer ids.
    Ambiguous(usize),
}

/// Deletes the repository's token whose id starts with `prefix`; returns its full id.
pub fn revoke_token(
    conn: &Connection,
    repo_id: i64,
    prefix: &str,
) -> rusqlite::Result<Result<String, RevokeError>> {
    let prefix = prefix.to_ascii_lowercase();
    if prefix.len() < 6 || !prefix.bytes().all(|c| c.is_ascii_hexdigit()) {
        return Ok(Err(RevokeError::TooShort));
    }
    let mut st = conn.prepare("SELECT hash FROM tokens WHERE repo_id = ?1")?;
    let hashes: Vec<Vec<u8>> = st
        .query_map([repo_id], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    let hits: Vec<&Vec<u8>> = hashes
        .iter()
        .filter(|h| token_id(h).starts_with(&prefix))
        .collect();
    match hits.as_slice() {
        [] => Ok(Err(RevokeError::NoMatch)),
        [hash] => {
            conn.execute("DELETE FROM tokens WHERE hash = ?1", [hash])?;
            Ok(Ok(token_id(hash)))
        }
        many => Ok(Err(RevokeError::Ambiguous(many.len()))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_allow_what_docs_api_says() {
        use Scope::*;
        let table = [
            // scope, backup, read data, browse, delete
            (Full, true, true, true, true),
            (Backup, true, false, false, false),
            (Read, false, true, true, false),
        ];
        for (s, backup, read, browse, delete) in table {
            assert_eq!(s.can_backup(), backup, "{s:?}");
            assert_eq!(s.can_read_data(), read, "{s:?}");
            assert_eq!(s.can_browse(), browse, "{s:?}");
            assert_eq!(s.can_delete(), delete, "{s:?}");
            assert_eq!(Scope::parse(s.as_str()), Some(s));
        }
        assert_eq!(Scope::parse("admin"), None);
    }
}
