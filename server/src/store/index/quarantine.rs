//! Quarantined copies of damaged chunks (store::quarantine, verify).

#[allow(unused_imports)]
use crate::store::StoreResult;

pub trait QuarantineRead {}

pub trait QuarantineWrite {}
