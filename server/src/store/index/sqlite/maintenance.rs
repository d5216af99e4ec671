use std::ops::Deref;

use rusqlite::Connection;

#[allow(unused_imports)]
use super::{fp_of, Sql};
use crate::store::index::{MaintenanceRead, MaintenanceWrite};
#[allow(unused_imports)]
use crate::store::StoreResult;

impl<C: Deref<Target = Connection>> MaintenanceRead for Sql<C> {}

impl<C: Deref<Target = Connection>> MaintenanceWrite for Sql<C> {}
