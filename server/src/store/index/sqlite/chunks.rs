use std::ops::Deref;

use rusqlite::{params, Connection, OptionalExtension};
use wasm_core::hash::Fingerprint;

use super::{fp_of, Sql};
use crate::store::index::chunks::{
    ChunkLoc, ChunkRead, ChunkRow, ChunkWrite, LocatedWithBase, NewChunk,
};
use crate::store::StoreResult;

/// Streams the rows `sql` selects: the columns of a [`ChunkRow`] in its order, one
/// parameter (a repository or a container id).
pub(super) fn chunk_rows_of(
    c: &Connection,
    sql: &str,
    key: i64,
    f: &mut dyn FnMut(ChunkRow) -> StoreResult<()>,
) -> StoreResult<()> {
    let mut st = c.prepare_cached(sql)?;
    let mut rows = st.query([key])?;
    while let Some(r) = rows.next()? {
        f(ChunkRow {
            fp: fp_of(r.get(0)?),
            container_id: r.get(1)?,
            slot: r.get(2)?,
            offset: r.get::<_, i64>(3)? as u64,
            stored_len: r.get(4)?,
            raw_len: r.get(5)?,
            codec: r.get(6)?,
            committed: r.get(7)?,
            stored_ms: r.get(8)?,
        })?;
    }
    Ok(())
}

impl<C: Deref<Target = Connection>> ChunkRead for Sql<C> {
    fn chunk_rows(
        &self,
        repo_id: i64,
        f: &mut dyn FnMut(ChunkRow) -> StoreResult<()>,
    ) -> StoreResult<()> {
        chunk_rows_of(
            self.c(),
            "SELECT fp, container_id, slot, offset, stored_len, raw_len, codec, first_version IS NOT NULL, stored_ms FROM chunks WHERE repo_id = ?1",
            repo_id,
            f,
        )
    }

    fn chunk_location(&self, repo_id: i64, fp: &Fingerprint) -> StoreResult<Option<ChunkLoc>> {
        Ok(self
            .chunk_locations_with_bases(repo_id, std::slice::from_ref(fp))?
            .pop()
            .flatten()
            .map(|(l, _)| l))
    }

    fn chunk_locations(
        &self,
        repo_id: i64,
        fps: &[Fingerprint],
    ) -> StoreResult<Vec<Option<ChunkLoc>>> {
        Ok(self
            .chunk_locations_with_bases(repo_id, fps)?
            .into_iter()
            .map(|x| x.map(|(l, _)| l))
            .collect())
    }

    /// One statement, prepared once for the whole list: a version's locations are thousands
    /// of point lookups.
    fn chunk_locations_with_bases(
        &self,
        repo_id: i64,
        fps: &[Fingerprint],
    ) -> StoreResult<Vec<Option<LocatedWithBase>>> {
        let mut st = self.c().prepare_cached(
            "SELECT container_id, offset, stored_len, raw_len, codec, base FROM chunks WHERE repo_id = ?1 AND fp = ?2",
        )?;
        let mut out = Vec::with_capacity(fps.len());
        for fp in fps {
            out.push(
                st.query_row(params![repo_id, &fp[..]], |r| {
                    let base: Option<Vec<u8>> = r.get(5)?;
                    Ok((
                        ChunkLoc {
                            container_id: r.get::<_, i64>(0)? as u64,
                            offset: r.get::<_, i64>(1)? as u64,
                            stored_len: r.get(2)?,
                            raw_len: r.get(3)?,
                            codec: r.get(4)?,
                        },
                        base.and_then(|b| Fingerprint::try_from(b.as_slice()).ok()),
                    ))
                })
                .optional()?,
            );
        }
        Ok(out)
    }

