use std::ops::Deref;

use rusqlite::{params, Connection};
use wasm_core::hash::Fingerprint;

use super::{chunks::chunk_rows_of, fp_of, Sql};
use crate::store::index::chunks::ChunkRow;
use crate::store::index::maintenance::{
    ChunkMove, LiveManifest, RewriteMove, Source, WrittenContainer,
};
use crate::store::index::{MaintenanceRead, MaintenanceWrite};
use crate::store::StoreResult;

fn source_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Source> {
    Ok(Source {
        id: r.get(0)?,
        kind: r.get(1)?,
        data_offset: r.get(2)?,
        data_end: r.get(3)?,
    })
}

impl<C: Deref<Target = Connection>> MaintenanceRead for Sql<C> {
    fn version_mark(&self, repo_id: i64) -> StoreResult<(i64, i64)> {
        Ok(self
            .c()
            .prepare_cached(
                "SELECT COUNT(*), COALESCE(MAX(id), 0) FROM versions WHERE repo_id = ?1",
            )?
            .query_row([repo_id], |r| Ok((r.get(0)?, r.get(1)?)))?)
    }

    fn live_manifests(&self, repo_id: i64) -> StoreResult<Vec<LiveManifest>> {
        let mut st = self.c().prepare_cached(
            "SELECT id, source, manifest_base, manifest FROM versions WHERE repo_id = ?1 ORDER BY id",
        )?;
        let it = st.query_map([repo_id], |r| {
            Ok(LiveManifest {
                id: r.get(0)?,
                source: r.get(1)?,
                manifest: super::stored_manifest(r, 2)?,
            })
        })?;
        Ok(it.collect::<Result<_, _>>()?)
    }

    fn min_live_version(&self, repo_id: i64) -> StoreResult<i64> {
        Ok(self.c().query_row(
            "SELECT COALESCE(MIN(id), 9223372036854775807) FROM versions WHERE repo_id = ?1",
            [repo_id],
            |r| r.get(0),
        )?)
    }

    fn gc_epoch(&self, repo_id: i64) -> StoreResult<i64> {
        Ok(self
            .c()
            .query_row("SELECT gc_epoch FROM repos WHERE id = ?1", [repo_id], |r| {
                r.get(0)
            })?)
    }

    fn delta_done(&self, repo_id: i64) -> StoreResult<Option<i64>> {
        Ok(self.c().query_row(
            "SELECT delta_done FROM repos WHERE id = ?1",
            [repo_id],
            |r| r.get(0),
        )?)
    }

