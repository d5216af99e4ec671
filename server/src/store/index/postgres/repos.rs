use std::ops::DerefMut;

use postgres::Client;

use super::Pg;
use crate::store::index::repos::{RepoRead, RepoWrite, TokenRow};
use crate::store::StoreResult;

impl<G: DerefMut<Target = Client>> RepoRead for Pg<G> {
    fn repo_id(&self, name: &str) -> StoreResult<Option<i64>> {
        Ok(self
            .c()
            .query_opt("SELECT id FROM repos WHERE name = $1", &[&name])?
            .map(|r| r.try_get(0))
            .transpose()?)
    }

    fn repo_ids(&self) -> StoreResult<Vec<i64>> {
        let rows = self.c().query("SELECT id FROM repos ORDER BY id", &[])?;
        Ok(rows
            .iter()
            .map(|r| r.try_get(0))
            .collect::<Result<_, _>>()?)
    }

    fn token(&self, hash: &[u8]) -> StoreResult<Option<(i64, String)>> {
        Ok(self
            .c()
            .query_opt(
                "SELECT repo_id, scope FROM tokens WHERE hash = $1",
                &[&hash],
            )?
            .map(|r| Ok::<_, postgres::Error>((r.try_get(0)?, r.try_get(1)?)))
            .transpose()?)
    }

    fn tokens(&self, repo_id: i64) -> StoreResult<Vec<TokenRow>> {
        let rows = self.c().query(
            "SELECT hash, scope, created_ms FROM tokens WHERE repo_id = $1 ORDER BY created_ms, hash",
            &[&repo_id],
        )?;
        Ok(rows
            .iter()
            .map(|r| {
                Ok(TokenRow {
                    hash: r.try_get(0)?,
                    scope: r.try_get(1)?,
                    created_ms: r.try_get(2)?,
                })
            })
            .collect::<Result<_, postgres::Error>>()?)
    }
}

impl<G: DerefMut<Target = Client>> RepoWrite for Pg<G> {
    fn create_repo(&self, name: &str, created_ms: i64) -> StoreResult<i64> {
        Ok(self
            .c()
            .query_one(
                "INSERT INTO repos(name, created_ms, delta_done) VALUES ($1, $2, 0) RETURNING id",
                &[&name, &created_ms],
            )?
            .try_get(0)?)
    }

    fn add_token(&self, repo_id: i64, t: &TokenRow) -> StoreResult<()> {
        self.c().execute(
            "INSERT INTO tokens(hash, repo_id, created_ms, scope) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
            &[&t.hash, &repo_id, &t.created_ms, &t.scope],
        )?;
        Ok(())
    }

    fn delete_token(&self, hash: &[u8]) -> StoreResult<()> {
        self.c()
            .execute("DELETE FROM tokens WHERE hash = $1", &[&hash])?;
        Ok(())
    }
}
