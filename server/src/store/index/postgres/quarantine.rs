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

impl<G: DerefMut<Target = Client>> QuarantineRead for Pg<G> {
    #[allow(unused_variables)]
    fn quarantined_rows(
        &self,
        _repo_id: i64,
        _f: &mut dyn FnMut(ChunkRow) -> StoreResult<()>,
    ) -> StoreResult<()> {
        unimplemented!("postgres: quarantined_rows")
    }

    #[allow(unused_variables)]
    fn is_quarantined(&self, _repo_id: i64, _fp: &Fingerprint) -> StoreResult<bool> {
        unimplemented!("postgres: is_quarantined")
    }

    #[allow(unused_variables)]
    fn any_quarantined(&self, _repo_id: i64) -> StoreResult<bool> {
        unimplemented!("postgres: any_quarantined")
    }

    #[allow(unused_variables)]
    fn quarantined_count(&self, _repo_id: i64) -> StoreResult<i64> {
        unimplemented!("postgres: quarantined_count")
    }

    #[allow(unused_variables)]
    fn quarantine_epoch(&self) -> StoreResult<i64> {
        unimplemented!("postgres: quarantine_epoch")
    }

    #[allow(unused_variables)]
    fn damaged_versions(&self, _repo_id: i64) -> StoreResult<Vec<(i64, i64)>> {
        unimplemented!("postgres: damaged_versions")
    }

    #[allow(unused_variables)]
    fn damaged_version_count(&self, _repo_id: i64) -> StoreResult<i64> {
        unimplemented!("postgres: damaged_version_count")
    }

    #[allow(unused_variables)]
    fn any_damaged_version(&self, _repo_id: i64) -> StoreResult<bool> {
        unimplemented!("postgres: any_damaged_version")
    }

    #[allow(unused_variables)]
    fn repos_with_unknown_damage(&self) -> StoreResult<Vec<i64>> {
        unimplemented!("postgres: repos_with_unknown_damage")
    }

    #[allow(unused_variables)]
    fn versions_to_recount(
        &self,
        _repo_id: i64,
        _which: Recount,
    ) -> StoreResult<Vec<VersionDamage>> {
        unimplemented!("postgres: versions_to_recount")
    }
}

impl<G: DerefMut<Target = Client>> QuarantineWrite for Pg<G> {
    #[allow(unused_variables)]
    fn quarantine_chunk(&self, _repo_id: i64, _f: &Found, _found_ms: i64) -> StoreResult<bool> {
        unimplemented!("postgres: quarantine_chunk")
    }

    #[allow(unused_variables)]
    fn heal_quarantined(
        &self,
        _repo_id: i64,
        _fp: &Fingerprint,
        _healed_ms: i64,
    ) -> StoreResult<()> {
        unimplemented!("postgres: heal_quarantined")
    }

    #[allow(unused_variables)]
    fn set_version_damage(&self, _version_id: i64, _damaged: i64) -> StoreResult<()> {
        unimplemented!("postgres: set_version_damage")
    }
}
