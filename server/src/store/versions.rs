//! Versions: committing a manifest against the index (every referenced chunk stored, every
//! file's size the sum of its chunks), listing, reading and deleting them. A version row
//! and the `first_version` marks of its new chunks commit in one transaction; the row
//! holds the manifest in its stored form ([`manifest_blob`]: one zstd frame of the JSON,
//! standalone or against the JSON of the source's previous version), which
//! [`ManifestChains`] decodes.

use std::collections::{HashMap, HashSet};

use serde_json::{json, Value};
use wasm_core::{
    format::{
        manifest::{EntryKind, Manifest, VersionStats},
        parse_fp_hex,
    },
    hash::Fingerprint,
};

use super::{
    index::{
        versions::{CommitChunk, NewVersion, StoredManifest},
        IndexRead, IndexWrite,
    },
    manifest_blob::{self, BlobError, MAX_DEPTH},
    mover::layout_enabled,
    now_ms,
    stats::ratio,
    Store, StoreError, StoreResult,
};

/// The distinct fingerprints of manifest JSON `json`.
pub fn manifest_fps(json: &[u8]) -> Result<HashSet<Fingerprint>, String> {
    Ok(manifest_stream(json)?.into_iter().collect())
}

/// The fingerprints of manifest JSON `json` in stream order: every entry's recipe, one after
/// the other (duplicates kept), as the delta pass's DupAdj aligns versions.
pub fn manifest_stream(json: &[u8]) -> Result<Vec<Fingerprint>, String> {
    let m: Manifest = serde_json::from_slice(json).map_err(|e| e.to_string())?;
    let mut fps = Vec::new();
    for e in &m.entries {
        for h in &e.recipe {
            fps.push(parse_fp_hex(h).ok_or("bad fingerprint in a stored recipe")?);
        }
    }
    Ok(fps)
}

pub use super::index::versions::{VersionRecord, VersionRow};

/// Decodes stored manifests, following each row's base (docs/FORMAT.md, "Stored form"):
/// the rows handed to [`ManifestChains::each`] are decoded in id order, a base among them
/// once (its JSON kept until its last dependent is decoded); a base that is not among them
/// is read from the index. Errors of the index end the walk; a manifest that cannot be
/// read (damaged, or its chain broken) is handed to the caller as the reason, and so are
/// the manifests stored against it.
pub struct ManifestChains<'a> {
    ix: &'a dyn IndexRead,
    repo_id: i64,
}

/// A decoded manifest and its depth (links to a standalone frame).
type Decoded = Result<(Vec<u8>, usize), BlobError>;

impl<'a> ManifestChains<'a> {
    pub fn new(ix: &'a dyn IndexRead, repo_id: i64) -> Self {
        ManifestChains { ix, repo_id }
    }

    /// Calls `each` with the JSON of every row of `rows` (or why it cannot be read), in id
    /// order.
    pub fn each<'r>(
        &self,
        rows: impl IntoIterator<Item = (i64, &'r StoredManifest)>,
        mut each: impl FnMut(i64, Result<&[u8], BlobError>) -> StoreResult<()>,
    ) -> StoreResult<()> {
        let mut rows: Vec<(i64, &StoredManifest)> = rows.into_iter().collect();
        rows.sort_by_key(|r| r.0);
        let mut uses: HashMap<i64, usize> = HashMap::new();
        for (_, m) in &rows {
            if let Some(b) = m.base {
                *uses.entry(b).or_default() += 1;
            }
        }
        let mut kept: HashMap<i64, Decoded> = HashMap::new();
        for (id, m) in rows {
            let decoded = match m.base {
                Some(b) => {
                    let d = match kept.get(&b) {
                        Some(base) => self.on_base(id, m, b, base.as_ref().map_err(Clone::clone)),
                        None => self.decode(id, m)?,
                    };
                    if let Some(n) = uses.get_mut(&b) {
                        *n -= 1;
                        if *n == 0 {
                            kept.remove(&b);
                        }
                    }
                    d
                }
                None => self.decode(id, m)?,
            };
            each(id, decoded.as_ref().map(|d| &d.0[..]).map_err(Clone::clone))?;
            if uses.get(&id).is_some_and(|n| *n > 0) {
                kept.insert(id, decoded);
            }
        }
        Ok(())
    }

