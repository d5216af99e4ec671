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

//! The policy the delta pass follows (measured choices in docs/BENCHMARKS.md, "Resemblance and
//! delta (probe)"):
//! - a DupAdj pair is kept only if its delta is at most [`DUPADJ_MAX_RATIO`] of the chunk's own
//!   zstd size, else the chunk goes on to the super-features: §3.2 ends a walk at a dissimilar
//!   pair, and a neighbour that drifted out of alignment after an insertion often still beats
//!   zstd by a little while a better base exists elsewhere;
//! - a candidate base already at the depth cap is replaced by its nearest ancestor below the
//!   cap (its ancestors resemble it, so they likely resemble the chunk too);
//! - chains are capped at [`delta::MAX_CHAIN_DEPTH`] links, and only chunks below the cap
//!   enter the super-feature index ([`superfeature::Params::DITTO`] parameters);
//! - any delta is kept only if it is smaller than the chunk's own zstd encoding.
//!
//! Beyond DARE, the pass then stores a version's new chunks together in [`frame`]s, each
//! compressed against one older frame, each member a slice of its frame.

/// Largest delta size, as a fraction of the chunk's own zstd size, at which the delta pass
/// accepts a DupAdj pair (see the policy above).
pub const DUPADJ_MAX_RATIO: f64 = 0.5;

pub mod delta;
pub mod dupadj;
pub mod frame;
pub mod range;
pub mod superfeature;
#[cfg(test)]
pub(crate) mod testdata;
