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

impl<G: DerefMut<Target = Client>> ChunkRead for Pg<G> {
    #[allow(unused_variables)]
    fn chunk_rows(
        &self,
        _repo_id: i64,
        _f: &mut dyn FnMut(ChunkRow) -> StoreResult<()>,
    ) -> StoreResult<()> {
        unimplemented!("postgres: chunk_rows")
    }

    #[allow(unused_variables)]
    fn chunk_location(&self, _repo_id: i64, _fp: &Fingerprint) -> StoreResult<Option<ChunkLoc>> {
        unimplemented!("postgres: chunk_location")
    }

    #[allow(unused_variables)]
    fn chunk_stored(&self, _repo_id: i64, _fp: &Fingerprint) -> StoreResult<bool> {
        unimplemented!("postgres: chunk_stored")
    }

    #[allow(unused_variables)]
    fn chunk_raw_len(&self, _repo_id: i64, _fp: &Fingerprint) -> StoreResult<Option<u32>> {
        unimplemented!("postgres: chunk_raw_len")
    }

    #[allow(unused_variables)]
    fn chunk_count(&self, _repo_id: i64) -> StoreResult<i64> {
        unimplemented!("postgres: chunk_count")
    }

    #[allow(unused_variables)]
    fn container_chunk_extents(
        &self,
        _repo_id: i64,
        _container_id: u64,
    ) -> StoreResult<Vec<(Fingerprint, u64, u64)>> {
        unimplemented!("postgres: container_chunk_extents")
    }

    #[allow(unused_variables)]
    fn container_chunks(
        &self,
        _repo_id: i64,
        _container_id: u64,
        _f: &mut dyn FnMut(Fingerprint, ChunkLoc) -> StoreResult<()>,
    ) -> StoreResult<()> {
        unimplemented!("postgres: container_chunks")
    }
}

impl<G: DerefMut<Target = Client>> ChunkWrite for Pg<G> {
    #[allow(unused_variables)]
    fn insert_chunks(
        &self,
        _repo_id: i64,
        _container_id: u64,
        _stored_ms: i64,
        _chunks: &[NewChunk],
    ) -> StoreResult<()> {
        unimplemented!("postgres: insert_chunks")
    }
}
