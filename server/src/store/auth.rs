//! Repositories and their access tokens, with scopes (docs/API.md, Authentication).
//!
//! A token is 192 random bits shown once; the server keeps only its SHA-256. Each token
//! belongs to one repository and has a scope: `full`, `backup` (add versions, never read
//! chunk bytes, delete, or see versions it did not commit) or `read` (restore, browse,
//! search, verify; adds and removes nothing, though a read or a `verify` that finds a
//! damaged chunk quarantines it, as any read does). What each operation needs is decided
//! by the API layer from [`Scope`]'s predicates, so the rules live in one place.

use sha2::{Digest, Sha256};

use super::index::{repos::TokenRow, IndexRead, IndexWrite};
use super::{now_ms, StoreResult};

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

/// The id of `token`, as `token list` shows it.
pub fn id_of_token(token: &str) -> String {
    token_id(&hash_token(token))
}

pub fn valid_repo_name(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= 64
        && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
        && b.iter()
            .all(|&c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_' || c == b'-')
}

pub fn repo_id(ix: &dyn IndexRead, name: &str) -> StoreResult<Option<i64>> {
    ix.repo_id(name)
}

pub fn create_repo(ix: &dyn IndexWrite, name: &str) -> StoreResult<i64> {
    ix.create_repo(name, now_ms() as i64)
}

/// Records a token (by its hash) for a repository; returns its id.
pub fn add_token(
    ix: &dyn IndexWrite,
    repo_id: i64,
    token: &str,
    scope: Scope,
) -> StoreResult<String> {
    let hash = hash_token(token);
    let id = token_id(&hash);
    ix.add_token(
        repo_id,
        &TokenRow {
            hash,
            scope: scope.as_str().to_string(),
            created_ms: now_ms() as i64,
        },
    )?;
    Ok(id)
}

/// The repository and scope of a token, or `None` for an unknown (or revoked) one.
pub fn token_access(ix: &dyn IndexRead, token: &str) -> StoreResult<Option<TokenAccess>> {
    let hash = hash_token(token);
    // A scope this version does not know (written by a newer server) grants nothing.
    Ok(ix.token(&hash)?.and_then(|(repo_id, scope)| {
        Some(TokenAccess {
            repo_id,
            scope: Scope::parse(&scope)?,
            id: token_id(&hash),
        })
    }))
}

pub fn list_tokens(ix: &dyn IndexRead, repo_id: i64) -> StoreResult<Vec<TokenInfo>> {
    Ok(ix
        .tokens(repo_id)?
        .into_iter()
        .filter_map(|t| {
            Some(TokenInfo {
                id: token_id(&t.hash),
                scope: Scope::parse(&t.scope)?,
                created_ms: t.created_ms,
            })
        })
        .collect())
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
    ix: &dyn IndexWrite,
    repo_id: i64,
    prefix: &str,
) -> StoreResult<Result<String, RevokeError>> {
    let prefix = prefix.to_ascii_lowercase();
    if prefix.len() < 6 || !prefix.bytes().all(|c| c.is_ascii_hexdigit()) {
        return Ok(Err(RevokeError::TooShort));
    }
    let tokens = ix.tokens(repo_id)?;
    let hits: Vec<&TokenRow> = tokens
        .iter()
        .filter(|t| token_id(&t.hash).starts_with(&prefix))
        .collect();
    match hits.as_slice() {
        [] => Ok(Err(RevokeError::NoMatch)),
        [t] => {
            ix.delete_token(&t.hash)?;
            Ok(Ok(token_id(&t.hash)))
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
