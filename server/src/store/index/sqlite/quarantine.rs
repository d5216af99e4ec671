use std::ops::Deref;

use rusqlite::{params, Connection};
use wasm_core::hash::Fingerprint;

use super::{chunks::chunk_rows_of, Sql};
use crate::store::index::chunks::ChunkRow;
use crate::store::index::quarantine::{
    Found, QuarantineRead, QuarantineWrite, Recount, VersionDamage,
};
use crate::store::StoreResult;

const MOVE_ROW: &str = "INSERT INTO quarantine(repo_id, fp, container_id, slot, offset, stored_len, raw_len, codec, first_version, reason, found_ms)
    SELECT repo_id, fp, container_id, slot, offset, stored_len, raw_len, codec, first_version, ?5, ?6
    FROM chunks WHERE repo_id = ?1 AND fp = ?2 AND container_id = ?3 AND offset = ?4";

impl<C: Deref<Target = Connection>> QuarantineRead for Sql<C> {
    fn quarantined_rows(
        &self,
        repo_id: i64,
        f: &mut dyn FnMut(ChunkRow) -> StoreResult<()>,
    ) -> StoreResult<()> {
        chunk_rows_of(
            self.c(),
            "SELECT fp, container_id, slot, offset, stored_len, raw_len, codec, first_version IS NOT NULL, 0 FROM quarantine WHERE repo_id = ?1",
            repo_id,
            f,
        )
    }

    fn is_quarantined(&self, repo_id: i64, fp: &Fingerprint) -> StoreResult<bool> {
        Ok(self
            .c()
            .prepare_cached(
                "SELECT 1 FROM quarantine WHERE repo_id = ?1 AND fp = ?2 AND healed_ms IS NULL LIMIT 1",
            )?
            .exists(params![repo_id, &fp[..]])?)
    }

    fn any_quarantined(&self, repo_id: i64) -> StoreResult<bool> {
        Ok(self
            .c()
            .prepare_cached(
                "SELECT 1 FROM quarantine WHERE repo_id = ?1 AND healed_ms IS NULL LIMIT 1",
            )?
            .exists([repo_id])?)
    }

    fn quarantined_count(&self, repo_id: i64) -> StoreResult<i64> {
        Ok(self.c().query_row(
            "SELECT COUNT(DISTINCT fp) FROM quarantine WHERE repo_id = ?1 AND healed_ms IS NULL",
            [repo_id],
            |r| r.get(0),
        )?)
    }

    fn quarantine_epoch(&self, repo_id: i64) -> StoreResult<i64> {
        Ok(self
            .c()
            .prepare_cached("SELECT COALESCE(MAX(id), 0) FROM quarantine WHERE repo_id = ?1")?
            .query_row([repo_id], |r| r.get(0))?)
    }

    fn damaged_versions(&self, repo_id: i64) -> StoreResult<Vec<(i64, i64)>> {
        let mut st = self.c().prepare_cached(
            "SELECT id, damaged FROM versions WHERE repo_id = ?1 AND damaged > 0 ORDER BY id",
        )?;
        let it = st.query_map([repo_id], |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok(it.collect::<Result<_, _>>()?)
    }

    fn damaged_version_count(&self, repo_id: i64) -> StoreResult<i64> {
        Ok(self.c().query_row(
            "SELECT COUNT(*) FROM versions WHERE repo_id = ?1 AND damaged > 0",
            [repo_id],
            |r| r.get(0),
        )?)
    }

    fn any_damaged_version(&self, repo_id: i64) -> StoreResult<bool> {
        Ok(self
            .c()
            .prepare_cached("SELECT 1 FROM versions WHERE repo_id = ?1 AND damaged > 0 LIMIT 1")?
            .exists([repo_id])?)
    }

    fn repos_with_unknown_damage(&self) -> StoreResult<Vec<i64>> {
        let mut st = self
            .c()
            .prepare("SELECT DISTINCT repo_id FROM versions WHERE damaged < 0")?;
        let it = st.query_map([], |r| r.get(0))?;
        Ok(it.collect::<Result<_, _>>()?)
    }

    fn versions_to_recount(&self, repo_id: i64, which: Recount) -> StoreResult<Vec<VersionDamage>> {
        let mut st = self.c().prepare_cached(match which {
            Recount::All => "SELECT id, damaged, manifest_base, manifest FROM versions WHERE repo_id = ?1",
            Recount::Damaged => {
                "SELECT id, damaged, manifest_base, manifest FROM versions WHERE repo_id = ?1 AND damaged > 0"
            }
            Recount::Unknown => {
                "SELECT id, damaged, manifest_base, manifest FROM versions WHERE repo_id = ?1 AND damaged < 0"
            }
        })?;
        let it = st.query_map([repo_id], |r| {
            Ok(VersionDamage {
                id: r.get(0)?,
                damaged: r.get(1)?,
                manifest: super::stored_manifest(r, 2)?,
            })
        })?;
        Ok(it.collect::<Result<_, _>>()?)
    }
}

impl<C: Deref<Target = Connection>> QuarantineWrite for Sql<C> {
    fn quarantine_chunk(&self, repo_id: i64, f: &Found, found_ms: i64) -> StoreResult<bool> {
        let at = params![repo_id, &f.fp[..], f.container_id as i64, f.offset as i64];
        let moved = self.c().prepare_cached(MOVE_ROW)?.execute(params![
            repo_id,
            &f.fp[..],
            f.container_id as i64,
            f.offset as i64,
            f.reason,
            found_ms
        ])? > 0;
        if moved {
            self.c()
                .prepare_cached(
                    "DELETE FROM chunks WHERE repo_id = ?1 AND fp = ?2 AND container_id = ?3 AND offset = ?4",
                )?
                .execute(at)?;
        }
        Ok(moved)
    }

    fn heal_quarantined(&self, repo_id: i64, fp: &Fingerprint, healed_ms: i64) -> StoreResult<()> {
        self.c()
            .prepare_cached(
                "UPDATE chunks SET first_version = (SELECT first_version FROM quarantine q WHERE q.repo_id = ?1 AND q.fp = ?2 ORDER BY id DESC LIMIT 1) WHERE repo_id = ?1 AND fp = ?2 AND first_version IS NULL",
            )?
            .execute(params![repo_id, &fp[..]])?;
        self.c()
            .prepare_cached(
                "UPDATE quarantine SET healed_ms = ?3 WHERE repo_id = ?1 AND fp = ?2 AND healed_ms IS NULL",
            )?
            .execute(params![repo_id, &fp[..], healed_ms])?;
        Ok(())
    }

    fn set_version_damage(&self, version_id: i64, damaged: i64) -> StoreResult<()> {
        self.c()
            .prepare_cached("UPDATE versions SET damaged = ?2 WHERE id = ?1")?
            .execute(params![version_id, damaged])?;
        Ok(())
    }
}
