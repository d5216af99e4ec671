use std::ops::DerefMut;

use postgres::Client;
#[allow(unused_imports)]
use wasm_core::hash::Fingerprint;

use super::Pg;
#[allow(unused_imports)]
use crate::store::index::{
    chunks::*, containers::*, maintenance::*, quarantine::*, repos::*, versions::*,
};
use crate::store::StoreResult;

impl<G: DerefMut<Target = Client>> VersionRead for Pg<G> {
    #[allow(unused_variables)]
    fn versions(&self, _repo_id: i64, _own: Option<&str>) -> StoreResult<Vec<VersionRow>> {
        unimplemented!("postgres: versions")
    }

    #[allow(unused_variables)]
    fn version(&self, _repo_id: i64, _id: i64) -> StoreResult<Option<VersionRecord>> {
        unimplemented!("postgres: version")
    }

    #[allow(unused_variables)]
    fn version_metas(&self, _repo_id: i64) -> StoreResult<Vec<VersionMeta>> {
        unimplemented!("postgres: version_metas")
    }

    #[allow(unused_variables)]
    fn manifests(&self, _repo_id: i64) -> StoreResult<Vec<(i64, Vec<u8>)>> {
        unimplemented!("postgres: manifests")
    }

    #[allow(unused_variables)]
    fn version_series(&self, _repo_id: i64) -> StoreResult<Vec<SeriesRow>> {
        unimplemented!("postgres: version_series")
    }

    #[allow(unused_variables)]
    fn commit_chunk(&self, _repo_id: i64, _fp: &Fingerprint) -> StoreResult<Option<CommitChunk>> {
        unimplemented!("postgres: commit_chunk")
    }

    #[allow(unused_variables)]
    fn stored_len(&self, _repo_id: i64, _fp: &Fingerprint) -> StoreResult<Option<i64>> {
        unimplemented!("postgres: stored_len")
    }

    #[allow(unused_variables)]
    fn chunk_totals(&self, _repo_id: i64) -> StoreResult<ChunkTotals> {
        unimplemented!("postgres: chunk_totals")
    }

    #[allow(unused_variables)]
    fn container_totals(&self, _repo_id: i64) -> StoreResult<Totals> {
        unimplemented!("postgres: container_totals")
    }

    #[allow(unused_variables)]
    fn container_kind_totals(&self, _repo_id: i64, _kind: u8) -> StoreResult<Totals> {
        unimplemented!("postgres: container_kind_totals")
    }
}

impl<G: DerefMut<Target = Client>> VersionWrite for Pg<G> {
    #[allow(unused_variables)]
    fn insert_version(&self, _v: &NewVersion<'_>) -> StoreResult<i64> {
        unimplemented!("postgres: insert_version")
    }

    #[allow(unused_variables)]
    fn mark_first_version(
        &self,
        _repo_id: i64,
        _vid: i64,
        _fps: &[Fingerprint],
    ) -> StoreResult<()> {
        unimplemented!("postgres: mark_first_version")
    }

    #[allow(unused_variables)]
    fn set_newest_version(&self, _vid: i64, _ids: &[i64]) -> StoreResult<()> {
        unimplemented!("postgres: set_newest_version")
    }

    #[allow(unused_variables)]
    fn seal_active(&self, _repo_id: i64) -> StoreResult<()> {
        unimplemented!("postgres: seal_active")
    }

    #[allow(unused_variables)]
    fn delete_versions(&self, _repo_id: i64, _ids: &[i64]) -> StoreResult<()> {
        unimplemented!("postgres: delete_versions")
    }
}