    fn delta_bases(
        &self,
        repo_id: i64,
        fps: &[Fingerprint],
    ) -> StoreResult<Vec<Option<Fingerprint>>> {
        let mut st = self
            .c()
            .prepare_cached("SELECT base FROM chunks WHERE repo_id = ?1 AND fp = ?2")?;
        let mut out = Vec::with_capacity(fps.len());
        for fp in fps {
            let base: Option<Option<Vec<u8>>> = st
                .query_row(params![repo_id, &fp[..]], |r| r.get(0))
                .optional()?;
            out.push(
                base.flatten()
                    .and_then(|b| Fingerprint::try_from(b.as_slice()).ok()),
            );
        }
        Ok(out)
    }

    fn chunk_stored(&self, repo_id: i64, fp: &Fingerprint) -> StoreResult<bool> {
        Ok(self
            .c()
            .prepare_cached("SELECT 1 FROM chunks WHERE repo_id = ?1 AND fp = ?2")?
            .exists(params![repo_id, &fp[..]])?)
    }

    fn chunk_raw_len(&self, repo_id: i64, fp: &Fingerprint) -> StoreResult<Option<u32>> {
        Ok(self
            .c()
            .prepare_cached("SELECT raw_len FROM chunks WHERE repo_id = ?1 AND fp = ?2")?
            .query_row(params![repo_id, &fp[..]], |r| r.get(0))
            .optional()?)
    }

    fn chunk_count(&self, repo_id: i64) -> StoreResult<i64> {
        Ok(self.c().query_row(
            "SELECT COUNT(*) FROM chunks WHERE repo_id = ?1",
            [repo_id],
            |r| r.get(0),
        )?)
    }

    fn container_chunk_extents(
        &self,
        repo_id: i64,
        container_id: u64,
    ) -> StoreResult<Vec<(Fingerprint, u64, u64)>> {
        let mut st = self.c().prepare_cached(
            "SELECT fp, offset, stored_len FROM chunks WHERE container_id = ?1 AND repo_id = ?2 ORDER BY slot",
        )?;
        let rows = st.query_map(params![container_id as i64, repo_id], |r| {
            Ok((
                r.get::<_, Vec<u8>>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, i64>(2)?,
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (fp, offset, stored) = row?;
            let Ok(fp) = Fingerprint::try_from(fp.as_slice()) else {
                continue;
            };
            out.push((fp, offset as u64, stored as u64));
        }
        Ok(out)
    }

    fn container_chunks(
        &self,
        repo_id: i64,
        container_id: u64,
        f: &mut dyn FnMut(Fingerprint, ChunkLoc) -> StoreResult<()>,
    ) -> StoreResult<()> {
        let mut st = self.c().prepare_cached(
            "SELECT fp, offset, stored_len, raw_len, codec FROM chunks WHERE container_id = ?1 AND repo_id = ?2 ORDER BY slot",
        )?;
        let mut rows = st.query(params![container_id as i64, repo_id])?;
        while let Some(r) = rows.next()? {
            let fp: Vec<u8> = r.get(0)?;
            let Ok(fp) = Fingerprint::try_from(fp.as_slice()) else {
                continue;
            };
            f(
                fp,
                ChunkLoc {
                    container_id,
                    offset: r.get::<_, i64>(1)? as u64,
                    stored_len: r.get(2)?,
                    raw_len: r.get(3)?,
                    codec: r.get(4)?,
                },
            )?;
        }
        Ok(())
    }
}

impl<C: Deref<Target = Connection>> ChunkWrite for Sql<C> {
    fn insert_chunks(
        &self,
        repo_id: i64,
        container_id: u64,
        stored_ms: i64,
        chunks: &[NewChunk],
    ) -> StoreResult<()> {
        let mut ins = self.c().prepare_cached(
            "INSERT INTO chunks(repo_id, fp, container_id, slot, offset, stored_len, raw_len, codec, stored_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        )?;
        for c in chunks {
            ins.execute(params![
                repo_id,
                &c.fp[..],
                container_id as i64,
                c.slot,
                c.offset as i64,
                c.stored_len,
                c.raw_len,
                c.codec,
                stored_ms
            ])?;
        }
        Ok(())
    }
}
