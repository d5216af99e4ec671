//! Where the chunks of one version are: what a restore plans from, without the chunk table
//! of the whole repository (docs/API.md, `GET versions/{id}/locations`).

use wasm_core::{
    format::{
        locations::{chain_key_number, encode_locations, Location},
        manifest::Manifest,
        parse_fp_hex,
    },
    hash::Fingerprint,
    resemble::delta::{CODEC_DELTA, MAX_CHAIN_DEPTH},
};

use super::{
    chunks::{ChunkLoc, FpMap, FpSet},
    Store, StoreError, StoreResult,
};

/// Fingerprints asked of the index at once (one statement or round trip each).
const BATCH: usize = 4096;

/// The located chunks of a version, and how many of its distinct chunks are not stored.
pub struct VersionLocations {
    /// Each chunk, where it is, and the link that names its chain key ([`chain_keys`]).
    pub chunks: Vec<(Fingerprint, ChunkLoc, Fingerprint)>,
    pub not_stored: u32,
}

/// A link that more than `1 / SHARED_LINK` of a version's chunks decode through is shared:
/// it does not name their chain key.
pub const SHARED_LINK: usize = 8;

impl VersionLocations {
    /// The binary answer (docs/FORMAT.md, "Version locations").
    pub fn encode(&self) -> Vec<u8> {
        encode_locations(
            self.chunks.iter().map(|(fp, l, key)| Location {
                fp: *fp,
                container: l.container_id,
                offset: l.offset,
                stored_len: l.stored_len,
                raw_len: l.raw_len,
                codec: l.codec,
                chain_key: chain_key_number(key),
            }),
            self.not_stored,
        )
    }
}

impl Store {
    /// Where each distinct chunk of version `id` is, in the order of first reference (entries
    /// in manifest order, each recipe in order), with its chain key ([`chain_keys`]). Chunks that
    /// are not stored (damaged and quarantined, or lost) are left out and counted.
    pub fn version_locations(&self, repo_id: i64, id: i64) -> StoreResult<VersionLocations> {
        let v = self.version(repo_id, id)?;
        let json = self.manifest_json(repo_id, &v)?;
        let m: Manifest = serde_json::from_slice(&json)
            .map_err(|e| StoreError::Internal(format!("stored manifest of version {id}: {e}")))?;
        let mut seen = FpSet::default();
        let mut fps = Vec::new();
        for e in &m.entries {
            for h in &e.recipe {
                let fp = parse_fp_hex(h).ok_or_else(|| {
                    StoreError::Internal(format!("bad fingerprint in version {id}'s manifest"))
                })?;
                if seen.insert(fp) {
                    fps.push(fp);
                }
            }
        }
        drop(seen);
        // One read transaction: SQLite locks once, not once per statement.
        let ix = self.snapshot()?;
        let mut chunks = Vec::with_capacity(fps.len());
        let mut not_stored = 0u32;
        // Each delta's chain, walked level by level through the `base` rows (the bases need
        // not be chunks of this version): the first links come with the chunks' own rows.
        // The walk stops at the stored chains' cap, which also ends a loop of deltas in a
        // damaged index.
        let mut base: FpMap<Fingerprint> = FpMap::default();
        let mut first = Vec::new();
        for batch in fps.chunks(BATCH) {
            for (fp, found) in batch
                .iter()
                .zip(ix.chunk_locations_with_bases(repo_id, batch)?)
            {
                match found {
                    Some((l, b)) => {
                        chunks.push((*fp, l, *fp));
                        if l.codec == CODEC_DELTA {
                            first.push((*fp, b));
                        }
                    }
                    None => not_stored += 1,
                }
            }
        }
        let mut asked: FpSet = first.iter().map(|(fp, _)| *fp).collect();
        let mut frontier = Vec::new();
        for (fp, b) in first {
            if let Some(b) = b {
                base.insert(fp, b);
                if asked.insert(b) {
                    frontier.push(b);
                }
            }
        }
        for _ in 1..MAX_CHAIN_DEPTH {
            if frontier.is_empty() {
                break;
            }
            let mut next = Vec::new();
            for batch in frontier.chunks(BATCH) {
                for (fp, b) in batch.iter().zip(ix.delta_bases(repo_id, batch)?) {
                    if let Some(b) = b {
                        base.insert(*fp, b);
                        if asked.insert(b) {
                            next.push(b);
                        }
                    }
                }
            }
            frontier = next;
        }
        let keys = chain_keys(chunks.iter().map(|(fp, _, _)| *fp), &base);
        for ((_, _, key), k) in chunks.iter_mut().zip(keys) {
            *key = k;
        }
        Ok(VersionLocations { chunks, not_stored })
    }
}

/// The chain key of each of `chunks` (a version's distinct chunks), given each delta's
/// `base`: the deepest link of the chunk's base chain that at most `1 / SHARED_LINK` of the
/// chunks decode through, the chunk itself when its base is shared more widely or it has
/// none (docs/API.md). Chunks with the same key decode through the same links apart from
/// the shared ones, so a client verifying on several workers keeps a key on one worker and
/// each of those links is fetched and decoded once; a shared link (a base that most of a
/// version decodes through, such as a large frame near the root of every chain) is decoded
/// once by each worker instead of tying most of the version to one of them.
pub(super) fn chain_keys(
    chunks: impl Iterator<Item = Fingerprint> + Clone,
    base: &FpMap<Fingerprint>,
) -> Vec<Fingerprint> {
    let chain = |fp: Fingerprint| {
        std::iter::successors(base.get(&fp).copied(), |l| base.get(l).copied())
            .take(MAX_CHAIN_DEPTH)
    };
    let mut through: FpMap<usize> = FpMap::default();
    let mut n = 0;
    for fp in chunks.clone() {
        n += 1;
        for l in chain(fp) {
            *through.entry(l).or_default() += 1;
        }
    }
    chunks
        .map(|fp| {
            chain(fp)
                .take_while(|l| through[l] * SHARED_LINK <= n)
                .last()
                .unwrap_or(fp)
        })
        .collect()
}
