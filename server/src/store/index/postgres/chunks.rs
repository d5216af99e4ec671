use std::ops::DerefMut;

use postgres::{fallible_iterator::FallibleIterator, types::ToSql, Client};
use wasm_core::hash::Fingerprint;

use super::{fp_of, Pg};
use crate::store::index::chunks::{
    ChunkLoc, ChunkRead, ChunkRow, ChunkWrite, LocatedWithBase, NewChunk,
};
use crate::store::StoreResult;

/// Streams the rows `sql` selects: the columns of a [`ChunkRow`] in its order, one
/// parameter (a repository or a container id).
pub(super) fn chunk_rows_of(
    c: &mut Client,
    sql: &str,
    key: i64,
    f: &mut dyn FnMut(ChunkRow) -> StoreResult<()>,
) -> StoreResult<()> {
    let mut rows = c.query_raw(sql, [key])?;
    while let Some(r) = rows.next()? {
        f(ChunkRow {
            fp: fp_of(r.try_get(0)?),
            container_id: r.try_get(1)?,
            slot: r.try_get::<_, i64>(2)? as u32,
            offset: r.try_get::<_, i64>(3)? as u64,
            stored_len: r.try_get::<_, i64>(4)? as u32,
            raw_len: r.try_get::<_, i64>(5)? as u32,
            codec: r.try_get::<_, i64>(6)? as u8,
            committed: r.try_get(7)?,
            stored_ms: r.try_get(8)?,
        })?;
    }
    Ok(())
}

/// A chunk's location from the columns `container_id, "offset", stored_len, raw_len,
/// codec` at `at`.. (the container id is the caller's when it is known).
fn loc_at(r: &postgres::Row, at: usize, container_id: u64) -> Result<ChunkLoc, postgres::Error> {
    Ok(ChunkLoc {
        container_id,
        offset: r.try_get::<_, i64>(at)? as u64,
        stored_len: r.try_get::<_, i64>(at + 1)? as u32,
        raw_len: r.try_get::<_, i64>(at + 2)? as u32,
        codec: r.try_get::<_, i64>(at + 3)? as u8,
    })
}

impl<G: DerefMut<Target = Client>> ChunkRead for Pg<G> {
    fn chunk_rows(
        &self,
        repo_id: i64,
        f: &mut dyn FnMut(ChunkRow) -> StoreResult<()>,
    ) -> StoreResult<()> {
        chunk_rows_of(
            &mut self.c(),
            r#"SELECT fp, container_id, slot, "offset", stored_len, raw_len, codec, first_version IS NOT NULL, stored_ms FROM chunks WHERE repo_id = $1"#,
            repo_id,
            f,
        )
    }

