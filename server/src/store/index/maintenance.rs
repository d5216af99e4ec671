//! What the layout mover, expiry and garbage collection ask of the index (store::layout, mover, expiry, gc).

#[allow(unused_imports)]
use crate::store::StoreResult;

pub trait MaintenanceRead {}

pub trait MaintenanceWrite {}