    fn gc_counters(&self, repo_id: i64) -> StoreResult<(i64, i64)> {
        Ok(self.c().query_row(
            "SELECT gc_epoch, reclaimed_bytes FROM repos WHERE id = ?1",
            [repo_id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?)
    }

    fn data_bytes(&self, repo_id: i64) -> StoreResult<i64> {
        Ok(self.c().query_row(
            "SELECT COALESCE(SUM(data_end - data_offset), 0) FROM containers WHERE repo_id = ?1",
            [repo_id],
            |r| r.get(0),
        )?)
    }

    fn archival_below(&self, repo_id: i64, below: i64) -> StoreResult<Vec<Source>> {
        let mut st = self.c().prepare_cached(
            "SELECT id, kind, data_offset, data_end FROM containers WHERE repo_id = ?1 AND kind = 1 AND newest_version < ?2",
        )?;
        let it = st.query_map(params![repo_id, below], source_row)?;
        Ok(it.collect::<Result<_, _>>()?)
    }

    fn undamaged_containers(&self, repo_id: i64) -> StoreResult<Vec<Source>> {
        let mut st = self.c().prepare_cached(
            "SELECT id, kind, data_offset, data_end FROM containers WHERE repo_id = ?1 AND damage IS NULL",
        )?;
        let it = st.query_map([repo_id], source_row)?;
        Ok(it.collect::<Result<_, _>>()?)
    }

    fn container_source(&self, id: i64) -> StoreResult<Source> {
        Ok(self.c().query_row(
            "SELECT id, kind, data_offset, data_end FROM containers WHERE id = ?1",
            [id],
            source_row,
        )?)
    }

    fn container_exists(&self, id: i64) -> StoreResult<bool> {
        let n: i64 =
            self.c()
                .query_row("SELECT COUNT(*) FROM containers WHERE id = ?1", [id], |r| {
                    r.get(0)
                })?;
        Ok(n > 0)
    }

    fn container_chunk_count(&self, id: i64) -> StoreResult<i64> {
        Ok(self.c().query_row(
            "SELECT COUNT(*) FROM chunks WHERE container_id = ?1",
            [id],
            |r| r.get(0),
        )?)
    }

    fn live_rows(&self, id: i64) -> StoreResult<Vec<ChunkRow>> {
        let mut out = Vec::new();
        chunk_rows_of(
            self.c(),
            "SELECT fp, container_id, slot, offset, stored_len, raw_len, codec, first_version IS NOT NULL, stored_ms FROM chunks WHERE container_id = ?1 ORDER BY slot",
            id,
            &mut |r| {
                out.push(r);
                Ok(())
            },
        )?;
        Ok(out)
    }

    fn any_stored(&self, repo_id: i64, fps: &[Fingerprint]) -> StoreResult<bool> {
        let mut st = self
            .c()
            .prepare_cached("SELECT 1 FROM chunks WHERE repo_id = ?1 AND fp = ?2")?;
        for fp in fps {
            if st.exists(params![repo_id, &fp[..]])? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    fn delta_edges(&self, repo_id: i64) -> StoreResult<Vec<(Fingerprint, Fingerprint)>> {
        let mut st = self.c().prepare_cached(
            "SELECT fp, base FROM chunks WHERE repo_id = ?1 AND base IS NOT NULL",
        )?;
        let rows = st.query_map([repo_id], |r| {
            Ok((r.get::<_, Vec<u8>>(0)?, r.get::<_, Vec<u8>>(1)?))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (fp, base) = row?;
            out.push((fp_of(fp), fp_of(base)));
        }
        Ok(out)
    }

    fn delta_totals(&self, repo_id: i64) -> StoreResult<(i64, i64)> {
        Ok(self.c().query_row(
            "SELECT COUNT(*), COALESCE(SUM(saved), 0) FROM chunks WHERE repo_id = ?1 AND base IS NOT NULL",
            [repo_id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?)
    }

    fn first_stored_totals(&self, repo_id: i64) -> StoreResult<Vec<(i64, i64, i64)>> {
        let mut st = self.c().prepare_cached(
            "SELECT first_version, SUM(stored_len), SUM(saved) FROM chunks WHERE repo_id = ?1 AND first_version IS NOT NULL GROUP BY first_version",
        )?;
        let rows = st.query_map([repo_id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}

impl<C: Deref<Target = Connection>> MaintenanceWrite for Sql<C> {
    fn add_reclaimed_bytes(&self, repo_id: i64, bytes: i64) -> StoreResult<()> {
        self.c().execute(
            "UPDATE repos SET reclaimed_bytes = reclaimed_bytes + ?2 WHERE id = ?1",
            params![repo_id, bytes],
        )?;
        Ok(())
    }

    fn set_delta_done(&self, repo_id: i64, version: i64) -> StoreResult<()> {
        self.c().execute(
            "UPDATE repos SET delta_done = MAX(COALESCE(delta_done, 0), ?2) WHERE id = ?1",
            params![repo_id, version],
        )?;
        Ok(())
    }

    fn bump_gc_epoch(&self, repo_id: i64) -> StoreResult<()> {
        self.c().execute(
            "UPDATE repos SET gc_epoch = gc_epoch + 1 WHERE id = ?1",
            [repo_id],
        )?;
        Ok(())
    }

    fn delete_container_chunks(&self, id: i64) -> StoreResult<u64> {
        Ok(self
            .c()
            .execute("DELETE FROM chunks WHERE container_id = ?1", [id])? as u64)
    }

    fn delete_chunk_in(
        &self,
        repo_id: i64,
        fp: &Fingerprint,
        container_id: i64,
    ) -> StoreResult<u64> {
        Ok(self
            .c()
            .prepare_cached(
                "DELETE FROM chunks WHERE repo_id = ?1 AND fp = ?2 AND container_id = ?3",
            )?
            .execute(params![repo_id, &fp[..], container_id])? as u64)
    }

    fn drop_container(&self, id: i64) -> StoreResult<()> {
        let records = self
            .c()
            .execute("DELETE FROM quarantine WHERE container_id = ?1", [id])?;
        if records > 0 {
            self.c().execute(
                "UPDATE repos SET gc_epoch = gc_epoch + 1 WHERE id = (SELECT repo_id FROM containers WHERE id = ?1)",
                [id],
            )?;
        }
        self.c()
            .execute("DELETE FROM containers WHERE id = ?1", [id])?;
        Ok(())
    }

    fn lower_newest_version(&self, id: i64, b_id: i64) -> StoreResult<()> {
        self.c().execute(
            "UPDATE containers SET newest_version = ?2 WHERE id = ?1 AND newest_version > ?2",
            params![id, b_id],
        )?;
        Ok(())
    }

    fn insert_written_container(&self, c: &WrittenContainer) -> StoreResult<()> {
        self.c()
            .prepare_cached(
                "INSERT INTO containers(id, repo_id, kind, data_offset, data_end, chunk_count, newest_version, created_ms, sealed) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            )?
            .execute(params![
                c.id,
                c.repo_id,
                c.kind,
                c.data_offset,
                c.data_end,
                c.chunk_count,
                c.newest_version,
                c.created_ms,
                c.sealed as i64,
            ])?;
        Ok(())
    }

    fn repoint_chunks(&self, repo_id: i64, to: i64, moves: &[ChunkMove]) -> StoreResult<()> {
        let mut upd = self.c().prepare_cached(
            "UPDATE chunks SET container_id = ?1, slot = ?2, offset = ?3 WHERE repo_id = ?4 AND fp = ?5 AND container_id = ?6 AND slot = ?7",
        )?;
        for (fp, old_cid, old_slot, slot, offset) in moves {
            upd.execute(params![
                to,
                slot,
                *offset as i64,
                repo_id,
                &fp[..],
                old_cid,
                old_slot
            ])?;
        }
        Ok(())
    }

    fn repoint_rewritten(&self, repo_id: i64, to: i64, moves: &[RewriteMove]) -> StoreResult<u64> {
        let mut upd = self.c().prepare_cached(
            "UPDATE chunks SET container_id = ?1, slot = ?2, offset = ?3, stored_len = ?4, codec = ?5, base = ?6, saved = ?7 WHERE repo_id = ?8 AND fp = ?9 AND container_id = ?10 AND slot = ?11",
        )?;
        let mut n = 0;
        for m in moves {
            n += upd.execute(params![
                to,
                m.slot,
                m.offset as i64,
                m.stored_len,
                m.codec,
                m.base.as_ref().map(|b| &b[..]),
                m.saved,
                repo_id,
                &m.fp[..],
                m.old_container,
                m.old_slot
            ])? as u64;
        }
        Ok(n)
    }
}
