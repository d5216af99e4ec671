use std::ops::Deref;

use rusqlite::Connection;

#[allow(unused_imports)]
use super::{fp_of, Sql};
use crate::store::index::{VersionRead, VersionWrite};
#[allow(unused_imports)]
use crate::store::StoreResult;

impl<C: Deref<Target = Connection>> VersionRead for Sql<C> {}

impl<C: Deref<Target = Connection>> VersionWrite for Sql<C> {}
