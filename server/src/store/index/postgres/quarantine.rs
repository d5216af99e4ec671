use std::ops::DerefMut;

use postgres::Client;
use wasm_core::hash::Fingerprint;

use super::Pg;
use crate::store::index::chunks::ChunkRow;
use crate::store::index::quarantine::{
    Found, QuarantineRead, QuarantineWrite, Recount, VersionDamage,
};
use crate::store::StoreResult;

const MOVE_ROW: &str = r#"INSERT INTO quarantine(repo_id, fp, container_id, slot, "offset", stored_len, raw_len, codec, first_version, reason, found_ms)
    SELECT repo_id, fp, container_id, slot, "offset", stored_len, raw_len, codec, first_version, $5::TEXT, $6::BIGINT
    FROM chunks WHERE repo_id = $1 AND fp = $2 AND container_id = $3 AND "offset" = $4"#;

impl<G: DerefMut<Target = Client>> QuarantineRead for Pg<G> {
    fn quarantined_rows(
        &self,
        repo_id: i64,
        f: &mut dyn FnMut(ChunkRow) -> StoreResult<()>,
    ) -> StoreResult<()> {
        super::chunks::chunk_rows_of(
            &mut self.c(),
            r#"SELECT fp, container_id, slot, "offset", stored_len, raw_len, codec, first_version IS NOT NULL, 0::BIGINT FROM quarantine WHERE repo_id = $1"#,
            repo_id,
            f,
        )
    }

    fn is_quarantined(&self, repo_id: i64, fp: &Fingerprint) -> StoreResult<bool> {
        Ok(self
            .c()
            .query_opt(
                "SELECT 1 FROM quarantine WHERE repo_id = $1 AND fp = $2 AND healed_ms IS NULL LIMIT 1",
                &[&repo_id, &&fp[..]],
            )?
            .is_some())
    }

    fn any_quarantined(&self, repo_id: i64) -> StoreResult<bool> {
        Ok(self
            .c()
            .query_opt(
                "SELECT 1 FROM quarantine WHERE repo_id = $1 AND healed_ms IS NULL LIMIT 1",
                &[&repo_id],
            )?
            .is_some())
    }

    fn quarantined_count(&self, repo_id: i64) -> StoreResult<i64> {
        Ok(self
            .c()
            .query_one(
                "SELECT COUNT(DISTINCT fp) FROM quarantine WHERE repo_id = $1 AND healed_ms IS NULL",
                &[&repo_id],
            )?
            .try_get(0)?)
    }

    fn quarantine_epoch(&self, repo_id: i64) -> StoreResult<i64> {
        Ok(self
            .c()
            .query_one(
                "SELECT COALESCE(MAX(id), 0) FROM quarantine WHERE repo_id = $1",
                &[&repo_id],
            )?
            .try_get(0)?)
    }

    fn damaged_versions(&self, repo_id: i64) -> StoreResult<Vec<(i64, i64)>> {
        self.c()
            .query(
                "SELECT id, damaged FROM versions WHERE repo_id = $1 AND damaged > 0 ORDER BY id",
                &[&repo_id],
            )?
            .iter()
            .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
            .collect()
    }

    fn damaged_version_count(&self, repo_id: i64) -> StoreResult<i64> {
        Ok(self
            .c()
            .query_one(
                "SELECT COUNT(*) FROM versions WHERE repo_id = $1 AND damaged > 0",
                &[&repo_id],
            )?
            .try_get(0)?)
    }

    fn any_damaged_version(&self, repo_id: i64) -> StoreResult<bool> {
        Ok(self
            .c()
            .query_opt(
                "SELECT 1 FROM versions WHERE repo_id = $1 AND damaged > 0 LIMIT 1",
                &[&repo_id],
            )?
            .is_some())
    }

    fn repos_with_unknown_damage(&self) -> StoreResult<Vec<i64>> {
        self.c()
            .query(
                "SELECT DISTINCT repo_id FROM versions WHERE damaged < 0",
                &[],
            )?
            .iter()
            .map(|r| Ok(r.try_get(0)?))
            .collect()
    }

    fn versions_to_recount(&self, repo_id: i64, which: Recount) -> StoreResult<Vec<VersionDamage>> {
        let sql = match which {
            Recount::All => "SELECT id, damaged, manifest_base, manifest FROM versions WHERE repo_id = $1",
            Recount::Damaged => {
                "SELECT id, damaged, manifest_base, manifest FROM versions WHERE repo_id = $1 AND damaged > 0"
            }
            Recount::Unknown => {
                "SELECT id, damaged, manifest_base, manifest FROM versions WHERE repo_id = $1 AND damaged < 0"
            }
        };
        self.c()
            .query(sql, &[&repo_id])?
            .iter()
            .map(|r| {
                Ok(VersionDamage {
                    id: r.try_get(0)?,
                    damaged: r.try_get(1)?,
                    manifest: super::stored_manifest(r, 2)?,
                })
            })
            .collect()
    }
}

impl<G: DerefMut<Target = Client>> QuarantineWrite for Pg<G> {
    fn quarantine_chunk(&self, repo_id: i64, f: &Found, found_ms: i64) -> StoreResult<bool> {
        let fp = &f.fp[..];
        let container_id = f.container_id as i64;
        let offset = f.offset as i64;
        let moved = self.c().execute(
            MOVE_ROW,
            &[&repo_id, &fp, &container_id, &offset, &f.reason, &found_ms],
        )? > 0;
        if moved {
            self.c().execute(
                r#"DELETE FROM chunks WHERE repo_id = $1 AND fp = $2 AND container_id = $3 AND "offset" = $4"#,
                &[&repo_id, &fp, &container_id, &offset],
            )?;
        }
        Ok(moved)
    }

    fn heal_quarantined(&self, repo_id: i64, fp: &Fingerprint, healed_ms: i64) -> StoreResult<()> {
        let fp = &fp[..];
        self.c().execute(
            "UPDATE chunks SET first_version = (SELECT first_version FROM quarantine q WHERE q.repo_id = $1 AND q.fp = $2 ORDER BY id DESC LIMIT 1) WHERE repo_id = $1 AND fp = $2 AND first_version IS NULL",
            &[&repo_id, &fp],
        )?;
        self.c().execute(
            "UPDATE quarantine SET healed_ms = $3 WHERE repo_id = $1 AND fp = $2 AND healed_ms IS NULL",
            &[&repo_id, &fp, &healed_ms],
        )?;
        Ok(())
    }

    fn set_version_damage(&self, version_id: i64, damaged: i64) -> StoreResult<()> {
        self.c().execute(
            "UPDATE versions SET damaged = $2 WHERE id = $1",
            &[&version_id, &damaged],
        )?;
        Ok(())
    }
}
