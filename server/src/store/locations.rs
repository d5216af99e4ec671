//! Where the chunks of one version are: what a restore plans from, without the chunk table
//! of the whole repository (docs/API.md, `GET versions/{id}/locations`).

use std::collections::{HashMap, HashSet};

use wasm_core::{
    format::{manifest::Manifest, parse_fp_hex},
    hash::Fingerprint,
    resemble::delta::{CODEC_DELTA, MAX_CHAIN_DEPTH},
};

use super::{chunks::ChunkLoc, Store, StoreError, StoreResult};

/// Fingerprints asked of the index at once (one statement or round trip each).
const BATCH: usize = 4096;

/// The located chunks of a version, and how many of its distinct chunks are not stored.
pub struct VersionLocations {
    /// Each chunk, where it is, and the root of its chain (the chunk itself unless it is a
    /// delta).
    pub chunks: Vec<(Fingerprint, ChunkLoc, Fingerprint)>,
    pub not_stored: u32,
}

/// Bytes of the encoding's header and of each record (docs/API.md).
pub const HEADER_LEN: usize = 16;
pub const RECORD_LEN: usize = 48;
pub const MAGIC: &[u8; 4] = b"DLOC";
pub const FORMAT: u32 = 2;
/// Bytes of a chain root's fingerprint a record carries (its chain key).
pub const CHAIN_KEY_LEN: usize = 3;

impl VersionLocations {
    /// The binary answer: a 16-byte header, then one 48-byte little-endian record per chunk.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_LEN + self.chunks.len() * RECORD_LEN);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&FORMAT.to_le_bytes());
        out.extend_from_slice(&(self.chunks.len() as u32).to_le_bytes());
        out.extend_from_slice(&self.not_stored.to_le_bytes());
        for (fp, l, root) in &self.chunks {
            out.extend_from_slice(fp);
            out.extend_from_slice(&l.container_id.to_le_bytes());
            out.extend_from_slice(&l.offset.to_le_bytes());
            out.extend_from_slice(&l.stored_len.to_le_bytes());
            out.extend_from_slice(&l.raw_len.to_le_bytes());
            out.push(l.codec);
            out.extend_from_slice(&root[..CHAIN_KEY_LEN]);
        }
        out
    }
}

impl Store {
    /// Where each distinct chunk of version `id` is, in the order of first reference (entries
    /// in manifest order, each recipe in order), with the root of its base chain. Chunks that
    /// are not stored (damaged and quarantined, or lost) are left out and counted.
    pub fn version_locations(&self, repo_id: i64, id: i64) -> StoreResult<VersionLocations> {
        let v = self.version(repo_id, id)?;
        let json = self.manifest_json(repo_id, &v)?;
        let m: Manifest = serde_json::from_slice(&json)
            .map_err(|e| StoreError::Internal(format!("stored manifest of version {id}: {e}")))?;
        let mut seen = HashSet::new();
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
        for batch in fps.chunks(BATCH) {
            for (fp, loc) in batch.iter().zip(ix.chunk_locations(repo_id, batch)?) {
                match loc {
                    Some(l) => chunks.push((*fp, l, *fp)),
                    None => not_stored += 1,
                }
            }
        }
        // Each delta's chain, walked level by level through the `base` rows (the bases need
        // not be chunks of this version): a delta's root is the first link that is not a
        // delta. The walk stops at the stored chains' cap, which also ends a loop of deltas
        // in a damaged index.
        let mut base: HashMap<Fingerprint, Fingerprint> = HashMap::new();
        let mut frontier: Vec<Fingerprint> = chunks
            .iter()
            .filter(|(_, l, _)| l.codec == CODEC_DELTA)
            .map(|(fp, _, _)| *fp)
            .collect();
        let mut asked: HashSet<Fingerprint> = frontier.iter().copied().collect();
        for _ in 0..MAX_CHAIN_DEPTH {
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
            if frontier.is_empty() {
                break;
            }
        }
        for (_, _, root) in &mut chunks {
            for _ in 0..=MAX_CHAIN_DEPTH {
                match base.get(root) {
                    Some(b) => *root = *b,
                    None => break,
                }
            }
        }
        Ok(VersionLocations { chunks, not_stored })
    }
}
