//! Versions: their rows, statistics and manifests (store::versions, stats).

#[allow(unused_imports)]
use crate::store::StoreResult;

pub trait VersionRead {}

pub trait VersionWrite {}
