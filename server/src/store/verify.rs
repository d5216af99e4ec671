//! Verifying stored chunks: every read the server answers, `check`, and the verify endpoint
//! decode a chunk's stored bytes and compare their fingerprint with the one it is stored
//! under, so a damaged copy is found (and quarantined) instead of served.

use std::{
    collections::{HashMap, VecDeque},
    sync::{Arc, Mutex},
};

use wasm_core::{
    compress::{self, CODEC_RAW},
    hash::{fingerprint, is_stored_chunk, to_hex, Fingerprint},
    resemble::delta::{
        base_of, decode_chain_each, DeltaDecoder, Stored, CODEC_DELTA, MAX_CHAIN_DEPTH,
    },
};

use super::{
    backend::ContainerBackend,
    chunks::decode_stored,
    index::{chunks::ChunkLoc, IndexRead},
    quarantine::Found,
    StoreError, StoreResult,
};

/// How a chunk's bytes are compared with the fingerprint it is stored under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// A read (an answer, a move, a copy compared with an upload): plain SHA-1 first, the
    /// fingerprint only where that differs ([`wasm_core::hash::is_stored_chunk`]: exact for
    /// the name of a stored chunk).
    Read,
    /// `check` and the verify endpoint: the fingerprint itself, which also proves again that
    /// every stored chunk is stored under its fingerprint.
    Fingerprint,
}

/// Where the bases of delta chunks (codec 2, docs/FORMAT.md) are read from: the
/// repository's index and containers. A base may sit in any container of the repository,
/// so a delta is decoded by following its chain through the index (at most
/// [`wasm_core::resemble::delta::MAX_CHAIN_DEPTH`] links, each link verified).
pub struct Bases<'a> {
    pub backend: &'a dyn ContainerBackend,
    /// `None` where no delta chunk is expected (a delta then fails to decode).
    pub ix: Option<&'a dyn IndexRead>,
    pub repo_id: i64,
    /// Decoded bases kept between reads (the store's for its reads, `check`'s and the verify
    /// endpoint's for one run); `None` reads every base from its container.
    pub cache: Option<&'a BaseCache>,
    /// Where a base is now, read past `ix` when that is a snapshot that may predate a move:
    /// the mover or compaction may re-point a base and delete its old container while a
    /// read decodes through it. `None` looks again in `ix`.
    pub relocate: Option<&'a Relocate<'a>>,
    /// A base that could not be read for the server's own reasons (an index or I/O error,
    /// not a missing or short container): the verification that needed it failed without
    /// saying anything of the bytes, so what failed it must not be quarantined.
    pub trouble: Trouble,
}

/// The first index or I/O error a [`Bases`] met while it read a base.
#[derive(Debug, Default)]
pub struct Trouble(Mutex<Option<StoreError>>);

impl Trouble {
    /// Keeps `e` (the first one) and answers its message, for the verification's `Err`.
    fn note(&self, e: StoreError) -> String {
        let message = format!("reading a base failed: {e}");
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_or_insert(e);
        message
    }

    /// The error kept, if any, taken out.
    pub fn take(&self) -> Option<StoreError> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

/// Locates a chunk in the index as committed now (a new read, not a snapshot).
pub type Relocate<'a> = dyn Fn(&Fingerprint) -> StoreResult<Option<ChunkLoc>> + 'a;

/// Decoded, verified delta bases within [`BaseCache::BUDGET`] bytes. A base shared by many
/// deltas (a trained dictionary, `super::dictionary`, is up to 1 MiB) would otherwise be
/// read, decoded and hashed again for each of them. Keyed by fingerprint and filled only with
/// bytes that match it, so an entry never goes stale. Eviction gives a second chance (the
/// clock rule): the oldest entry goes unless it was used since it was last passed over, so a
/// base many deltas share stays while bases used once come and go.
#[derive(Default)]
pub struct BaseCache {
    inner: Mutex<Cached>,
}

#[derive(Default)]
struct Cached {
    /// Raw bytes, and whether they were used since the clock last passed.
    map: HashMap<Fingerprint, (Arc<Vec<u8>>, bool)>,
    /// The clock: oldest (or last passed over) first.
    order: VecDeque<Fingerprint>,
    bytes: usize,
}

impl BaseCache {
    const BUDGET: usize = 64 << 20;

