//! Chunk locations: where each stored chunk of a repository is (store::chunks, ingest).

#[allow(unused_imports)]
use crate::store::StoreResult;

pub trait ChunkRead {}

pub trait ChunkWrite {}
