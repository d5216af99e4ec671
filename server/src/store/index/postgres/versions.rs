use std::ops::DerefMut;

use postgres::{Client, Row};
use wasm_core::{
    hash::Fingerprint,
    resemble::{delta::CODEC_DELTA, frame::SLICE_LEN},
};

use super::{stored_manifest, Pg};
use crate::store::index::versions::{
    ChunkTotals, CommitChunk, NewVersion, SeriesRow, StoredManifest, Totals, VersionMeta,
    VersionRecord, VersionRow,
};
use crate::store::index::{VersionRead, VersionWrite};
use crate::store::StoreResult;

/// The columns of a [`VersionRow`], in the order [`version_row`] reads them.
const VERSION_ROW: &str = "id, source, time, committed_ms, stats, damaged";

fn version_row(r: &Row) -> StoreResult<VersionRow> {
    Ok(VersionRow {
        id: r.try_get(0)?,
        source: r.try_get(1)?,
        time: r.try_get(2)?,
        committed_ms: r.try_get(3)?,
        stats: r.try_get(4)?,
        damaged: r.try_get(5)?,
    })
}

impl<G: DerefMut<Target = Client>> VersionRead for Pg<G> {
    fn versions(&self, repo_id: i64, own: Option<&str>) -> StoreResult<Vec<VersionRow>> {
        self.c()
            .query(
                &format!(
                    "SELECT {VERSION_ROW} FROM versions
                     WHERE repo_id = $1 AND ($2::TEXT IS NULL OR token_id = $2) ORDER BY id"
                ),
                &[&repo_id, &own],
            )?
            .iter()
            .map(version_row)
            .collect()
    }

    fn version(&self, repo_id: i64, id: i64) -> StoreResult<Option<VersionRecord>> {
        self.c()
            .query_opt(
                &format!(
                    "SELECT {VERSION_ROW}, manifest_base, manifest, token_id FROM versions WHERE id = $1 AND repo_id = $2"
                ),
                &[&id, &repo_id],
            )?
            .map(|r| {
                Ok(VersionRecord {
                    row: version_row(&r)?,
                    manifest: stored_manifest(&r, 6)?,
                    token_id: r.try_get(8)?,
                })
            })
            .transpose()
    }

    fn version_metas(&self, repo_id: i64) -> StoreResult<Vec<VersionMeta>> {
        self.c()
            .query(
                "SELECT id, source, LEAST(time, committed_ms) FROM versions WHERE repo_id = $1 ORDER BY id",
                &[&repo_id],
            )?
            .iter()
            .map(|r| {
                Ok(VersionMeta {
                    id: r.try_get(0)?,
                    source: r.try_get(1)?,
                    time: r.try_get(2)?,
                })
            })
            .collect()
    }

    fn manifests(&self, repo_id: i64) -> StoreResult<Vec<(i64, StoredManifest)>> {
        self.c()
            .query(
                "SELECT id, manifest_base, manifest FROM versions WHERE repo_id = $1",
                &[&repo_id],
            )?
            .iter()
            .map(|r| Ok((r.try_get(0)?, stored_manifest(r, 1)?)))
            .collect()
    }

    fn stored_manifest(&self, repo_id: i64, id: i64) -> StoreResult<Option<StoredManifest>> {
        self.c()
            .query_opt(
                "SELECT manifest_base, manifest FROM versions WHERE id = $1 AND repo_id = $2",
                &[&id, &repo_id],
            )?
            .map(|r| stored_manifest(&r, 0))
            .transpose()
    }

    fn manifest_dependents(&self, repo_id: i64, ids: &[i64]) -> StoreResult<Vec<i64>> {
        self.c()
            .query(
                "SELECT id FROM versions WHERE repo_id = $1 AND manifest_base = ANY($2)",
                &[&repo_id, &ids],
            )?
            .iter()
            .map(|r| Ok(r.try_get(0)?))
            .collect()
    }

    fn version_series(&self, repo_id: i64) -> StoreResult<Vec<SeriesRow>> {
        self.c()
            .query(
                "SELECT id, source, time, committed_ms, stats, manifest_base, manifest FROM versions WHERE repo_id = $1 ORDER BY id",
                &[&repo_id],
            )?
            .iter()
            .map(|r| {
                Ok(SeriesRow {
                    id: r.try_get(0)?,
                    source: r.try_get(1)?,
                    time: r.try_get(2)?,
                    committed_ms: r.try_get(3)?,
                    stats: r.try_get(4)?,
                    manifest: stored_manifest(r, 5)?,
                })
            })
            .collect()
    }

    fn commit_chunk(&self, repo_id: i64, fp: &Fingerprint) -> StoreResult<Option<CommitChunk>> {
        self.c()
            .query_opt(
                "SELECT stored_len, raw_len, container_id, first_version IS NULL FROM chunks WHERE repo_id = $1 AND fp = $2",
                &[&repo_id, &&fp[..]],
            )?
            .map(|r| {
                Ok(CommitChunk {
                    stored_len: r.try_get::<_, i64>(0)? as u32,
                    raw_len: r.try_get::<_, i64>(1)? as u32,
                    container_id: r.try_get(2)?,
                    uncommitted: r.try_get(3)?,
                })
            })
            .transpose()
    }