    fn get(&self, fp: &Fingerprint) -> Option<Arc<Vec<u8>>> {
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let (raw, used) = g.map.get_mut(fp)?;
        *used = true;
        Some(raw.clone())
    }

    fn put(&self, fp: Fingerprint, raw: Arc<Vec<u8>>) {
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let Cached { map, order, bytes } = &mut *g;
        if raw.len() > Self::BUDGET || map.contains_key(&fp) {
            return;
        }
        // Each entry is passed over at most once before it goes: two turns at most.
        while *bytes + raw.len() > Self::BUDGET {
            let Some(old) = order.pop_front() else { break };
            match map.get_mut(&old) {
                Some((_, used)) if *used => {
                    *used = false;
                    order.push_back(old);
                }
                Some(_) => {
                    let (r, _) = map.remove(&old).expect("present");
                    *bytes -= r.len();
                }
                None => {}
            }
        }
        *bytes += raw.len();
        order.push_back(fp);
        map.insert(fp, (raw, false));
    }
}

impl Bases<'_> {
    /// The stored copy of chunk `fp`, as the index locates it. A container gone between
    /// the lookup and the read (the mover moved the chunk meanwhile) is looked up again,
    /// through `relocate` where there is one.
    pub fn fetch(&self, fp: &Fingerprint) -> Result<Stored, String> {
        let ix = self.ix.ok_or("no index to read delta bases from")?;
        let mut last = None;
        for attempt in 0..3 {
            let loc = match self.relocate {
                Some(relocate) if attempt > 0 => relocate(fp),
                _ => ix.chunk_location(self.repo_id, fp),
            };
            let Some(loc) = loc.map_err(|e| self.trouble.note(e))? else {
                return Err(format!("base chunk {} is not stored", to_hex(fp)));
            };
            if last == Some((loc.container_id, loc.offset)) {
                break;
            }
            last = Some((loc.container_id, loc.offset));
            let file = self
                .backend
                .open(self.repo_id, loc.container_id)
                .map_err(|e| self.trouble.note(e.into()))?;
            let read = match file {
                Some(_) if super::crashpoint::fails("base:read") => {
                    let e = std::io::Error::other("failure point base:read (DITTO_TEST_FAIL_AT)");
                    return Err(self.trouble.note(e.into()));
                }
                Some(f) => self
                    .backend
                    .read_at(&f, loc.offset, loc.stored_len)
                    .map_err(|e| self.trouble.note(e.into()))?,
                None => None,
            };
            if let Some(bytes) = read {
                return Ok(Stored {
                    codec: loc.codec,
                    bytes,
                    raw_len: loc.raw_len as usize,
                });
            }
        }
        Err(format!(
            "the container of base chunk {} is missing or short",
            to_hex(fp)
        ))
    }

    /// Decodes delta chunk `fp` (stored bytes `stored`) against its chain of bases: the
    /// direct base from `cache` if it holds it, else decoded link by link (each verified,
    /// at most `MAX_CHAIN_DEPTH - 1` of them, the delta itself being the last) and added to
    /// it with the links below it, so only bases within the cap are ever cached.
    fn decode_delta(
        &self,
        fp: &Fingerprint,
        raw_len: u32,
        stored: &[u8],
        how: Check,
    ) -> Result<Vec<u8>, String> {
        let err = |e: wasm_core::resemble::delta::DeltaError| format!("delta chunk: {e}");
        let base_fp = base_of(stored).map_err(err)?;
        let base = match self.cache.and_then(|c| c.get(&base_fp)) {
            Some(b) => b,
            None => {
                // The links below the base are kept too: their chains are shorter, so the
                // cache still holds only bases within the cap, and a `chunks/get` that sends
                // them (`chains`) verifies each with one delta decode.
                let b = Arc::new(
                    decode_chain_each(
                        &base_fp,
                        MAX_CHAIN_DEPTH - 1,
                        |f| self.cache.and_then(|c| c.get(f)),
                        |f| self.fetch(f),
                        |f, raw| {
                            if let Some(c) = self.cache.filter(|c| c.get(f).is_none()) {
                                c.put(*f, Arc::new(raw.to_vec()));
                            }
                        },
                    )
                    .map_err(err)?,
                );
                if let Some(c) = self.cache {
                    c.put(base_fp, b.clone());
                }
                b
            }
        };
        let raw = DeltaDecoder::new()
            .and_then(|mut d| d.decode(stored, &base_fp, &base, raw_len as usize))
            .map_err(err)?;
        matches(fp, &raw, how)?;
        Ok(raw)
    }
}

