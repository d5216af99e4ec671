use std::ops::Deref;

use rusqlite::Connection;

#[allow(unused_imports)]
use super::{fp_of, Sql};
use crate::store::index::{ContainerRead, ContainerWrite};
#[allow(unused_imports)]
use crate::store::StoreResult;

impl<C: Deref<Target = Connection>> ContainerRead for Sql<C> {}

impl<C: Deref<Target = Connection>> ContainerWrite for Sql<C> {}
