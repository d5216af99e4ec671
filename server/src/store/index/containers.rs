//! Container rows: each container's kind, data range, chunk count and newest version (store::containers, recover).

#[allow(unused_imports)]
use crate::store::StoreResult;

pub trait ContainerRead {}

pub trait ContainerWrite {}
