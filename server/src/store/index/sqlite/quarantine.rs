use std::ops::Deref;

use rusqlite::Connection;

#[allow(unused_imports)]
use super::{fp_of, Sql};
use crate::store::index::{QuarantineRead, QuarantineWrite};
#[allow(unused_imports)]
use crate::store::StoreResult;

impl<C: Deref<Target = Connection>> QuarantineRead for Sql<C> {}

impl<C: Deref<Target = Connection>> QuarantineWrite for Sql<C> {}
