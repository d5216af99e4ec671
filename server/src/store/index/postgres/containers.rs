use std::ops::DerefMut;

use postgres::{fallible_iterator::FallibleIterator, Client, Row};
use wasm_core::hash::Fingerprint;

use super::{fp_of, Pg};
use crate::store::index::containers::{
    ContainerRead, ContainerWrite, IndexContainer, ListedChunk, ListedContainer, NewContainer,
};
use crate::store::StoreResult;

/// The columns [`index_row`] reads, in its order.
const INDEX_COLUMNS: &str =
    "id, repo_id, kind, data_offset, data_end, chunk_count, newest_version, created_ms, damage";

fn index_row(r: &Row) -> Result<IndexContainer, postgres::Error> {
    Ok(IndexContainer {
        id: r.try_get(0)?,
        repo_id: r.try_get(1)?,
        kind: r.try_get::<_, i64>(2)? as u8,
        data_offset: r.try_get(3)?,
        data_end: r.try_get(4)?,
        count: r.try_get::<_, i64>(5)? as u32,
        newest: r.try_get(6)?,
        created_ms: r.try_get(7)?,
        damage: r.try_get(8)?,
    })
}

impl<G: DerefMut<Target = Client>> ContainerRead for Pg<G> {
    fn max_container_id(&self) -> StoreResult<u64> {
        let max: i64 = self
            .c()
            .query_one("SELECT COALESCE(MAX(id), 0) FROM containers", &[])?
            .try_get(0)?;
        Ok(max.max(0) as u64)
    }

    fn container_ids_handed_out(&self) -> StoreResult<u64> {
        // Before its first `nextval` the sequence's `last_value` is the next id, not one given.
        let given: i64 = self
            .c()
            .query_one(
                "SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END FROM container_ids",
                &[],
            )?
            .try_get(0)?;
        Ok(self.max_container_id()?.max(given.max(0) as u64))
    }

    fn all_containers(&self) -> StoreResult<Vec<IndexContainer>> {
        let rows = self.c().query(
            &format!("SELECT {INDEX_COLUMNS} FROM containers ORDER BY id"),
            &[],
        )?;
        Ok(rows.iter().map(index_row).collect::<Result<_, _>>()?)
    }

    fn repo_containers(&self, repo_id: i64) -> StoreResult<Vec<IndexContainer>> {
        let rows = self.c().query(
            &format!("SELECT {INDEX_COLUMNS} FROM containers WHERE repo_id = $1 ORDER BY id"),
            &[&repo_id],
        )?;
        Ok(rows.iter().map(index_row).collect::<Result<_, _>>()?)
    }

    fn newest_active_container(&self, repo_id: i64) -> StoreResult<Option<(IndexContainer, bool)>> {
        let row = self.c().query_opt(
            &format!(
                "SELECT {INDEX_COLUMNS}, sealed FROM containers WHERE repo_id = $1 AND kind = 0 ORDER BY id DESC LIMIT 1"
            ),
            &[&repo_id],
        )?;
        Ok(row
            .map(|r| Ok::<_, postgres::Error>((index_row(&r)?, r.try_get::<_, i64>(9)? != 0)))
            .transpose()?)
    }

    fn container_ids(&self, repo_id: i64) -> StoreResult<Vec<i64>> {
        let rows = self.c().query(
            "SELECT id FROM containers WHERE repo_id = $1 ORDER BY id",
            &[&repo_id],
        )?;
        Ok(rows
            .iter()
            .map(|r| r.try_get(0))
            .collect::<Result<_, _>>()?)
    }

    fn container_data_end(&self, repo_id: i64, id: i64) -> StoreResult<Option<i64>> {
        Ok(self
            .c()
            .query_opt(
                "SELECT data_end FROM containers WHERE id = $1 AND repo_id = $2",
                &[&id, &repo_id],
            )?
            .map(|r| r.try_get(0))
            .transpose()?)
    }

    fn listed_containers(&self, repo_id: i64) -> StoreResult<Vec<ListedContainer>> {
        let rows = self.c().query(
            "SELECT id, kind, newest_version, data_offset, data_end FROM containers WHERE repo_id = $1 ORDER BY id",
            &[&repo_id],
        )?;
        let mut out = Vec::with_capacity(rows.len());
        for r in &rows {
            out.push(ListedContainer {
                id: r.try_get(0)?,
                kind: r.try_get::<_, i64>(1)? as u8,
                newest_version: r.try_get(2)?,
                data_offset: r.try_get(3)?,
                size: r.try_get(4)?,
                chunks: Vec::new(),
                chain_keys: Vec::new(),
            });
        }
        Ok(out)
    }

    fn listed_chunks(
        &self,
        repo_id: i64,
        f: &mut dyn FnMut(i64, ListedChunk) -> StoreResult<()>,
    ) -> StoreResult<()> {
        let mut c = self.c();
        let mut rows = c.query_raw(
            r#"SELECT container_id, fp, codec, "offset", stored_len, raw_len, base FROM chunks WHERE repo_id = $1 ORDER BY container_id, slot"#,
            [repo_id],
        )?;
        while let Some(r) = rows.next()? {
            f(
                r.try_get(0)?,
                ListedChunk {
                    fp: fp_of(r.try_get(1)?),
                    codec: r.try_get::<_, i64>(2)? as u8,
                    offset: r.try_get(3)?,
                    stored_len: r.try_get::<_, i64>(4)? as u32,
                    raw_len: r.try_get::<_, i64>(5)? as u32,
                    base: r
                        .try_get::<_, Option<Vec<u8>>>(6)?
                        .and_then(|b| Fingerprint::try_from(b.as_slice()).ok()),
                },
            )?;
        }
        Ok(())
    }
}

impl<G: DerefMut<Target = Client>> ContainerWrite for Pg<G> {
    fn insert_container(&self, c: &NewContainer) -> StoreResult<()> {
        self.c().execute(
            "INSERT INTO containers(id, repo_id, kind, data_offset, data_end, chunk_count, newest_version, created_ms) VALUES ($1, $2, $3, $4, $5, $6, 0, $7)",
            &[
                &(c.id as i64),
                &c.repo_id,
                &(c.kind as i64),
                &(c.data_offset as i64),
                &(c.data_end as i64),
                &(c.chunk_count as i64),
                &(c.created_ms as i64),
            ],
        )?;
        Ok(())
    }

    fn extend_container(&self, id: u64, data_end: u64, chunk_count: u32) -> StoreResult<()> {
        self.c().execute(
            "UPDATE containers SET data_end = $1, chunk_count = $2 WHERE id = $3",
            &[&(data_end as i64), &(chunk_count as i64), &(id as i64)],
        )?;
        Ok(())
    }

    fn seal_damaged_container(&self, id: i64, reason: &str) -> StoreResult<()> {
        self.c().execute(
            "UPDATE containers SET sealed = 1, damage = $2 WHERE id = $1",
            &[&id, &reason],
        )?;
        Ok(())
    }
}
