//! Super-features: a sketch of a chunk such that similar chunks probably share part of it
//! (DARE §3.3, "Improved Super-Feature Approach").
//!
//! A rolling hash is taken at every byte of the chunk. Feature `i` is the largest value of a
//! fixed bijective transform `t_i(h) = m_i * h + a_i (mod 2^32)` over all positions: a min-hash
//! (max-hash here) under the permutation `t_i`, so two chunks agree on feature `i` with
//! probability close to their resemblance (Broder), because the position that maximises `t_i`
//! is a random one and survives an edit elsewhere. Features are grouped `n` at a time into
//! super-features; two chunks are taken as similar when any super-feature matches.
//!
//! §3.3 argues, and measures, that few features per super-feature and several super-features
//! detect more: a super-feature of `n` features matches with probability `r^n` for
//! resemblance `r`, and `m` super-features give `m` chances. The paper's choice is 3
//! super-features of 2 features ([`Params::DARE`]); docs/BENCHMARKS.md ("Resemblance and delta
//! (probe)") has the configurations measured on our data, and [`Params::DITTO`] the choice.
//!
//! Computing every transform at every byte is the cost of the method. Ours may run them at a
//! content-defined sample of the positions only (those whose hash has its top bits zero): two
//! similar chunks sample the same positions in their shared parts, so the maxima over the
//! sample are still min-hashes of their shared content, at a fraction of the work. A chunk
//! too short to hold a sampled position has all features 0, like the empty chunk; such
//! chunks match each other, and the delta they then try simply does not pay.
//!
//! The paper computes features from Rabin fingerprints; we use a Gear hash
//! (`h = 2h + G[byte]`, 32 bits, so each value covers the last 32 bytes), the hash of our
//! chunkers: one shift and one add per byte instead of a table-driven Rabin window, and just
//! as content-defined. Its table is our own (not the chunkers'), so features do not correlate
//! with the chunkers' cut conditions. The transforms run in [`LANES`] independent lanes, a
//! fixed-width loop the compiler may vectorise.
//!
//! [`SuperFeatureIndex`] is the in-memory index of §3.1's "SFeature hash table", bounded: it
//! holds at most a fixed number of chunks and forgets the oldest first.

use std::collections::{HashMap, VecDeque};

/// Features computed per chunk (the widest configuration supported).
pub const LANES: usize = 8;

/// Number of super-features and features per super-feature.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Params {
    /// Super-features per chunk (`m` in §3.3).
    pub super_features: usize,
    /// Features per super-feature (`n` in §3.3).
    pub features_per_sf: usize,
    /// Positions sampled: the transforms run only where the top `sample_bits` bits of the
    /// rolling hash are zero (0: at every position, as in the paper). Which positions are
    /// sampled depends on content only, so similar chunks sample the same positions.
    pub sample_bits: u32,
}

impl Params {
    /// DARE's choice (§3.3): 3 super-features of 2 features.
    pub const DARE: Params = Params {
        super_features: 3,
        features_per_sf: 2,
        sample_bits: 0,
    };

    /// Ditto's choice: DARE's 3 x 2, with the transforms run at one position in 64. On
    /// typescript-10 it finds the same bases as every position at several times the speed
    /// (docs/BENCHMARKS.md, "Resemblance and delta (probe)").
    pub const DITTO: Params = Params {
        super_features: 3,
        features_per_sf: 2,
        sample_bits: 6,
    };

    /// Checks `m * n <= LANES` and both non-zero.
    pub fn valid(&self) -> bool {
        self.super_features > 0
            && self.features_per_sf > 0
            && self.super_features * self.features_per_sf <= LANES
            && self.sample_bits < 16
    }
}

impl Default for Params {
    fn default() -> Self {
        Params::DITTO
    }
}

/// splitmix64 step: a fixed, well-mixed source of constants at compile time.
const fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

const fn gear_table() -> [u32; 256] {
    let mut t = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = mix(0x5f37_a1d2_0000_0000 ^ i as u64) as u32;
        i += 1;
    }
    t
}

const fn transforms() -> ([u32; LANES], [u32; LANES]) {
    let mut m = [0u32; LANES];
    let mut a = [0u32; LANES];
    let mut i = 0;
    while i < LANES {
        // Odd multipliers make each transform a bijection of the 32-bit hash values.
        m[i] = (mix(0xd1b5_4a32_0000_0000 ^ i as u64) as u32) | 1;
        a[i] = mix(0x2545_f491_0000_0000 ^ i as u64) as u32;
        i += 1;
    }
    (m, a)
}

static GEAR: [u32; 256] = gear_table();
static TRANSFORMS: ([u32; LANES], [u32; LANES]) = transforms();