    fn stored_len(&self, repo_id: i64, fp: &Fingerprint) -> StoreResult<Option<i64>> {
        self.c()
            .query_opt(
                "SELECT stored_len FROM chunks WHERE repo_id = $1 AND fp = $2",
                &[&repo_id, &&fp[..]],
            )?
            .map(|r| Ok(r.try_get(0)?))
            .transpose()
    }

    fn chunk_totals(&self, repo_id: i64) -> StoreResult<ChunkTotals> {
        let r = self.c().query_one(
            "SELECT COUNT(*), COALESCE(SUM(raw_len), 0)::BIGINT, COALESCE(SUM(stored_len), 0)::BIGINT FROM chunks WHERE repo_id = $1",
            &[&repo_id],
        )?;
        Ok(ChunkTotals {
            count: r.try_get(0)?,
            raw_bytes: r.try_get(1)?,
            stored_bytes: r.try_get(2)?,
        })
    }

    fn committed_raw_bytes(&self, repo_id: i64) -> StoreResult<i64> {
        Ok(self
            .c()
            .query_one(
                "SELECT COALESCE(SUM(raw_len), 0)::BIGINT FROM chunks WHERE repo_id = $1 AND first_version IS NOT NULL
                   AND fp NOT IN (SELECT base FROM chunks WHERE repo_id = $1 AND codec = $2 AND stored_len = $3 AND base IS NOT NULL)",
                &[&repo_id, &(CODEC_DELTA as i64), &(SLICE_LEN as i64)],
            )?
            .try_get(0)?)
    }

    fn container_totals(&self, repo_id: i64) -> StoreResult<Totals> {
        let r = self.c().query_one(
            "SELECT COUNT(*), COALESCE(SUM(data_end), 0)::BIGINT FROM containers WHERE repo_id = $1",
            &[&repo_id],
        )?;
        Ok(Totals {
            count: r.try_get(0)?,
            bytes: r.try_get(1)?,
        })
    }

    fn container_kind_totals(&self, repo_id: i64, kind: u8) -> StoreResult<Totals> {
        let r = self.c().query_one(
            "SELECT COUNT(*), COALESCE(SUM(data_end - data_offset), 0)::BIGINT FROM containers WHERE repo_id = $1 AND kind = $2",
            &[&repo_id, &(kind as i64)],
        )?;
        Ok(Totals {
            count: r.try_get(0)?,
            bytes: r.try_get(1)?,
        })
    }
}

impl<G: DerefMut<Target = Client>> VersionWrite for Pg<G> {
    fn insert_version(&self, v: &NewVersion<'_>) -> StoreResult<i64> {
        let r = self.c().query_one(
            "INSERT INTO versions(repo_id, source, time, committed_ms, stats, manifest_base, manifest, token_id) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id",
            &[
                &v.repo_id,
                &v.source,
                &v.time,
                &v.committed_ms,
                &v.stats,
                &v.manifest.base,
                &v.manifest.blob,
                &v.token_id,
            ],
        )?;
        Ok(r.try_get(0)?)
    }

    fn mark_first_version(&self, repo_id: i64, vid: i64, fps: &[Fingerprint]) -> StoreResult<()> {
        // One statement for the whole list (SQLite runs one per fingerprint; the same rows
        // change either way, and here each statement is a round trip).
        let fps: Vec<&[u8]> = fps.iter().map(|fp| &fp[..]).collect();
        self.c().execute(
            "UPDATE chunks SET first_version = $1 WHERE repo_id = $2 AND fp = ANY($3) AND first_version IS NULL",
            &[&vid, &repo_id, &fps],
        )?;
        Ok(())
    }

    fn set_newest_version(&self, vid: i64, ids: &[i64]) -> StoreResult<()> {
        self.c().execute(
            "UPDATE containers SET newest_version = $1 WHERE id = ANY($2)",
            &[&vid, &ids],
        )?;
        Ok(())
    }

    fn seal_active(&self, repo_id: i64) -> StoreResult<()> {
        self.c().execute(
            "UPDATE containers SET sealed = 1 WHERE repo_id = $1 AND kind = 0 AND sealed = 0",
            &[&repo_id],
        )?;
        Ok(())
    }

    fn set_manifest(&self, repo_id: i64, id: i64, m: &StoredManifest) -> StoreResult<()> {
        self.c().execute(
            "UPDATE versions SET manifest_base = $1, manifest = $2 WHERE id = $3 AND repo_id = $4",
            &[&m.base, &m.blob, &id, &repo_id],
        )?;
        Ok(())
    }

    fn delete_versions(&self, repo_id: i64, ids: &[i64]) -> StoreResult<()> {
        self.c().execute(
            "DELETE FROM versions WHERE id = ANY($1) AND repo_id = $2",
            &[&ids, &repo_id],
        )?;
        Ok(())
    }
}
