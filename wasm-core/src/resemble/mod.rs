//! Resemblance detection and delta chunks, after DARE (Xia et al., "DARE: A
//! Deduplication-Aware Resemblance Detection and Elimination Scheme for Data Reduction with
//! Low Overheads", IEEE Transactions on Computers, 2016, §3).
//!
//! Deduplication stores a chunk once, but a chunk that differs from a stored one by a few
//! bytes is stored whole. DARE finds, for each chunk stored for the first time, a stored chunk
//! that resembles it and keeps only a delta against that base (§3.1). It looks in two ways,
//! cheapest first:
//! - [`dupadj`] (§3.2): next to a duplicate, the new stream and the old one are aligned, so the
//!   neighbours of a duplicate pair up. Only recipes are needed.
//! - [`superfeature`] (§3.3): for the chunks DupAdj leaves, a small sketch of features, looked
//!   up in a bounded index of the stored chunks' sketches.
//!
//! A candidate is kept when its delta ([`delta`], codec 2 of docs/FORMAT.md, §3.4) is smaller
//! than the chunk's own zstd encoding; otherwise the chunk stays codec 0 or 1 and its
//! super-features enter the index.
//!
//! Where each piece runs: the browser uploads new chunks deduplicated and compressed (codec
//! 0/1) and never makes deltas, because it does not hold the bases' bytes. The server runs the
//! detection and the encoder natively, as a pass after each version commit, over the chunks
//! that version stored (issue 17). Everything that reads chunks, the browser's restore and
//! search included, only decodes: [`delta::DeltaDecoder`] and [`delta::decode_chain`] build for
//! wasm32 like the rest of the engine.

pub mod delta;
pub mod dupadj;
pub mod superfeature;