    fn chunk_location(&self, repo_id: i64, fp: &Fingerprint) -> StoreResult<Option<ChunkLoc>> {
        let row = self.c().query_opt(
            r#"SELECT container_id, "offset", stored_len, raw_len, codec FROM chunks WHERE repo_id = $1 AND fp = $2"#,
            &[&repo_id, &&fp[..]],
        )?;
        Ok(row
            .map(|r| loc_at(&r, 1, r.try_get::<_, i64>(0)? as u64))
            .transpose()?)
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

    fn chunk_locations_with_bases(
        &self,
        repo_id: i64,
        fps: &[Fingerprint],
    ) -> StoreResult<Vec<Option<LocatedWithBase>>> {
        let keys: Vec<&[u8]> = fps.iter().map(|fp| &fp[..]).collect();
        let rows = self.c().query(
            r#"SELECT fp, container_id, "offset", stored_len, raw_len, codec, base FROM chunks WHERE repo_id = $1 AND fp = ANY($2)"#,
            &[&repo_id, &keys],
        )?;
        let mut found = std::collections::HashMap::with_capacity(rows.len());
        for r in &rows {
            let loc = loc_at(r, 2, r.try_get::<_, i64>(1)? as u64)?;
            let base: Option<Vec<u8>> = r.try_get(6)?;
            let base = base.and_then(|b| Fingerprint::try_from(b.as_slice()).ok());
            found.insert(fp_of(r.try_get(0)?), (loc, base));
        }
        Ok(fps.iter().map(|fp| found.get(fp).copied()).collect())
    }

    fn delta_bases(
        &self,
        repo_id: i64,
        fps: &[Fingerprint],
    ) -> StoreResult<Vec<Option<Fingerprint>>> {
        let keys: Vec<&[u8]> = fps.iter().map(|fp| &fp[..]).collect();
        let rows = self.c().query(
            "SELECT fp, base FROM chunks WHERE repo_id = $1 AND fp = ANY($2) AND base IS NOT NULL",
            &[&repo_id, &keys],
        )?;
        let mut found = std::collections::HashMap::with_capacity(rows.len());
        for r in &rows {
            let base: Vec<u8> = r.try_get(1)?;
            if let Ok(base) = Fingerprint::try_from(base.as_slice()) {
                found.insert(fp_of(r.try_get(0)?), base);
            }
        }
        Ok(fps.iter().map(|fp| found.get(fp).copied()).collect())
    }

    fn chunk_stored(&self, repo_id: i64, fp: &Fingerprint) -> StoreResult<bool> {
        Ok(self
            .c()
            .query_opt(
                "SELECT 1 FROM chunks WHERE repo_id = $1 AND fp = $2",
                &[&repo_id, &&fp[..]],
            )?
            .is_some())
    }

    fn chunk_raw_len(&self, repo_id: i64, fp: &Fingerprint) -> StoreResult<Option<u32>> {
        Ok(self
            .c()
            .query_opt(
                "SELECT raw_len FROM chunks WHERE repo_id = $1 AND fp = $2",
                &[&repo_id, &&fp[..]],
            )?
            .map(|r| r.try_get::<_, i64>(0).map(|n| n as u32))
            .transpose()?)
    }

    fn chunk_count(&self, repo_id: i64) -> StoreResult<i64> {
        Ok(self
            .c()
            .query_one(
                "SELECT COUNT(*) FROM chunks WHERE repo_id = $1",
                &[&repo_id],
            )?
            .try_get(0)?)
    }

    fn container_chunk_extents(
        &self,
        repo_id: i64,
        container_id: u64,
    ) -> StoreResult<Vec<(Fingerprint, u64, u64)>> {
        let rows = self.c().query(
            r#"SELECT fp, "offset", stored_len FROM chunks WHERE container_id = $1 AND repo_id = $2 ORDER BY slot"#,
            &[&(container_id as i64), &repo_id],
        )?;
        let mut out = Vec::new();
        for r in &rows {
            let fp: Vec<u8> = r.try_get(0)?;
            let offset: i64 = r.try_get(1)?;
            let stored: i64 = r.try_get(2)?;
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
        // Read whole before `f` runs: `f` may read the index itself (a delta's base), and the
        // connection serves one statement at a time. A container holds a few thousand rows.
        let mut found = Vec::new();
        {
            let mut c = self.c();
            let params: [&(dyn ToSql + Sync); 2] = [&(container_id as i64), &repo_id];
            let mut rows = c.query_raw(
                r#"SELECT fp, "offset", stored_len, raw_len, codec FROM chunks WHERE container_id = $1 AND repo_id = $2 ORDER BY slot"#,
                params,
            )?;
            while let Some(r) = rows.next()? {
                let fp: Vec<u8> = r.try_get(0)?;
                let Ok(fp) = Fingerprint::try_from(fp.as_slice()) else {
                    continue;
                };
                found.push((fp, loc_at(&r, 1, container_id)?));
            }
        }
        for (fp, loc) in found {
            f(fp, loc)?;
        }
        Ok(())
    }
}

impl<G: DerefMut<Target = Client>> ChunkWrite for Pg<G> {
    fn insert_chunks(
        &self,
        repo_id: i64,
        container_id: u64,
        stored_ms: i64,
        chunks: &[NewChunk],
    ) -> StoreResult<()> {
        if chunks.is_empty() {
            return Ok(());
        }
        // One statement for the whole batch (a bundle's chunks): a round trip per chunk
        // would bound ingest by the network's latency.
        let fps: Vec<&[u8]> = chunks.iter().map(|ch| &ch.fp[..]).collect();
        let col = |f: fn(&NewChunk) -> i64| chunks.iter().map(f).collect::<Vec<i64>>();
        let (slots, offsets, stored, raw, codecs) = (
            col(|ch| ch.slot as i64),
            col(|ch| ch.offset as i64),
            col(|ch| ch.stored_len as i64),
            col(|ch| ch.raw_len as i64),
            col(|ch| ch.codec as i64),
        );
        self.c().execute(
            r#"INSERT INTO chunks(repo_id, fp, container_id, slot, "offset", stored_len, raw_len, codec, stored_ms)
               SELECT $1, fp, $2, slot, o, sl, rl, codec, $3
               FROM UNNEST($4::BYTEA[], $5::BIGINT[], $6::BIGINT[], $7::BIGINT[], $8::BIGINT[], $9::BIGINT[])
                 AS t(fp, slot, o, sl, rl, codec)"#,
            &[
                &repo_id,
                &(container_id as i64),
                &stored_ms,
                &fps,
                &slots,
                &offsets,
                &stored,
                &raw,
                &codecs,
            ],
        )?;
        Ok(())
    }
}
