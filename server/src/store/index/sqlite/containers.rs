use std::ops::Deref;

use rusqlite::{params, Connection, OptionalExtension};
use wasm_core::hash::Fingerprint;

use super::{fp_of, Sql};
use crate::store::index::containers::{
    ContainerRead, ContainerWrite, IndexContainer, ListedChunk, ListedContainer, NewContainer,
};
use crate::store::StoreResult;

/// The columns [`index_row`] reads, in its order.
const INDEX_COLUMNS: &str =
    "id, repo_id, kind, data_offset, data_end, chunk_count, newest_version, created_ms, damage";

fn index_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<IndexContainer> {
    Ok(IndexContainer {
        id: r.get(0)?,
        repo_id: r.get(1)?,
        kind: r.get(2)?,
        data_offset: r.get(3)?,
        data_end: r.get(4)?,
        count: r.get(5)?,
        newest: r.get(6)?,
        created_ms: r.get(7)?,
        damage: r.get(8)?,
    })
}

/// The `counters` row of the container ids handed out (`SqliteWriter::next_container_id`).
const CONTAINER_IDS: &str = "container_ids";

impl<C: Deref<Target = Connection>> Sql<C> {
    /// The highest container id recorded as handed out (0 if none).
    pub(super) fn reserved_container_ids(&self) -> StoreResult<u64> {
        let v: Option<i64> = self
            .c()
            .query_row(
                "SELECT value FROM counters WHERE name = ?1",
                [CONTAINER_IDS],
                |r| r.get(0),
            )
            .optional()?;
        Ok(v.unwrap_or(0).max(0) as u64)
    }

    /// Records that ids up to `upto` may have been handed out; it never lowers the record.
    pub(super) fn reserve_container_ids(&self, upto: u64) -> StoreResult<()> {
        self.c().execute(
            "INSERT INTO counters(name, value) VALUES (?1, ?2) ON CONFLICT(name) DO UPDATE SET value = MAX(value, excluded.value)",
            params![CONTAINER_IDS, upto as i64],
        )?;
        Ok(())
    }
}

impl<C: Deref<Target = Connection>> ContainerRead for Sql<C> {
    fn max_container_id(&self) -> StoreResult<u64> {
        let max: i64 =
            self.c()
                .query_row("SELECT COALESCE(MAX(id), 0) FROM containers", [], |r| {
                    r.get(0)
                })?;
        Ok(max.max(0) as u64)
    }

    fn container_ids_handed_out(&self) -> StoreResult<u64> {
        Ok(self.max_container_id()?.max(self.reserved_container_ids()?))
    }

    fn all_containers(&self) -> StoreResult<Vec<IndexContainer>> {
        let mut st = self.c().prepare(&format!(
            "SELECT {INDEX_COLUMNS} FROM containers ORDER BY id"
        ))?;
        let it = st.query_map([], index_row)?;
        Ok(it.collect::<Result<_, _>>()?)
    }

    fn repo_containers(&self, repo_id: i64) -> StoreResult<Vec<IndexContainer>> {
        let mut st = self.c().prepare(&format!(
            "SELECT {INDEX_COLUMNS} FROM containers WHERE repo_id = ?1 ORDER BY id"
        ))?;
        let it = st.query_map([repo_id], index_row)?;
        Ok(it.collect::<Result<_, _>>()?)
    }

    fn newest_active_container(&self, repo_id: i64) -> StoreResult<Option<(IndexContainer, bool)>> {
        Ok(self
            .c()
            .prepare_cached(&format!(
                "SELECT {INDEX_COLUMNS}, sealed FROM containers WHERE repo_id = ?1 AND kind = 0 ORDER BY id DESC LIMIT 1"
            ))?
            .query_row([repo_id], |r| Ok((index_row(r)?, r.get::<_, bool>(9)?)))
            .optional()?)
    }

    fn container_ids(&self, repo_id: i64) -> StoreResult<Vec<i64>> {
        let mut st = self
            .c()
            .prepare("SELECT id FROM containers WHERE repo_id = ?1 ORDER BY id")?;
        let it = st.query_map([repo_id], |r| r.get(0))?;
        Ok(it.collect::<Result<_, _>>()?)
    }

    fn container_data_end(&self, repo_id: i64, id: i64) -> StoreResult<Option<i64>> {
        Ok(self
            .c()
            .prepare_cached("SELECT data_end FROM containers WHERE id = ?1 AND repo_id = ?2")?
            .query_row(params![id, repo_id], |r| r.get(0))
            .optional()?)
    }

    fn listed_containers(&self, repo_id: i64) -> StoreResult<Vec<ListedContainer>> {
        let mut st = self.c().prepare_cached(
            "SELECT id, kind, newest_version, data_offset, data_end FROM containers WHERE repo_id = ?1 ORDER BY id",
        )?;
        let mut rows = st.query([repo_id])?;
        let mut out = Vec::new();
        while let Some(r) = rows.next()? {
            out.push(ListedContainer {
                id: r.get(0)?,
                kind: r.get(1)?,
                newest_version: r.get(2)?,
                data_offset: r.get(3)?,
                size: r.get(4)?,
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
        let mut st = self.c().prepare_cached(
            "SELECT container_id, fp, codec, offset, stored_len, raw_len, base FROM chunks WHERE repo_id = ?1 ORDER BY container_id, slot",
        )?;
        let mut rows = st.query([repo_id])?;
        while let Some(r) = rows.next()? {
            f(
                r.get(0)?,
                ListedChunk {
                    fp: fp_of(r.get(1)?),
                    codec: r.get(2)?,
                    offset: r.get(3)?,
                    stored_len: r.get(4)?,
                    raw_len: r.get(5)?,
                    base: r
                        .get::<_, Option<Vec<u8>>>(6)?
                        .and_then(|b| Fingerprint::try_from(b.as_slice()).ok()),
                },
            )?;
        }
        Ok(())
    }
}

impl<C: Deref<Target = Connection>> ContainerWrite for Sql<C> {
    fn insert_container(&self, c: &NewContainer) -> StoreResult<()> {
        self.c()
            .prepare_cached(
                "INSERT INTO containers(id, repo_id, kind, data_offset, data_end, chunk_count, newest_version, created_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, 0, ?7)",
            )?
            .execute(params![
                c.id as i64,
                c.repo_id,
                c.kind,
                c.data_offset as i64,
                c.data_end as i64,
                c.chunk_count,
                c.created_ms as i64
            ])?;
        Ok(())
    }

    fn extend_container(&self, id: u64, data_end: u64, chunk_count: u32) -> StoreResult<()> {
        self.c()
            .prepare_cached("UPDATE containers SET data_end = ?1, chunk_count = ?2 WHERE id = ?3")?
            .execute(params![data_end as i64, chunk_count, id as i64])?;
        Ok(())
    }

    fn seal_damaged_container(&self, id: i64, reason: &str) -> StoreResult<()> {
        self.c().execute(
            "UPDATE containers SET sealed = 1, damage = ?2 WHERE id = ?1",
            params![id, reason],
        )?;
        Ok(())
    }
}