    /// [`Self::each`] with the distinct fingerprints of each manifest; an unreadable one ends
    /// the walk with an error naming its version.
    pub fn each_fps<'r>(
        &self,
        rows: impl IntoIterator<Item = (i64, &'r StoredManifest)>,
        each: impl FnMut(i64, HashSet<Fingerprint>) -> StoreResult<()>,
    ) -> StoreResult<()> {
        self.each_fps_or(rows, each, |id, e| Err(unreadable_manifest(id, &e)))
    }

    /// As [`Self::each_fps`], but a manifest that cannot be read goes to `unreadable` (with
    /// why), which decides whether that ends the walk.
    pub fn each_fps_or<'r>(
        &self,
        rows: impl IntoIterator<Item = (i64, &'r StoredManifest)>,
        mut each: impl FnMut(i64, HashSet<Fingerprint>) -> StoreResult<()>,
        mut unreadable: impl FnMut(i64, String) -> StoreResult<()>,
    ) -> StoreResult<()> {
        self.each(rows, |id, json| {
            match json.map_err(|e| e.to_string()).and_then(manifest_fps) {
                Ok(fps) => each(id, fps),
                Err(e) => unreadable(id, e),
            }
        })
    }

    /// The JSON of version `id`, stored as `m`, and its depth; its bases read from the index.
    fn decode(&self, id: i64, m: &StoredManifest) -> StoreResult<Decoded> {
        Ok(self
            .links(id, m)?
            .and_then(|links| Self::decode_links(id, links)))
    }

    /// The rows from version `id` (stored as `m`, first) down to a standalone frame, read
    /// before anything is decoded: the depth is the number of rows less one.
    fn links(
        &self,
        id: i64,
        m: &StoredManifest,
    ) -> StoreResult<Result<Vec<(i64, StoredManifest)>, BlobError>> {
        let mut links = vec![(id, m.clone())];
        while let Some(b) = links.last().and_then(|(_, m)| m.base) {
            let at = links.last().map_or(id, |l| l.0);
            if links.len() > MAX_DEPTH {
                return Ok(Err(BlobError::Chain(format!(
                    "version {id}'s chain of bases is longer than {MAX_DEPTH}"
                ))));
            }
            if b >= at {
                return Ok(Err(BlobError::Chain(format!(
                    "version {at} names base {b}, which is not older"
                ))));
            }
            let Some(next) = self.ix.stored_manifest(self.repo_id, b)? else {
                return Ok(Err(BlobError::Chain(format!(
                    "version {at} names base {b}, which is gone"
                ))));
            };
            links.push((b, next));
        }
        Ok(Ok(links))
    }

    /// The JSON of version `id` from its [`Self::links`], standalone frame first.
    fn decode_links(id: i64, mut links: Vec<(i64, StoredManifest)>) -> Decoded {
        let depth = links.len() - 1;
        let mut json: Option<Vec<u8>> = None;
        while let Some((v, m)) = links.pop() {
            json = Some(
                manifest_blob::decode(&m.blob, json.as_deref())
                    .map_err(|e| Self::named(v, id, e))?,
            );
        }
        Ok((json.unwrap_or_default(), depth))
    }

    /// Version `id`, stored as `m` against version `b`, whose decoding gave `base`.
    fn on_base(
        &self,
        id: i64,
        m: &StoredManifest,
        b: i64,
        base: Result<&(Vec<u8>, usize), BlobError>,
    ) -> Decoded {
        let (json, depth) = base.map_err(|e| Self::named(b, id, e))?;
        if b >= id {
            return Err(BlobError::Chain(format!(
                "version {id} names base {b}, which is not older"
            )));
        }
        if depth + 1 > MAX_DEPTH {
            return Err(BlobError::Chain(format!(
                "version {id}'s chain of bases is longer than {MAX_DEPTH}"
            )));
        }
        Ok((manifest_blob::decode(&m.blob, Some(json))?, depth + 1))
    }

    /// Error `e` of link `v` on the chain of version `id`, as `id`'s reader sees it.
    fn named(v: i64, id: i64, e: BlobError) -> BlobError {
        match e {
            BlobError::Chain(_) => e,
            e if v == id => e,
            e => BlobError::Chain(format!("base version {v} is unreadable: {e}")),
        }
    }

    /// The JSON of version `id`, stored as `m`.
    pub fn one(&self, id: i64, m: &StoredManifest) -> StoreResult<Vec<u8>> {
        self.decode(id, m)?
            .map(|(json, _)| json)
            .map_err(|e| StoreError::Internal(format!("version {id}: {e}")))
    }

