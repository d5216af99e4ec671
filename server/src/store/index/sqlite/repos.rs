use std::ops::Deref;

use rusqlite::{params, Connection, OptionalExtension};

use super::Sql;
use crate::store::index::repos::{RepoRead, RepoWrite, TokenRow};
use crate::store::StoreResult;

impl<C: Deref<Target = Connection>> RepoRead for Sql<C> {
    fn repo_id(&self, name: &str) -> StoreResult<Option<i64>> {
        Ok(self
            .c()
            .prepare_cached("SELECT id FROM repos WHERE name = ?1")?
            .query_row([name], |r| r.get(0))
            .optional()?)
    }

    fn repo_ids(&self) -> StoreResult<Vec<i64>> {
        let mut st = self
            .c()
            .prepare_cached("SELECT id FROM repos ORDER BY id")?;
        let ids = st.query_map([], |r| r.get(0))?;
        Ok(ids.collect::<Result<_, _>>()?)
    }

    fn token(&self, hash: &[u8]) -> StoreResult<Option<(i64, String)>> {
        Ok(self
            .c()
            .prepare_cached("SELECT repo_id, scope FROM tokens WHERE hash = ?1")?
            .query_row([hash], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?)
    }

    fn tokens(&self, repo_id: i64) -> StoreResult<Vec<TokenRow>> {
        let mut st = self.c().prepare(
            "SELECT hash, scope, created_ms FROM tokens WHERE repo_id = ?1 ORDER BY created_ms, hash",
        )?;
        let rows = st.query_map([repo_id], |r| {
            Ok(TokenRow {
                hash: r.get(0)?,
                scope: r.get(1)?,
                created_ms: r.get(2)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}

impl<C: Deref<Target = Connection>> RepoWrite for Sql<C> {
    fn create_repo(&self, name: &str, created_ms: i64) -> StoreResult<i64> {
        self.c().execute(
            "INSERT INTO repos(name, created_ms, delta_done) VALUES (?1, ?2, 0)",
            params![name, created_ms],
        )?;
        Ok(self.c().last_insert_rowid())
    }

    fn add_token(&self, repo_id: i64, t: &TokenRow) -> StoreResult<()> {
        self.c().execute(
            "INSERT OR IGNORE INTO tokens(hash, repo_id, created_ms, scope) VALUES (?1, ?2, ?3, ?4)",
            params![t.hash, repo_id, t.created_ms, t.scope],
        )?;
        Ok(())
    }

    fn delete_token(&self, hash: &[u8]) -> StoreResult<()> {
        self.c()
            .execute("DELETE FROM tokens WHERE hash = ?1", [hash])?;
        Ok(())
    }
}