/// Decodes stored bytes to the raw chunk and checks them against its fingerprint (`how`);
/// `Err` says why the copy is damaged. `bases` reads the bases of a delta chunk, each link
/// checked as a read.
pub fn decode_verified(
    fp: &Fingerprint,
    codec: u8,
    raw_len: u32,
    stored: Vec<u8>,
    bases: &Bases<'_>,
    how: Check,
) -> Result<Vec<u8>, String> {
    if codec == CODEC_DELTA {
        return bases.decode_delta(fp, raw_len, &stored, how);
    }
    let raw = decode_stored(codec, raw_len, stored)?;
    matches(fp, &raw, how)?;
    Ok(raw)
}

/// Like [`decode_verified`] for bytes the caller keeps (answers sent as stored, `check`,
/// the mover's copies): nothing is copied, raw chunks are hashed in place.
pub fn verify_stored(
    fp: &Fingerprint,
    codec: u8,
    raw_len: u32,
    stored: &[u8],
    bases: &Bases<'_>,
    how: Check,
) -> Result<(), String> {
    if codec == CODEC_DELTA {
        return bases.decode_delta(fp, raw_len, stored, how).map(|_| ());
    }
    if codec != CODEC_RAW {
        return matches(
            fp,
            &compress::decompress(codec, stored, raw_len as usize)?,
            how,
        );
    }
    if stored.len() != raw_len as usize {
        return Err(format!("{} stored bytes, expected {raw_len}", stored.len()));
    }
    matches(fp, stored, how)
}

fn matches(fp: &Fingerprint, raw: &[u8], how: Check) -> Result<(), String> {
    let ok = match how {
        Check::Read => is_stored_chunk(raw, fp),
        Check::Fingerprint => fingerprint(raw) == *fp,
    };
    if !ok {
        return Err("its decoded bytes do not match its fingerprint".into());
    }
    Ok(())
}

/// Which containers a partial verification reads (like restic's `--read-data-subset`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Subset {
    All,
    /// Part `n` of `m` (1-based): containers whose id is `n - 1` modulo `m`, so running
    /// `1/m` .. `m/m` reads every container once.
    Part(u64, u64),
    /// About this percentage of the containers, picked at random on each run.
    Percent(f64),
}

impl Subset {
    /// `"n/m"`, `"P%"` (0 < P <= 100) or `"all"`.
    pub fn parse(s: &str) -> Result<Subset, String> {
        let s = s.trim();
        if s.is_empty() || s == "all" {
            return Ok(Subset::All);
        }
        if let Some(p) = s.strip_suffix('%') {
            let p: f64 = p
                .trim()
                .parse()
                .map_err(|_| format!("{s:?}: expected a percentage like 10%"))?;
            if !(p > 0.0 && p <= 100.0) {
                return Err(format!(
                    "{s:?}: the percentage must be above 0 and at most 100"
                ));
            }
            return Ok(Subset::Percent(p));
        }
        let (n, m) = s
            .split_once('/')
            .ok_or_else(|| format!("{s:?}: expected n/m, a percentage like 10%, or all"))?;
        let (n, m): (u64, u64) = match (n.trim().parse(), m.trim().parse()) {
            (Ok(n), Ok(m)) => (n, m),
            _ => return Err(format!("{s:?}: n and m must be integers")),
        };
        if m == 0 || n == 0 || n > m {
            return Err(format!("{s:?}: need 1 <= n <= m"));
        }
        Ok(Subset::Part(n, m))
    }