    /// The JSON of version `id` as the base of a new version's manifest: none if the
    /// repository lacks the version, its manifest cannot be read, or one stored against it
    /// would be deeper than [`MAX_DEPTH`] (known before anything is decoded).
    fn as_base(&self, id: i64) -> StoreResult<Option<Vec<u8>>> {
        let Some(m) = self.ix.stored_manifest(self.repo_id, id)? else {
            return Ok(None);
        };
        let Ok(links) = self.links(id, &m)? else {
            return Ok(None);
        };
        if links.len() > MAX_DEPTH {
            return Ok(None);
        }
        Ok(Self::decode_links(id, links).ok().map(|(json, _)| json))
    }
}

/// Deletes versions `ids` of the repository in transaction `tx`, first storing standalone the
/// manifests of the versions that stay and are stored against one of them (their chains
/// still whole in the transaction), so that no row names a deleted base. A dependent whose
/// manifest cannot be read keeps its row as it is (`check` names it either way).
pub fn delete_versions(tx: &dyn IndexWrite, repo_id: i64, ids: &[i64]) -> StoreResult<()> {
    let gone: HashSet<i64> = ids.iter().copied().collect();
    let chains = ManifestChains::new(tx, repo_id);
    for id in tx.manifest_dependents(repo_id, ids)? {
        if gone.contains(&id) {
            continue;
        }
        let Some(m) = tx.stored_manifest(repo_id, id)? else {
            continue;
        };
        let Ok((json, _)) = chains.decode(id, &m)? else {
            continue;
        };
        let blob = manifest_blob::encode(&json, None)
            .map_err(|e| StoreError::Internal(format!("version {id}: {e}")))?;
        tx.set_manifest(repo_id, id, &StoredManifest { base: None, blob })?;
    }
    tx.delete_versions(repo_id, ids)
}

/// The stored form of a new version's manifest `json` of source `source`: against the
/// JSON of the source's newest version when that is smaller, the chain stays within
/// [`MAX_DEPTH`] and the JSON within [`manifest_blob::MAX_BASED_JSON`]; standalone
/// otherwise. The standalone form is returned beside a based one, for a base deleted
/// before the commit's transaction.
fn encode_new(
    ix: &dyn IndexRead,
    repo_id: i64,
    source: &str,
    json: &[u8],
) -> StoreResult<(StoredManifest, Option<StoredManifest>)> {
    let bad = |e: BlobError| StoreError::Internal(e.to_string());
    let alone = StoredManifest {
        base: None,
        blob: manifest_blob::encode(json, None).map_err(bad)?,
    };
    let newest = ix
        .version_metas(repo_id)?
        .into_iter()
        .rev()
        .find(|v| v.source == source);
    let Some(prev) = newest.filter(|_| json.len() <= manifest_blob::MAX_BASED_JSON) else {
        return Ok((alone, None));
    };
    // A base that cannot be read is no base: the new version stands alone.
    let Some(base) = ManifestChains::new(ix, repo_id).as_base(prev.id)? else {
        return Ok((alone, None));
    };
    let against = manifest_blob::encode(json, Some(&base)).map_err(bad)?;
    if against.len() >= alone.blob.len() {
        return Ok((alone, None));
    }
    let against = StoredManifest {
        base: Some(prev.id),
        blob: against,
    };
    Ok((against, Some(alone)))
}

