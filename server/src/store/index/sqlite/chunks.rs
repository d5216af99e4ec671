use std::ops::Deref;

use rusqlite::Connection;

#[allow(unused_imports)]
use super::{fp_of, Sql};
use crate::store::index::{ChunkRead, ChunkWrite};
#[allow(unused_imports)]
use crate::store::StoreResult;

impl<C: Deref<Target = Connection>> ChunkRead for Sql<C> {}

impl<C: Deref<Target = Connection>> ChunkWrite for Sql<C> {}