/// The [`LANES`] features of a chunk (`max_j t_i(h_j)` for each lane `i`, over the positions
/// `j` sampled with `sample_bits`, see [`Params`]). A chunk with no sampled position has all
/// features 0.
pub fn features(chunk: &[u8], sample_bits: u32) -> [u32; LANES] {
    let (m, a) = &TRANSFORMS;
    let mut best = [0u32; LANES];
    let mut h: u32 = 0;
    if sample_bits == 0 {
        for &b in chunk {
            h = (h << 1).wrapping_add(GEAR[b as usize]);
            for i in 0..LANES {
                best[i] = best[i].max(m[i].wrapping_mul(h).wrapping_add(a[i]));
            }
        }
    } else {
        let shift = 32 - sample_bits;
        for &b in chunk {
            h = (h << 1).wrapping_add(GEAR[b as usize]);
            if h >> shift == 0 {
                for i in 0..LANES {
                    best[i] = best[i].max(m[i].wrapping_mul(h).wrapping_add(a[i]));
                }
            }
        }
    }
    best
}

/// A super-feature: the features of one group, combined, tagged with its group number (so
/// equal values of different groups never match).
pub type SuperFeature = u64;

/// The super-features of a chunk under `p` (`p.super_features` of them).
pub fn super_features(chunk: &[u8], p: Params) -> Vec<SuperFeature> {
    group(&features(chunk, p.sample_bits), p)
}

/// Groups features into super-features. Each super-feature hashes its group's features
/// together with the group number into 64 bits.
pub fn group(f: &[u32; LANES], p: Params) -> Vec<SuperFeature> {
    assert!(p.valid(), "invalid super-feature parameters {p:?}");
    (0..p.super_features)
        .map(|g| {
            let mut acc = mix(g as u64);
            for &x in &f[g * p.features_per_sf..(g + 1) * p.features_per_sf] {
                acc = mix(acc ^ x as u64);
            }
            acc
        })
        .collect()
}

/// The bounded super-feature index: super-feature -> chunk id, for at most `capacity` chunks;
/// the oldest chunk is forgotten first (recent versions are the likeliest bases).
pub struct SuperFeatureIndex {
    params: Params,
    capacity: usize,
    /// One map per super-feature group; a newer chunk replaces an older one on equal keys.
    tables: Vec<HashMap<SuperFeature, u32>>,
    /// Insertion order, for eviction: (chunk id, its super-features).
    order: VecDeque<(u32, Vec<SuperFeature>)>,
}

impl SuperFeatureIndex {
    pub fn new(params: Params, capacity: usize) -> Self {
        assert!(
            params.valid(),
            "invalid super-feature parameters {params:?}"
        );
        SuperFeatureIndex {
            params,
            capacity: capacity.max(1),
            tables: (0..params.super_features).map(|_| HashMap::new()).collect(),
            order: VecDeque::new(),
        }
    }

    pub fn params(&self) -> Params {
        self.params
    }

    /// Chunks held.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// Adds chunk `id` under its super-features `sfs` (from [`super_features`] with this
    /// index's parameters), evicting the oldest chunk when full.
    pub fn insert(&mut self, id: u32, sfs: Vec<SuperFeature>) {
        debug_assert_eq!(sfs.len(), self.params.super_features);
        if self.order.len() == self.capacity {
            if let Some((old, old_sfs)) = self.order.pop_front() {
                for (t, sf) in self.tables.iter_mut().zip(&old_sfs) {
                    if t.get(sf) == Some(&old) {
                        t.remove(sf);
                    }
                }
            }
        }
        for (t, &sf) in self.tables.iter_mut().zip(&sfs) {
            t.insert(sf, id);
        }
        self.order.push_back((id, sfs));
    }

    /// The best base for a chunk with super-features `sfs`: the chunk matching the most
    /// super-features, the most recently inserted among equals (ids grow with time).
    /// `eligible` filters candidates (e.g. by chain depth).
    pub fn lookup(
        &self,
        sfs: &[SuperFeature],
        mut eligible: impl FnMut(u32) -> bool,
    ) -> Option<u32> {
        let mut found: Vec<(u32, usize)> = Vec::with_capacity(sfs.len());
        for (t, sf) in self.tables.iter().zip(sfs) {
            if let Some(&id) = t.get(sf) {
                match found.iter_mut().find(|(c, _)| *c == id) {
                    Some((_, n)) => *n += 1,
                    None => found.push((id, 1)),
                }
            }
        }
        found
            .into_iter()
            .filter(|&(id, _)| eligible(id))
            .max_by_key(|&(id, n)| (n, id))
            .map(|(id, _)| id)
    }

    /// Heap bytes the index holds (tables at their allocated capacity plus the eviction
    /// queue), an estimate of its memory.
    pub fn memory_bytes(&self) -> usize {
        let entry = std::mem::size_of::<(SuperFeature, u32)>() + 1;
        let tables: usize = self.tables.iter().map(|t| t.capacity() * entry).sum();
        let queue = self.order.capacity() * std::mem::size_of::<(u32, Vec<SuperFeature>)>()
            + self.order.len() * self.params.super_features * std::mem::size_of::<SuperFeature>();
        tables + queue
    }
}
