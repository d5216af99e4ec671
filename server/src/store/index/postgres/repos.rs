use std::ops::DerefMut;

use postgres::Client;
#[allow(unused_imports)]
use wasm_core::hash::Fingerprint;

use super::Pg;
#[allow(unused_imports)]
use crate::store::index::{
    chunks::*, containers::*, maintenance::*, quarantine::*, repos::*, versions::*,
};
use crate::store::StoreResult;

impl<G: DerefMut<Target = Client>> RepoRead for Pg<G> {
    #[allow(unused_variables)]
    fn repo_id(&self, _name: &str) -> StoreResult<Option<i64>> {
        unimplemented!("postgres: repo_id")
    }

    #[allow(unused_variables)]
    fn repo_ids(&self) -> StoreResult<Vec<i64>> {
        unimplemented!("postgres: repo_ids")
    }

    #[allow(unused_variables)]
    fn token(&self, _hash: &[u8]) -> StoreResult<Option<(i64, String)>> {
        unimplemented!("postgres: token")
    }

    #[allow(unused_variables)]
    fn tokens(&self, _repo_id: i64) -> StoreResult<Vec<TokenRow>> {
        unimplemented!("postgres: tokens")
    }
}

impl<G: DerefMut<Target = Client>> RepoWrite for Pg<G> {
    #[allow(unused_variables)]
    fn create_repo(&self, _name: &str, _created_ms: i64) -> StoreResult<i64> {
        unimplemented!("postgres: create_repo")
    }

    #[allow(unused_variables)]
    fn add_token(&self, _repo_id: i64, _t: &TokenRow) -> StoreResult<()> {
        unimplemented!("postgres: add_token")
    }

    #[allow(unused_variables)]
    fn delete_token(&self, _hash: &[u8]) -> StoreResult<()> {
        unimplemented!("postgres: delete_token")
    }
}
