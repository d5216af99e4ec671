use std::ops::Deref;

use rusqlite::{params, Connection, OptionalExtension};
use wasm_core::{
    hash::Fingerprint,
    resemble::{delta::CODEC_DELTA, frame::SLICE_LEN},
};

use super::{stored_manifest, Sql};
use crate::store::index::versions::{
    ChunkTotals, CommitChunk, NewVersion, SeriesRow, StoredManifest, Totals, VersionMeta,
    VersionRecord, VersionRow,
};
use crate::store::index::{VersionRead, VersionWrite};
use crate::store::StoreResult;

/// The columns of a [`VersionRow`], in the order [`version_row`] reads them.
const VERSION_ROW: &str = "id, source, time, committed_ms, stats, damaged";

fn version_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<VersionRow> {
    Ok(VersionRow {
        id: r.get(0)?,
        source: r.get(1)?,
        time: r.get(2)?,
        committed_ms: r.get(3)?,
        stats: r.get(4)?,
        damaged: r.get(5)?,
    })
}

impl<C: Deref<Target = Connection>> VersionRead for Sql<C> {
    fn versions(&self, repo_id: i64, own: Option<&str>) -> StoreResult<Vec<VersionRow>> {
        let mut st = self.c().prepare_cached(&format!(
            "SELECT {VERSION_ROW} FROM versions
             WHERE repo_id = ?1 AND (?2 IS NULL OR token_id = ?2) ORDER BY id"
        ))?;
        let rows = st.query_map(params![repo_id, own], version_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn version(&self, repo_id: i64, id: i64) -> StoreResult<Option<VersionRecord>> {
        Ok(self
            .c()
            .prepare_cached(&format!(
                "SELECT {VERSION_ROW}, manifest_base, manifest, token_id FROM versions WHERE id = ?1 AND repo_id = ?2"
            ))?
            .query_row(params![id, repo_id], |r| {
                Ok(VersionRecord {
                    row: version_row(r)?,
                    manifest: stored_manifest(r, 6)?,
                    token_id: r.get(8)?,
                })
            })
            .optional()?)
    }

    fn version_metas(&self, repo_id: i64) -> StoreResult<Vec<VersionMeta>> {
        let mut st = self.c().prepare_cached(
            "SELECT id, source, MIN(time, committed_ms) FROM versions WHERE repo_id = ?1 ORDER BY id",
        )?;
        let it = st.query_map([repo_id], |r| {
            Ok(VersionMeta {
                id: r.get(0)?,
                source: r.get(1)?,
                time: r.get(2)?,
            })
        })?;
        Ok(it.collect::<Result<_, _>>()?)
    }

    fn manifests(&self, repo_id: i64) -> StoreResult<Vec<(i64, StoredManifest)>> {
        let mut st = self.c().prepare_cached(
            "SELECT id, manifest_base, manifest FROM versions WHERE repo_id = ?1",
        )?;
        let it = st.query_map([repo_id], |r| Ok((r.get(0)?, stored_manifest(r, 1)?)))?;
        Ok(it.collect::<Result<_, _>>()?)
    }

    fn stored_manifest(&self, repo_id: i64, id: i64) -> StoreResult<Option<StoredManifest>> {
        Ok(self
            .c()
            .prepare_cached(
                "SELECT manifest_base, manifest FROM versions WHERE id = ?1 AND repo_id = ?2",
            )?
            .query_row(params![id, repo_id], |r| stored_manifest(r, 0))
            .optional()?)
    }

    fn manifest_dependents(&self, repo_id: i64, ids: &[i64]) -> StoreResult<Vec<i64>> {
        let mut st = self
            .c()
            .prepare_cached("SELECT id FROM versions WHERE repo_id = ?1 AND manifest_base = ?2")?;
        let mut out = Vec::new();
        for base in ids {
            for id in st.query_map(params![repo_id, base], |r| r.get::<_, i64>(0))? {
                out.push(id?);
            }
        }
        Ok(out)
    }

    fn version_series(&self, repo_id: i64) -> StoreResult<Vec<SeriesRow>> {
        let mut st = self.c().prepare(
            "SELECT id, source, time, committed_ms, stats, manifest_base, manifest FROM versions WHERE repo_id = ?1 ORDER BY id",
        )?;
        let it = st.query_map([repo_id], |r| {
            Ok(SeriesRow {
                id: r.get(0)?,
                source: r.get(1)?,
                time: r.get(2)?,
                committed_ms: r.get(3)?,
                stats: r.get(4)?,
                manifest: stored_manifest(r, 5)?,
            })
        })?;
        Ok(it.collect::<Result<_, _>>()?)
    }

    fn commit_chunk(&self, repo_id: i64, fp: &Fingerprint) -> StoreResult<Option<CommitChunk>> {
        Ok(self
            .c()
            .prepare_cached(
                "SELECT stored_len, raw_len, container_id, first_version IS NULL FROM chunks WHERE repo_id = ?1 AND fp = ?2",
            )?
            .query_row(params![repo_id, &fp[..]], |r| {
                Ok(CommitChunk {
                    stored_len: r.get(0)?,
                    raw_len: r.get(1)?,
                    container_id: r.get(2)?,
                    uncommitted: r.get(3)?,
                })
            })
            .optional()?)
    }

    fn stored_len(&self, repo_id: i64, fp: &Fingerprint) -> StoreResult<Option<i64>> {
        Ok(self
            .c()
            .prepare_cached("SELECT stored_len FROM chunks WHERE repo_id = ?1 AND fp = ?2")?
            .query_row(params![repo_id, &fp[..]], |r| r.get::<_, i64>(0))
            .optional()?)
    }

    fn chunk_totals(&self, repo_id: i64) -> StoreResult<ChunkTotals> {
        Ok(self.c().query_row(
            "SELECT COUNT(*), COALESCE(SUM(raw_len), 0), COALESCE(SUM(stored_len), 0) FROM chunks WHERE repo_id = ?1",
            [repo_id],
            |r| {
                Ok(ChunkTotals {
                    count: r.get(0)?,
                    raw_bytes: r.get(1)?,
                    stored_bytes: r.get(2)?,
                })
            },
        )?)
    }

    fn committed_raw_bytes(&self, repo_id: i64) -> StoreResult<i64> {
        Ok(self.c().query_row(
            "SELECT COALESCE(SUM(raw_len), 0) FROM chunks WHERE repo_id = ?1 AND first_version IS NOT NULL
               AND fp NOT IN (SELECT base FROM chunks WHERE repo_id = ?1 AND codec = ?2 AND stored_len = ?3 AND base IS NOT NULL)",
            params![repo_id, CODEC_DELTA as i64, SLICE_LEN as i64],
            |r| r.get(0),
        )?)
    }

    fn container_totals(&self, repo_id: i64) -> StoreResult<Totals> {
        Ok(self.c().query_row(
            "SELECT COUNT(*), COALESCE(SUM(data_end), 0) FROM containers WHERE repo_id = ?1",
            [repo_id],
            |r| {
                Ok(Totals {
                    count: r.get(0)?,
                    bytes: r.get(1)?,
                })
            },
        )?)
    }

    fn container_kind_totals(&self, repo_id: i64, kind: u8) -> StoreResult<Totals> {
        Ok(self.c().query_row(
            "SELECT COUNT(*), COALESCE(SUM(data_end - data_offset), 0) FROM containers WHERE repo_id = ?1 AND kind = ?2",
            params![repo_id, kind],
            |r| {
                Ok(Totals {
                    count: r.get(0)?,
                    bytes: r.get(1)?,
                })
            },
        )?)
    }
}

impl<C: Deref<Target = Connection>> VersionWrite for Sql<C> {
    fn insert_version(&self, v: &NewVersion<'_>) -> StoreResult<i64> {
        self.c().execute(
            "INSERT INTO versions(repo_id, source, time, committed_ms, stats, manifest_base, manifest, token_id) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            params![v.repo_id, v.source, v.time, v.committed_ms, v.stats, v.manifest.base, v.manifest.blob, v.token_id],
        )?;
        Ok(self.c().last_insert_rowid())
    }

    fn mark_first_version(&self, repo_id: i64, vid: i64, fps: &[Fingerprint]) -> StoreResult<()> {
        let mut st = self.c().prepare_cached(
            "UPDATE chunks SET first_version = ?1 WHERE repo_id = ?2 AND fp = ?3 AND first_version IS NULL",
        )?;
        for fp in fps {
            st.execute(params![vid, repo_id, &fp[..]])?;
        }
        Ok(())
    }

    fn set_newest_version(&self, vid: i64, ids: &[i64]) -> StoreResult<()> {
        let mut st = self
            .c()
            .prepare_cached("UPDATE containers SET newest_version = ?1 WHERE id = ?2")?;
        for cid in ids {
            st.execute(params![vid, cid])?;
        }
        Ok(())
    }

    fn seal_active(&self, repo_id: i64) -> StoreResult<()> {
        self.c().execute(
            "UPDATE containers SET sealed = 1 WHERE repo_id = ?1 AND kind = 0 AND sealed = 0",
            [repo_id],
        )?;
        Ok(())
    }

    fn set_manifest(&self, repo_id: i64, id: i64, m: &StoredManifest) -> StoreResult<()> {
        self.c().execute(
            "UPDATE versions SET manifest_base = ?1, manifest = ?2 WHERE id = ?3 AND repo_id = ?4",
            params![m.base, m.blob, id, repo_id],
        )?;
        Ok(())
    }

    fn delete_versions(&self, repo_id: i64, ids: &[i64]) -> StoreResult<()> {
        let mut del = self
            .c()
            .prepare_cached("DELETE FROM versions WHERE id = ?1 AND repo_id = ?2")?;
        for id in ids {
            del.execute(params![id, repo_id])?;
        }
        Ok(())
    }
}
