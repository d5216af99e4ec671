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

impl<G: DerefMut<Target = Client>> MaintenanceRead for Pg<G> {
    #[allow(unused_variables)]
    fn version_mark(&self, _repo_id: i64) -> StoreResult<(i64, i64)> {
        unimplemented!("postgres: version_mark")
    }

    #[allow(unused_variables)]
    fn live_manifests(&self, _repo_id: i64) -> StoreResult<Vec<LiveManifest>> {
        unimplemented!("postgres: live_manifests")
    }

    #[allow(unused_variables)]
    fn min_live_version(&self, _repo_id: i64) -> StoreResult<i64> {
        unimplemented!("postgres: min_live_version")
    }

    #[allow(unused_variables)]
    fn gc_epoch(&self, _repo_id: i64) -> StoreResult<i64> {
        unimplemented!("postgres: gc_epoch")
    }

    #[allow(unused_variables)]
    fn gc_counters(&self, _repo_id: i64) -> StoreResult<(i64, i64)> {
        unimplemented!("postgres: gc_counters")
    }

    #[allow(unused_variables)]
    fn data_bytes(&self, _repo_id: i64) -> StoreResult<i64> {
        unimplemented!("postgres: data_bytes")
    }

    #[allow(unused_variables)]
    fn archival_below(&self, _repo_id: i64, _below: i64) -> StoreResult<Vec<Source>> {
        unimplemented!("postgres: archival_below")
    }

    #[allow(unused_variables)]
    fn undamaged_containers(&self, _repo_id: i64) -> StoreResult<Vec<Source>> {
        unimplemented!("postgres: undamaged_containers")
    }

    #[allow(unused_variables)]
    fn container_source(&self, _id: i64) -> StoreResult<Source> {
        unimplemented!("postgres: container_source")
    }

    #[allow(unused_variables)]
    fn container_exists(&self, _id: i64) -> StoreResult<bool> {
        unimplemented!("postgres: container_exists")
    }

    #[allow(unused_variables)]
    fn container_chunk_count(&self, _id: i64) -> StoreResult<i64> {
        unimplemented!("postgres: container_chunk_count")
    }

    #[allow(unused_variables)]
    fn live_rows(&self, _id: i64) -> StoreResult<Vec<LiveRow>> {
        unimplemented!("postgres: live_rows")
    }

    #[allow(unused_variables)]
    fn any_stored(&self, _repo_id: i64, _fps: &[Fingerprint]) -> StoreResult<bool> {
        unimplemented!("postgres: any_stored")
    }
}

impl<G: DerefMut<Target = Client>> MaintenanceWrite for Pg<G> {
    #[allow(unused_variables)]
    fn add_reclaimed_bytes(&self, _repo_id: i64, _bytes: i64) -> StoreResult<()> {
        unimplemented!("postgres: add_reclaimed_bytes")
    }

    #[allow(unused_variables)]
    fn bump_gc_epoch(&self, _repo_id: i64) -> StoreResult<()> {
        unimplemented!("postgres: bump_gc_epoch")
    }

    #[allow(unused_variables)]
    fn delete_container_chunks(&self, _id: i64) -> StoreResult<u64> {
        unimplemented!("postgres: delete_container_chunks")
    }

    #[allow(unused_variables)]
    fn delete_chunk_in(
        &self,
        _repo_id: i64,
        _fp: &Fingerprint,
        _container_id: i64,
    ) -> StoreResult<u64> {
        unimplemented!("postgres: delete_chunk_in")
    }

    #[allow(unused_variables)]
    fn drop_container(&self, _id: i64) -> StoreResult<()> {
        unimplemented!("postgres: drop_container")
    }

    #[allow(unused_variables)]
    fn lower_newest_version(&self, _id: i64, _b_id: i64) -> StoreResult<()> {
        unimplemented!("postgres: lower_newest_version")
    }

    #[allow(unused_variables)]
    fn insert_written_container(&self, _c: &WrittenContainer) -> StoreResult<()> {
        unimplemented!("postgres: insert_written_container")
    }

    #[allow(unused_variables)]
    fn repoint_chunks(&self, _repo_id: i64, _to: i64, _moves: &[ChunkMove]) -> StoreResult<()> {
        unimplemented!("postgres: repoint_chunks")
    }
}