impl Store {
    /// Commits a version whose manifest was parsed and validated; recipes as binary fps.
    /// `token_id` names the token that commits (docs/API.md: a backup token reads only the
    /// versions it committed).
    pub fn commit_version(
        &self,
        repo_id: i64,
        manifest: &Manifest,
        recipes: &[Vec<Fingerprint>],
        token_id: &str,
    ) -> StoreResult<Value> {
        let mut stats = VersionStats::default();
        for e in &manifest.entries {
            match e.kind {
                EntryKind::File => {
                    stats.files += 1;
                    stats.logical_bytes = stats.logical_bytes.saturating_add(e.size);
                }
                EntryKind::Dir => stats.dirs += 1,
                EntryKind::Symlink => stats.symlinks += 1,
            }
        }
        stats.skipped_files = manifest.skipped.len() as u64;
        self.backup_activity();
        let json = serde_json::to_vec(manifest).map_err(|e| StoreError::Internal(e.to_string()))?;
        let (stored, standalone) =
            encode_new(&*self.snapshot()?, repo_id, &manifest.source, &json)?;
        drop(json);

        let mut w = self.writer_for_write()?;
        let tx = w.begin(repo_id)?;
        // The base was read before the writer lock: if it has been deleted since, the
        // manifest stands alone.
        let stored = match (stored.base, standalone) {
            (Some(b), Some(alone)) if tx.stored_manifest(repo_id, b)?.is_none() => alone,
            _ => stored,
        };
        // Distinct fps in first-reference order, with what the index knows of them.
        let mut info: HashMap<Fingerprint, Option<CommitChunk>> = HashMap::new();
        let mut order: Vec<Fingerprint> = Vec::new();
        for fp in recipes.iter().flatten() {
            stats.chunk_refs += 1;
            if info.contains_key(fp) {
                continue;
            }
            info.insert(*fp, tx.commit_chunk(repo_id, fp)?);
            order.push(*fp);
        }
        let missing: Vec<Fingerprint> = order
            .iter()
            .filter(|fp| info[*fp].is_none())
            .copied()
            .collect();
        if !missing.is_empty() {
            return Err(StoreError::MissingChunks(missing));
        }
        for (e, recipe) in manifest.entries.iter().zip(recipes) {
            let sum: u64 = recipe
                .iter()
                .map(|fp| info[fp].unwrap().raw_len as u64)
                .sum();
            if sum != e.size {
                return Err(StoreError::SizeMismatch {
                    path: e.path.clone(),
                    size: e.size,
                    sum,
                });
            }
        }
        stats.unique_chunks = order.len() as u64;
        let mut containers: HashSet<i64> = HashSet::new();
        let mut first: Vec<Fingerprint> = Vec::new();
        for fp in &order {
            let c = info[fp].unwrap();
            containers.insert(c.container_id);
            if c.uncommitted {
                stats.new_chunks += 1;
                stats.new_raw_bytes += c.raw_len as u64;
                stats.new_stored_bytes += c.stored_len as u64;
                first.push(*fp);
            }
        }
        stats.dedup_ratio = ratio(stats.logical_bytes, stats.new_stored_bytes);
        let committed = now_ms();
        // The version list is read from rows alone, without the manifests: the row's stats
        // JSON carries the picked folder's name too (the API lifts it out of `stats`).
        let mut row_stats =
            serde_json::to_value(&stats).map_err(|e| StoreError::Internal(e.to_string()))?;
        if let Some(f) = &manifest.folder {
            row_stats["folder"] = json!(f);
        }
        let stats_json = row_stats.to_string();
        let vid = tx.insert_version(&NewVersion {
            repo_id,
            source: &manifest.source,
            time: manifest.time,
            committed_ms: committed as i64,
            stats: &stats_json,
            manifest: &stored,
            token_id,
        })?;
        tx.mark_first_version(repo_id, vid, &first)?;
        let container_ids: Vec<i64> = containers.iter().copied().collect();
        tx.set_newest_version(vid, &container_ids)?;
        // With the HiDeStore layout, the next version's new chunks start a container of
        // their own, and the mover may evacuate this one (docs/STORAGE.md).
        let layout = layout_enabled();
        if layout {
            tx.seal_active(repo_id)?;
        }
        tx.commit()?;
        if layout {
            w.open.remove(&repo_id);
        }
        drop(w);
        // The header copy of "newest version" is a hint; the index is authoritative.
        for cid in containers {
            self.containers
                .hint_newest_version(repo_id, cid as u64, vid);
        }
        let mut out = json!({
            "id": vid,
            "source": manifest.source,
            "time": manifest.time,
            "committed_at": committed,
            "stats": stats,
        });
        if let Some(f) = &manifest.folder {
            out["folder"] = json!(f);
        }
        Ok(out)
    }

    /// The repository's versions in id order; only those committed by token `own` if given.
    pub fn list_versions(&self, repo_id: i64, own: Option<&str>) -> StoreResult<Vec<VersionRow>> {
        self.index()?.versions(repo_id, own)
    }

    /// Version `id` of the repository.
    pub fn version(&self, repo_id: i64, id: i64) -> StoreResult<VersionRecord> {
        self.index()?
            .version(repo_id, id)?
            .ok_or_else(|| StoreError::NotFound(format!("no version {id} in this repository")))
    }

    /// The manifest JSON of version `v` of the repository.
    pub fn manifest_json(&self, repo_id: i64, v: &VersionRecord) -> StoreResult<Vec<u8>> {
        ManifestChains::new(&*self.snapshot()?, repo_id).one(v.row.id, &v.manifest)
    }
}

/// The error of a walk over manifests that meets one it cannot read.
pub fn unreadable_manifest(id: i64, why: &str) -> StoreError {
    StoreError::Internal(format!("version {id}: unreadable manifest: {why}"))
}
