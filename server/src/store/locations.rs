//! Where the chunks of one version are: what a restore plans from, without the chunk table
//! of the whole repository (docs/API.md, `GET versions/{id}/locations`).

use std::collections::HashSet;

use wasm_core::{
    format::{manifest::Manifest, parse_fp_hex},
    hash::Fingerprint,
};

use super::{chunks::ChunkLoc, Store, StoreError, StoreResult};

/// Fingerprints asked of the index at once (one statement or round trip each).
const BATCH: usize = 4096;

/// The located chunks of a version, and how many of its distinct chunks are not stored.
pub struct VersionLocations {
    pub chunks: Vec<(Fingerprint, ChunkLoc)>,
    pub not_stored: u32,
}

/// Bytes of the encoding's header and of each record (docs/API.md).
pub const HEADER_LEN: usize = 16;
pub const RECORD_LEN: usize = 48;
pub const MAGIC: &[u8; 4] = b"DLOC";
pub const FORMAT: u32 = 1;

impl VersionLocations {
    /// The binary answer: a 16-byte header, then one 48-byte little-endian record per chunk.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_LEN + self.chunks.len() * RECORD_LEN);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&FORMAT.to_le_bytes());
        out.extend_from_slice(&(self.chunks.len() as u32).to_le_bytes());
        out.extend_from_slice(&self.not_stored.to_le_bytes());
        for (fp, l) in &self.chunks {
            out.extend_from_slice(fp);
            out.extend_from_slice(&l.container_id.to_le_bytes());
            out.extend_from_slice(&l.offset.to_le_bytes());
            out.extend_from_slice(&l.stored_len.to_le_bytes());
            out.extend_from_slice(&l.raw_len.to_le_bytes());
            out.extend_from_slice(&[l.codec, 0, 0, 0]);
        }
        out
    }
}

impl Store {
    /// Where each distinct chunk of version `id` is, in the order of first reference (entries
    /// in manifest order, each recipe in order). Chunks that are not stored (damaged and
    /// quarantined, or lost) are left out and counted.
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
                    Some(l) => chunks.push((*fp, l)),
                    None => not_stored += 1,
                }
            }
        }
        Ok(VersionLocations { chunks, not_stored })
    }
}