    /// Whether container `id` is read; `salt` varies the random pick between runs.
    pub fn includes(&self, id: u64, salt: u64) -> bool {
        match *self {
            Subset::All => true,
            Subset::Part(n, m) => id % m == n - 1,
            Subset::Percent(p) => {
                // splitmix64 of the id and the run's salt: a uniform pick per container.
                let mut z = id.wrapping_add(salt).wrapping_add(0x9E37_79B9_7F4A_7C15);
                z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
                z ^= z >> 31;
                ((z % 1_000_000) as f64) < p * 10_000.0
            }
        }
    }
}

/// A random salt for [`Subset::includes`].
pub fn salt() -> u64 {
    let mut b = [0u8; 8];
    let _ = getrandom::fill(&mut b);
    u64::from_le_bytes(b)
}

#[derive(Debug, Default)]
pub struct Verified {
    pub containers: u64,
    pub chunks: u64,
    pub bytes: u64,
    pub damaged: Vec<Found>,
}

/// Reads and verifies every committed chunk of the repository's containers in `subset`,
/// all from `ix` (one snapshot). Reads only; quarantining what it found is the caller's (it
/// needs the writer).
pub fn verify_repo(
    backend: &dyn ContainerBackend,
    ix: &dyn IndexRead,
    repo_id: i64,
    subset: Subset,
) -> Result<Verified, StoreError> {
    let salt = salt();
    // Kept for this run only: a base shared by many deltas is read and hashed once.
    let cache = BaseCache::default();
    let bases = Bases {
        backend,
        ix: Some(ix),
        repo_id,
        cache: Some(&cache),
        relocate: None,
        trouble: Trouble::default(),
    };
    let containers = ix.container_ids(repo_id)?;
    let mut out = Verified::default();
    for cid in containers {
        if !subset.includes(cid as u64, salt) {
            continue;
        }
        out.containers += 1;
        // A missing file or a short read is damage; any other I/O error is the server's
        // trouble, not the data's, and must not quarantine anything.
        let file = backend.open(repo_id, cid as u64)?;
        ix.container_chunks(repo_id, cid as u64, &mut |fp, loc| {
            out.chunks += 1;
            out.bytes += loc.stored_len as u64;
            let res = match &file {
                Some(f) => match backend.read_at(f, loc.offset, loc.stored_len) {
                    Ok(Some(buf)) => verify_stored(
                        &fp,
                        loc.codec,
                        loc.raw_len,
                        &buf,
                        &bases,
                        Check::Fingerprint,
                    ),
                    Ok(None) => Err("its container file is shorter than the index says".into()),
                    Err(e) => return Err(e.into()),
                },
                None => Err("its container file is missing".into()),
            };
            if let Err(reason) = res {
                if let Some(e) = bases.trouble.take() {
                    return Err(e);
                }
                out.damaged.push(Found {
                    fp,
                    container_id: cid as u64,
                    offset: loc.offset,
                    reason,
                });
            }
            Ok(())
        })?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fp(i: u32) -> Fingerprint {
        let mut f = [0u8; 20];
        f[..4].copy_from_slice(&i.to_le_bytes());
        f
    }

    /// A base used between puts outlives bases put after it and never used (FIFO would
    /// evict it first); the budget holds.
    #[test]
    fn a_base_in_use_survives_a_stream_of_others() {
        let cache = BaseCache::default();
        let mib = |i: u32| Arc::new(vec![i as u8; 1 << 20]);
        cache.put(fp(0), mib(0));
        for i in 1..400 {
            assert!(
                cache.get(&fp(0)).is_some(),
                "the shared base, after {i} others"
            );
            cache.put(fp(i), mib(i));
            let g = cache.inner.lock().unwrap();
            assert!(g.bytes <= BaseCache::BUDGET);
            assert_eq!(g.bytes, g.map.values().map(|(r, _)| r.len()).sum::<usize>());
        }
        assert!(cache.get(&fp(1)).is_none(), "an old base used once is gone");
        assert!(cache.get(&fp(399)).is_some(), "the newest is kept");
        assert_eq!(cache.get(&fp(0)).unwrap()[0], 0);
    }
}
