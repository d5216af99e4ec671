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

impl<G: DerefMut<Target = Client>> ContainerRead for Pg<G> {
    #[allow(unused_variables)]
    fn max_container_id(&self) -> StoreResult<u64> {
        unimplemented!("postgres: max_container_id")
    }

    #[allow(unused_variables)]
    fn all_containers(&self) -> StoreResult<Vec<IndexContainer>> {
        unimplemented!("postgres: all_containers")
    }

    #[allow(unused_variables)]
    fn repo_containers(&self, _repo_id: i64) -> StoreResult<Vec<IndexContainer>> {
        unimplemented!("postgres: repo_containers")
    }

    #[allow(unused_variables)]
    fn newest_active_container(
        &self,
        _repo_id: i64,
    ) -> StoreResult<Option<(IndexContainer, bool)>> {
        unimplemented!("postgres: newest_active_container")
    }

    #[allow(unused_variables)]
    fn container_ids(&self, _repo_id: i64) -> StoreResult<Vec<i64>> {
        unimplemented!("postgres: container_ids")
    }

    #[allow(unused_variables)]
    fn container_data_end(&self, _repo_id: i64, _id: i64) -> StoreResult<Option<i64>> {
        unimplemented!("postgres: container_data_end")
    }

    #[allow(unused_variables)]
    fn listed_containers(&self, _repo_id: i64) -> StoreResult<Vec<ListedContainer>> {
        unimplemented!("postgres: listed_containers")
    }

    #[allow(unused_variables)]
    fn listed_chunks(
        &self,
        _repo_id: i64,
        _f: &mut dyn FnMut(i64, ListedChunk) -> StoreResult<()>,
    ) -> StoreResult<()> {
        unimplemented!("postgres: listed_chunks")
    }
}

impl<G: DerefMut<Target = Client>> ContainerWrite for Pg<G> {
    #[allow(unused_variables)]
    fn insert_container(&self, _c: &NewContainer) -> StoreResult<()> {
        unimplemented!("postgres: insert_container")
    }

    #[allow(unused_variables)]
    fn extend_container(&self, _id: u64, _data_end: u64, _chunk_count: u32) -> StoreResult<()> {
        unimplemented!("postgres: extend_container")
    }

    #[allow(unused_variables)]
    fn seal_damaged_container(&self, _id: i64, _reason: &str) -> StoreResult<()> {
        unimplemented!("postgres: seal_damaged_container")
    }
}
