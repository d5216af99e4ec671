//! Repositories and their tokens (store::auth). Tokens are known by their hash only.

use crate::store::StoreResult;

/// One token of a repository as the index holds it.
pub struct TokenRow {
    pub hash: Vec<u8>,
    /// As written (`Scope::as_str`); a scope this server does not know grants nothing.
    pub scope: String,
    pub created_ms: i64,
}

pub trait RepoRead {
    fn repo_id(&self, name: &str) -> StoreResult<Option<i64>>;
    /// Every repository's id, ascending.
    fn repo_ids(&self) -> StoreResult<Vec<i64>>;
    /// The repository and scope of the token with this hash.
    fn token(&self, hash: &[u8]) -> StoreResult<Option<(i64, String)>>;
    /// The repository's tokens, oldest first.
    fn tokens(&self, repo_id: i64) -> StoreResult<Vec<TokenRow>>;
}

pub trait RepoWrite {
    /// Creates a repository (the name must be new); returns its id.
    fn create_repo(&self, name: &str, created_ms: i64) -> StoreResult<i64>;
    /// Records a token; one already recorded is left as it is.
    fn add_token(&self, repo_id: i64, t: &TokenRow) -> StoreResult<()>;
    fn delete_token(&self, hash: &[u8]) -> StoreResult<()>;
}
