//! Decoding every chunk of one stored byte range, delta chunks included, for readers that
//! fetch containers themselves (the page's search workers; DARE §3.4 decoding).
//!
//! A delta chunk (codec 2) decodes only against the raw bytes of its base, which may sit in
//! the same range, in another container, or be a delta itself. A reader that scans ranges
//! does not have the index to walk chains, so the work is split:
//! - [`outside_bases`] names the bases the range's deltas need that the caller does not
//!   hold yet, walking each chain down through the range and the chunks the caller fetched
//!   already; the caller fetches those as stored (`chunks/get` with `"deltas": "stored"`),
//!   and asks again, since a fetched base may be a delta whose own base is missing, until
//!   nothing is missing (at most [`MAX_CHAIN_DEPTH`] rounds);
//! - [`RangeDecoder::decode`] decodes the range's codec 0/1 chunks first, then its deltas,
//!   each by walking its chain down to a chunk whose raw bytes are at hand (decoded in this
//!   range, handed in raw, or a whole fetched chunk) and decoding back up, so a chain
//!   resolves in any storage order; it hands each chunk's raw bytes out exactly once, and
//!   answers the fetched chunks it decoded (the caller keeps them, so each is fetched once).
//!
//! Every chunk of the range is checked against its fingerprint before it is handed out, so
//! damage in the range or a wrong base (a stale cache, a wrong answer, a damaged link) is an
//! error and never silently wrong bytes; chunks are checked in batches, four at a time in
//! SIMD lanes. The links below them are not checked as they are decoded: a frame
//! (docs/FORMAT.md, "Codec 2, method 3") is a link of up to 1 MiB whose members are a few
//! KiB each, so checking the range's chunks alone hashes a fraction of the bytes, and a
//! damaged link still cannot pass, since every byte of the range decoded from it is checked.
//! When a chunk fails, the lowest link of its chain whose bytes are not its fingerprint's is
//! named as the chunk at fault ([`blame`]). A caller that hands a fetched link out as a chunk
//! of its own checks it first (the search's chunk cache, when a job scans one). A base that
//! never becomes available and a chain longer than [`MAX_CHAIN_DEPTH`] links (a loop of
//! deltas among them) are errors too.
//! The links are counted down to the first chunk whose raw bytes the caller handed in: their
//! own chain was capped when they were decoded.

use super::delta::{base_of, DeltaDecoder, DeltaError, CODEC_DELTA, MAX_CHAIN_DEPTH};
use crate::compress::Decompressor;
use crate::format::bundle::MAX_CHUNK_RAW;
use crate::hash::{
    first_not_stored_flat, is_stored_chunk, to_hex, Fingerprint, FpMap, FpSet, FINGERPRINT_LEN,
};

/// A range that could not be decoded: the chunk at fault when there is one (a chunk of the
/// range or a fetched link whose bytes are wrong, a delta whose chain is too long or whose
/// base is missing), and why. Shown as `chunk <hex>: <reason>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangeError {
    pub chunk: Option<Fingerprint>,
    pub reason: String,
}

impl std::fmt::Display for RangeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.chunk {
            Some(fp) => write!(f, "chunk {}: {}", to_hex(fp), self.reason),
            None => f.write_str(&self.reason),
        }
    }
}

impl std::error::Error for RangeError {}

/// One chunk of a stored range: its fingerprint, codec, stored bytes and raw length.
#[derive(Debug, Clone, Copy)]
pub struct RangeChunk<'a> {
    pub fp: Fingerprint,
    pub codec: u8,
    pub stored: &'a [u8],
    pub raw_len: usize,
}

/// Where a chunk of a chain comes from: the range, or the chunks fetched from outside it.
type Index<'r, 'a> = FpMap<(&'r RangeChunk<'a>, bool)>;

/// The stored chunks of `chunks` (in range: `true`) and of `fetched` (`false`) by
/// fingerprint; a chunk in both is the range's.
fn index<'r, 'a>(chunks: &'r [RangeChunk<'a>], fetched: &'r [RangeChunk<'a>]) -> Index<'r, 'a> {
    let mut ix = FpMap::with_capacity_and_hasher(chunks.len() + fetched.len(), Default::default());
    for c in fetched {
        ix.insert(c.fp, (c, false));
    }
    for c in chunks {
        ix.insert(c.fp, (c, true));
    }
    ix
}

/// The distinct bases (in first-named order) that the delta chunks of `chunks` need and
/// that neither `chunks`, `fetched` (stored chunks from outside the range, which the caller
/// fetched already) nor `known` (chunks whose raw bytes the caller holds) has, following each
/// chain down through `chunks` and `fetched`. `Err` for a chain longer than
/// [`MAX_CHAIN_DEPTH`] links or a malformed delta.
pub fn outside_bases(
    chunks: &[RangeChunk<'_>],
    fetched: &[RangeChunk<'_>],
    known: impl Fn(&Fingerprint) -> bool,
) -> Result<Vec<Fingerprint>, RangeError> {
    let ix = index(chunks, fetched);
    let mut seen = FpSet::default();
    let mut out = Vec::new();
    for top in chunks.iter().filter(|c| c.codec == CODEC_DELTA) {
        let mut cur = top;
        let mut links = 0;
        loop {
            links += 1;
            if links > MAX_CHAIN_DEPTH {
                return Err(chunk_err(&top.fp, DeltaError::ChainTooLong));
            }
            let b = base_of(cur.stored).map_err(|e| chunk_err(&cur.fp, e))?;
            // Raw bytes at hand first, as in the decoder.
            if known(&b) {
                break;
            }
            match ix.get(&b) {
                Some((c, _)) if c.codec == CODEC_DELTA => cur = c,
                Some(_) => break,
                None => {
                    if seen.insert(b) {
                        out.push(b);
                    }
                    break;
                }
            }
        }
    }
    Ok(out)
}

/// The raw bytes of a base the caller holds, by fingerprint ([`RangeDecoder::decode`]).
pub type Outside<'a> = dyn Fn(&Fingerprint) -> Option<&'a [u8]> + 'a;

/// Reusable decoder of stored ranges (its zstd contexts live across ranges).
pub struct RangeDecoder {
    dec: Decompressor,
    delta: DeltaDecoder,
    deltas: u64,
}

impl RangeDecoder {
    pub fn new() -> Result<Self, RangeError> {
        let unowned = |e: &dyn std::fmt::Display| RangeError {
            chunk: None,
            reason: e.to_string(),
        };
        Ok(RangeDecoder {
            dec: Decompressor::new().map_err(|e| unowned(&e))?,
            delta: DeltaDecoder::new().map_err(|e| unowned(&e))?,
            deltas: 0,
        })
    }

    /// Delta chunks of ranges decoded so far (fetched ones not counted).
    pub fn deltas(&self) -> u64 {
        self.deltas
    }

    /// Decodes every chunk of `chunks` and calls `emit(fp, raw)` once per chunk with its raw
    /// bytes, checked (codec 0/1 chunks in range order, then the deltas). `fetched` holds
    /// stored chunks from outside the range (the bases [`outside_bases`] named, fetched as
    /// stored), `outside` the raw bytes of bases the caller holds (more is harmless), looked
    /// up where the caller keeps them rather than copied.
    /// Answers the chunks of `fetched` that a chain needed, decoded and NOT checked (see the
    /// module doc), for the caller to keep as bases.
    pub fn decode(
        &mut self,
        chunks: &[RangeChunk<'_>],
        fetched: &[RangeChunk<'_>],
        outside: &Outside<'_>,
        mut emit: impl FnMut(&Fingerprint, &[u8]),
    ) -> Result<Vec<(Fingerprint, Vec<u8>)>, RangeError> {
        let ix = index(chunks, fetched);
        let mut held = Held::default();
        let mut links = Vec::new();
        match self.decode_with(&ix, chunks, outside, &mut held, &mut links, &mut emit) {
            Ok(()) => Ok(links
                .into_iter()
                .filter_map(|fp| held.remove(&fp).map(|(raw, _)| (fp, raw)))
                .collect()),
            Err(e) => Err(blame(e, &ix, &held, outside)),
        }
    }

    /// [`RangeDecoder::decode`] with its state outside, for [`blame`] on failure: `held`
    /// gets each base decoded (with the links of its chain below it), `links` the fetched
    /// chunks among them.
    fn decode_with(
        &mut self,
        ix: &Index<'_, '_>,
        chunks: &[RangeChunk<'_>],
        outside: &Outside<'_>,
        held: &mut Held,
        links: &mut Vec<Fingerprint>,
        emit: &mut impl FnMut(&Fingerprint, &[u8]),
    ) -> Result<(), RangeError> {
        let named = |c: &RangeChunk<'_>| base_of(c.stored).map_err(|e| chunk_err(&c.fp, e));
        // Bases are kept once decoded, with the links of their chain below them; nothing
        // else is copied.
        let mut wanted = FpSet::default();
        for (c, _) in ix.values().filter(|(c, _)| c.codec == CODEC_DELTA) {
            wanted.insert(named(c)?);
        }
        let mut unchecked = Unchecked::default();
        for c in chunks.iter().filter(|c| c.codec != CODEC_DELTA) {
            let raw = unchecked.slot(&c.fp, c.raw_len, Source::Whole)?;
            self.dec
                .decompress_into(c.codec, c.stored, raw)
                .map_err(|e| chunk_err(&c.fp, e))?;
            if wanted.contains(&c.fp) {
                held.insert(c.fp, (raw.to_vec(), 0));
            }
            if unchecked.is_full() {
                unchecked.check_and_emit(emit)?;
            }
        }
        // The whole chunks go out before the deltas, as documented.
        unchecked.check_and_emit(emit)?;
        let mut done: FpSet = FpSet::default();
        for top in chunks.iter().filter(|c| c.codec == CODEC_DELTA) {
            if done.contains(&top.fp) {
                continue; // decoded already as the base of an earlier chain
            }
            // Down the chain to a chunk whose raw bytes are at hand.
            let mut chain: Vec<(&RangeChunk<'_>, bool)> = vec![(top, true)];
            let below = loop {
                let (cur, _) = chain[chain.len() - 1];
                if chain.len() > MAX_CHAIN_DEPTH {
                    return Err(chunk_err(&top.fp, DeltaError::ChainTooLong));
                }
                let b = named(cur)?;
                if let Some((_, links)) = held.get(&b) {
                    break *links;
                }
                if outside(&b).is_some() {
                    break 0;
                }
                match ix.get(&b) {
                    Some(&(c, in_range)) if c.codec == CODEC_DELTA => chain.push((c, in_range)),
                    // A whole fetched chunk (the range's are held once decoded, when named).
                    Some(&(c, _)) => {
                        let raw = self
                            .dec
                            .decompress(c.codec, c.stored, checked_len(&c.fp, c.raw_len)?)
                            .map_err(|e| chunk_err(&c.fp, e))?;
                        held.insert(c.fp, (raw.to_vec(), 0));
                        links.push(c.fp);
                        break 0;
                    }
                    None => {
                        return Err(chunk_err(
                            &cur.fp,
                            format!("delta base {} not available", to_hex(&b)),
                        ))
                    }
                }
            };
            if chain.len() + below > MAX_CHAIN_DEPTH {
                return Err(chunk_err(&top.fp, DeltaError::ChainTooLong));
            }
            // Back up, each link against the one below it.
            for (k, &(c, in_range)) in chain.iter().enumerate().rev() {
                let b = named(c)?;
                let Some(base) = held.get(&b).map(|h| h.0.as_slice()).or_else(|| outside(&b))
                else {
                    return Err(chunk_err(&c.fp, "delta base lost while decoding"));
                };
                let depth = below + chain.len() - k;
                if !in_range {
                    // A fetched link: decoded into its own buffer, held, not checked.
                    let mut raw = vec![0u8; checked_len(&c.fp, c.raw_len)?];
                    self.delta
                        .decode_into(c.stored, &b, base, &mut raw)
                        .map_err(|e| chunk_err(&c.fp, e))?;
                    held.insert(c.fp, (raw, depth));
                    links.push(c.fp);
                    continue;
                }
                let raw = unchecked.slot(&c.fp, c.raw_len, Source::Delta)?;
                self.delta
                    .decode_into(c.stored, &b, base, raw)
                    .map_err(|e| chunk_err(&c.fp, e))?;
                self.deltas += 1;
                done.insert(c.fp);
                if k > 0 || wanted.contains(&c.fp) {
                    held.insert(c.fp, (raw.to_vec(), depth));
                }
                if unchecked.is_full() {
                    unchecked.check_and_emit(emit)?;
                }
            }
        }
        unchecked.check_and_emit(emit)
    }
}

/// Raw bytes of the bases decoded while decoding a range, with the links of chain below each.
type Held = FpMap<(Vec<u8>, usize)>;

/// `raw_len`, refused when no chunk can have it (before anything is allocated for it).
fn checked_len(fp: &Fingerprint, raw_len: usize) -> Result<usize, RangeError> {
    if raw_len > MAX_CHUNK_RAW as usize {
        return Err(chunk_err(
            fp,
            format!("raw length {raw_len} exceeds the chunk limit ({MAX_CHUNK_RAW})"),
        ));
    }
    Ok(raw_len)
}

/// The error `e` of a decode, re-aimed at the lowest link of its chunk's chain whose raw
/// bytes (decoded here, or handed in) are not its fingerprint's: a damaged link makes the
/// chunks above it decode wrongly or not at all, and is what needs repair. Runs only on
/// failure, so the links' hashes cost nothing when every chunk checks out.
fn blame(e: RangeError, ix: &Index<'_, '_>, held: &Held, outside: &Outside<'_>) -> RangeError {
    let Some(failed) = e.chunk else {
        return e;
    };
    let mut cur = failed;
    let mut below = Vec::new();
    while below.len() <= MAX_CHAIN_DEPTH {
        let Some((c, _)) = ix.get(&cur) else { break };
        if c.codec != CODEC_DELTA {
            break;
        }
        let Ok(b) = base_of(c.stored) else { break };
        below.push(b);
        cur = b;
    }
    for b in below.iter().rev() {
        let raw = held.get(b).map(|h| h.0.as_slice()).or_else(|| outside(b));
        if raw.is_some_and(|raw| !is_stored_chunk(raw, b)) {
            return chunk_err(
                b,
                format!(
                    "a base of chunk {} has other bytes than its fingerprint's",
                    to_hex(&failed)
                ),
            );
        }
    }
    e
}

/// Where a chunk waiting for its check comes from (what its failure says).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Source {
    /// A codec 0/1 chunk of the range, decompressed.
    Whole,
    /// A delta chunk of the range, decoded against its base.
    Delta,
}

/// Decoded chunks of the range waiting for their check against their fingerprints, which
/// hashes a batch four chunks at a time in SIMD lanes ([`first_not_stored_flat`]) instead of
/// one chunk at a time. They are emitted only once checked, so unchecked bytes never leave
/// the decoder; a link decoded on an unchecked base is in a later batch or the same one,
/// behind it.
#[derive(Default)]
struct Unchecked {
    buf: Vec<u8>,
    ranges: Vec<(usize, usize)>,
    fps: Vec<u8>,
    from: Vec<Source>,
}

impl Unchecked {
    /// Chunks per batch: enough to keep the four lanes busy.
    const BATCH: usize = 16;

    /// Room for the `raw_len` bytes of chunk `fp`, to be decoded in place (a chunk whose
    /// decoding fails fails the whole batch, so a slot is never left half written). A raw
    /// length no chunk can have is refused before anything is allocated for it.
    fn slot(
        &mut self,
        fp: &Fingerprint,
        raw_len: usize,
        from: Source,
    ) -> Result<&mut [u8], RangeError> {
        let raw_len = checked_len(fp, raw_len)?;
        let at = self.buf.len();
        self.ranges.push((at, raw_len));
        self.buf.resize(at + raw_len, 0);
        self.fps.extend_from_slice(fp);
        self.from.push(from);
        Ok(&mut self.buf[at..])
    }

    fn is_full(&self) -> bool {
        self.ranges.len() >= Self::BATCH
    }

    /// Checks the batch, then emits each chunk as `emit(fp, raw)`.
    fn check_and_emit(
        &mut self,
        emit: &mut impl FnMut(&Fingerprint, &[u8]),
    ) -> Result<(), RangeError> {
        let fp = |k: usize| -> Fingerprint {
            self.fps[k * FINGERPRINT_LEN..][..FINGERPRINT_LEN]
                .try_into()
                .unwrap()
        };
        if let Some((k, _)) = first_not_stored_flat(&self.buf, &self.ranges, &self.fps) {
            let what = match self.from[k] {
                Source::Whole => "stored bytes decode to other bytes",
                Source::Delta => "delta decodes to other bytes",
            };
            return Err(chunk_err(&fp(k), what));
        }
        for (k, &(off, len)) in self.ranges.iter().enumerate() {
            emit(&fp(k), &self.buf[off..off + len]);
        }
        self.buf.clear();
        self.ranges.clear();
        self.fps.clear();
        self.from.clear();
        Ok(())
    }
}

fn chunk_err(fp: &Fingerprint, e: impl std::fmt::Display) -> RangeError {
    RangeError {
        chunk: Some(*fp),
        reason: e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::delta::DeltaEncoder;
    use super::super::testdata::{data, edit};
    use super::*;
    use crate::compress::{Compressor, CODEC_RAW};
    use crate::hash::fingerprint;

    struct Stored {
        fp: Fingerprint,
        codec: u8,
        bytes: Vec<u8>,
        raw: Vec<u8>,
    }

    fn plain(raw: Vec<u8>, zstd: bool) -> Stored {
        let (codec, bytes) = if zstd {
            let mut c = Compressor::new(3).unwrap();
            let (codec, b) = c.compress(&raw);
            (codec, b.to_vec())
        } else {
            (CODEC_RAW, raw.clone())
        };
        Stored {
            fp: fingerprint(&raw),
            codec,
            bytes,
            raw,
        }
    }

    fn delta(raw: Vec<u8>, base: &Stored) -> Stored {
        let mut e = DeltaEncoder::new(3).unwrap();
        let bytes = e.encode(&base.fp, &base.raw, &raw).unwrap().to_vec();
        assert!(
            bytes.len() < raw.len() / 4,
            "the edit must make a small delta"
        );
        Stored {
            fp: fingerprint(&raw),
            codec: CODEC_DELTA,
            bytes,
            raw,
        }
    }

    fn range(s: &[&Stored]) -> Vec<RangeChunk<'static>> {
        s.iter()
            .map(|c| RangeChunk {
                fp: c.fp,
                codec: c.codec,
                stored: Box::leak(c.bytes.clone().into_boxed_slice()),
                raw_len: c.raw.len(),
            })
            .collect()
    }

    /// Every chunk `decode` emits: (raw bytes, in range).
    fn decode_all(
        chunks: &[RangeChunk<'_>],
        fetched: &[RangeChunk<'_>],
        outside: &FpMap<Vec<u8>>,
    ) -> Result<FpMap<(Vec<u8>, bool)>, String> {
        let mut d = RangeDecoder::new().unwrap();
        let mut out = FpMap::default();
        let links = d
            .decode(
                chunks,
                fetched,
                &|fp| outside.get(fp).map(Vec::as_slice),
                |fp, raw| {
                    assert!(
                        out.insert(*fp, (raw.to_vec(), true)).is_none(),
                        "a chunk emitted twice"
                    );
                },
            )
            .map_err(|e| e.to_string())?;
        for (fp, raw) in links {
            assert!(
                out.insert(fp, (raw, false)).is_none(),
                "a link answered twice, or also emitted"
            );
        }
        Ok(out)
    }

    fn none(_: &Fingerprint) -> bool {
        false
    }

    #[test]
    fn chains_inside_the_range_in_any_order_and_outside_bases() {
        let a = plain(data(1, 9000), true);
        let b = delta(edit(&a.raw, 100), &a);
        let c = delta(edit(&b.raw, 5000), &b);
        let d = delta(edit(&c.raw, 7000), &c);
        let x = plain(data(2, 8000), false);
        let y = delta(edit(&x.raw, 10), &x);
        let z = plain(data(3, 4000), true);
        // Deltas before their bases, a chain of three inside the range, one base outside.
        let order = [&d, &y, &c, &z, &b, &a];
        let chunks = range(&order);
        assert_eq!(outside_bases(&chunks, &[], none).unwrap(), vec![x.fp]);
        assert!(outside_bases(&chunks, &[], |fp| *fp == x.fp)
            .unwrap()
            .is_empty());
        let outside: FpMap<_> = [(x.fp, x.raw.clone())].into_iter().collect();
        let got = decode_all(&chunks, &[], &outside).unwrap();
        assert_eq!(got.len(), order.len());
        for s in order {
            assert_eq!(got[&s.fp], (s.raw.clone(), true));
        }
        let mut r = RangeDecoder::new().unwrap();
        r.decode(
            &chunks,
            &[],
            &|fp| outside.get(fp).map(Vec::as_slice),
            |_, _| {},
        )
        .unwrap();
        assert_eq!(r.deltas(), 4);
    }

    #[test]
    fn a_fetched_base_longer_than_a_chunk_is_refused_before_it_is_decoded() {
        let a = plain(data(1, 9000), true);
        let b = delta(edit(&a.raw, 100), &a);
        let mut fetched = range(&[&a]);
        // A length no chunk has, as a damaged or hostile answer could give: refused, not
        // allocated (up to 4 GiB in a worker's memory).
        fetched[0].raw_len = MAX_CHUNK_RAW as usize + 1;
        let e = decode_all(&range(&[&b]), &fetched, &FpMap::default()).unwrap_err();
        assert!(e.contains("exceeds the chunk limit"), "{e}");
    }

    /// The worker's loop: ask which bases are missing, fetch them as stored, ask again.
    fn fetch_rounds(
        chunks: &[RangeChunk<'_>],
        store: &[&Stored],
        known: &FpSet,
    ) -> Result<(Vec<RangeChunk<'static>>, usize), String> {
        let mut fetched = Vec::new();
        for round in 0.. {
            let want = outside_bases(chunks, &fetched, |fp| known.contains(fp))
                .map_err(|e| e.to_string())?;
            if want.is_empty() {
                return Ok((fetched, round));
            }
            assert!(round < MAX_CHAIN_DEPTH, "the rounds end within the cap");
            for fp in want {
                let s = store
                    .iter()
                    .find(|s| s.fp == fp)
                    .ok_or_else(|| format!("{} is not stored", to_hex(&fp)))?;
                fetched.extend(range(&[s]));
            }
        }
        unreachable!()
    }

    #[test]
    fn chains_of_stored_deltas_fetched_from_outside() {
        // dict <- a <- b <- c (stored outside the range) <- d, e (in the range): d's chain
        // has four links, the cap. f names b too; g names the dictionary directly.
        let dict = plain(data(5, 12000), true);
        let a = delta(edit(&dict.raw, 40), &dict);
        let b = delta(edit(&a.raw, 900), &a);
        let c = delta(edit(&b.raw, 3000), &b);
        let d = delta(edit(&c.raw, 5000), &c);
        let e = plain(data(6, 5000), true);
        let f = delta(edit(&b.raw, 7000), &b);
        let g = delta(edit(&dict.raw, 11000), &dict);
        let store = [&dict, &a, &b, &c];
        let (fetched, rounds) = fetch_rounds(&range(&[&d, &e]), &store, &FpSet::default()).unwrap();
        assert_eq!(
            (fetched.len(), rounds),
            (4, 4),
            "one round per link below d"
        );
        let chunks = range(&[&d, &e, &f, &g]);
        let (fetched, rounds) = fetch_rounds(&chunks, &store, &FpSet::default()).unwrap();
        assert_eq!(fetched.len(), 4, "each base fetched once");
        assert_eq!(
            rounds, 2,
            "f and g name b and the dictionary in the first round"
        );
        let got = decode_all(&chunks, &fetched, &FpMap::default()).unwrap();
        for s in [&d, &e, &f, &g] {
            assert_eq!(got[&s.fp], (s.raw.clone(), true));
        }
        for s in store {
            assert_eq!(
                got[&s.fp],
                (s.raw.clone(), false),
                "fetched bases are handed out"
            );
        }
        let mut r = RangeDecoder::new().unwrap();
        r.decode(&chunks, &fetched, &|_| None, |_, _| {}).unwrap();
        assert_eq!(r.deltas(), 3, "fetched deltas are not the range's");

        // With the dictionary held raw (a worker's cache): it is neither fetched nor counted.
        let known: FpSet = [dict.fp].into_iter().collect();
        let (fetched, rounds) = fetch_rounds(&chunks, &store, &known).unwrap();
        assert_eq!((fetched.len(), rounds), (3, 2));
        let outside: FpMap<_> = [(dict.fp, dict.raw.clone())].into_iter().collect();
        let got = decode_all(&chunks, &fetched, &outside).unwrap();
        assert_eq!(got[&d.fp].0, d.raw);
        assert!(!got.contains_key(&dict.fp));
        // And with b held: the chain stops there.
        let known: FpSet = [b.fp].into_iter().collect();
        let (fetched, _) = fetch_rounds(&chunks, &store, &known).unwrap();
        assert_eq!(
            fetched.iter().map(|c| c.fp).collect::<Vec<_>>(),
            vec![c.fp, dict.fp]
        );
    }

    #[test]
    fn chains_past_the_cap_and_missing_or_wrong_fetched_bases_are_errors() {
        let dict = plain(data(7, 9000), true);
        let mut links = vec![dict];
        for k in 0..5 {
            let next = delta(edit(&links[k].raw, 100 + 1000 * k), &links[k]);
            links.push(next);
        }
        let cap = |e: &str| e.contains(&DeltaError::ChainTooLong.to_string());
        // links[5] has five links: refused while asking for bases, and while decoding.
        let store: Vec<&Stored> = links[..5].iter().collect();
        let top = range(&[&links[5]]);
        let e = fetch_rounds(&top, &store, &FpSet::default()).unwrap_err();
        assert!(cap(&e) && e.contains(&to_hex(&links[5].fp)), "{e}");
        let all = range(&store);
        let e = decode_all(&top, &all, &FpMap::default()).unwrap_err();
        assert!(cap(&e), "{e}");
        // The same chain inside one range, in any order.
        let e = decode_all(
            &range(&[
                &links[2], &links[5], &links[0], &links[4], &links[1], &links[3],
            ]),
            &[],
            &FpMap::default(),
        )
        .unwrap_err();
        assert!(cap(&e), "{e}");
        // Four links pass.
        let top = range(&[&links[4]]);
        let (fetched, _) = fetch_rounds(&top, &store, &FpSet::default()).unwrap();
        assert_eq!(
            decode_all(&top, &fetched, &FpMap::default()).unwrap()[&links[4].fp].0,
            links[4].raw
        );

        // A base that never arrives: the fetch fails (the server answers 404), and a decode
        // without it names it.
        let store: Vec<&Stored> = links[1..3].iter().collect();
        let top = range(&[&links[3]]);
        let e = fetch_rounds(&top, &store, &FpSet::default()).unwrap_err();
        assert!(e.contains(&to_hex(&links[0].fp)), "{e}");
        let e = decode_all(&top, &range(&store), &FpMap::default()).unwrap_err();
        assert!(
            e.contains("not available") && e.contains(&to_hex(&links[0].fp)),
            "{e}"
        );
        // The error names the delta whose base is missing as the chunk at fault.
        let e = RangeDecoder::new()
            .unwrap()
            .decode(&top, &range(&store), &|_| None, |_, _| {})
            .unwrap_err();
        assert_eq!(e.chunk, Some(links[1].fp), "{e}");
        assert!(e
            .to_string()
            .starts_with(&format!("chunk {}: ", to_hex(&links[1].fp))));
        // A fetched base with other bytes than its fingerprint's: refused, not used.
        let mut fetched = range(&store);
        let mut stale = range(&[&links[0]]);
        stale[0].codec = CODEC_RAW;
        stale[0].stored = Box::leak(edit(&links[0].raw, 5).into_boxed_slice());
        stale[0].raw_len = stale[0].stored.len();
        fetched.extend(stale);
        let e = decode_all(&top, &fetched, &FpMap::default()).unwrap_err();
        assert!(
            e.contains("other bytes") && e.contains(&to_hex(&links[0].fp)),
            "{e}"
        );
    }

    #[test]
    fn a_damaged_link_is_named_when_a_chunk_decoded_from_it_fails() {
        // A frame-like link: two halves, d1 copying the first, d2 the second.
        let front = data(11, 6000);
        let back = data(12, 6000);
        let link = plain([front.clone(), back.clone()].concat(), false);
        let d1 = delta(edit(&front, 10), &link);
        let d2 = delta(edit(&back, 20), &link);
        let mut damaged = range(&[&link]);
        let mut bytes = link.bytes.clone();
        bytes[9000] ^= 0x40; // in the back half only
        damaged[0].stored = Box::leak(bytes.into_boxed_slice());
        // d1 reads only the front: it decodes and checks out; the link is answered
        // unchecked, and its own check refuses it.
        let got = decode_all(&range(&[&d1]), &damaged, &FpMap::default()).unwrap();
        assert_eq!(got[&d1.fp], (d1.raw.clone(), true));
        let mut r = RangeDecoder::new().unwrap();
        let links = r
            .decode(&range(&[&d1]), &damaged, &|_| None, |_, _| {})
            .unwrap();
        let bad: Vec<_> = links
            .iter()
            .filter(|(fp, raw)| !is_stored_chunk(raw, fp))
            .map(|(fp, _)| *fp)
            .collect();
        assert_eq!(bad, [link.fp]);
        // d2 reads the damage: refused, and the link is named as the chunk at fault, whether
        // it came in the answer or from the caller's held bases.
        let e = RangeDecoder::new()
            .unwrap()
            .decode(&range(&[&d2]), &damaged, &|_| None, |_, _| {})
            .unwrap_err();
        assert_eq!(e.chunk, Some(link.fp), "{e}");
        assert!(e.reason.contains(&to_hex(&d2.fp)), "{e}");
        let held: FpMap<_> = links.into_iter().collect();
        let e = RangeDecoder::new()
            .unwrap()
            .decode(
                &range(&[&d2]),
                &[],
                &|fp| held.get(fp).map(Vec::as_slice),
                |_, _| {},
            )
            .unwrap_err();
        assert_eq!(e.chunk, Some(link.fp), "{e}");
    }

    #[test]
    fn missing_or_wrong_base_and_loops_are_errors() {
        let a = plain(data(4, 9000), true);
        let b = delta(edit(&a.raw, 300), &a);
        let chunks = range(&[&b]);
        let e = decode_all(&chunks, &[], &FpMap::default()).unwrap_err();
        assert!(e.contains("not available"), "{e}");
        // Another chunk's bytes under the base's fingerprint: the check catches it.
        let wrong: FpMap<_> = [(a.fp, edit(&a.raw, 9))].into_iter().collect();
        let e = decode_all(&chunks, &[], &wrong).unwrap_err();
        assert!(e.contains(&to_hex(&b.fp)), "{e}");
        // Two deltas naming each other never resolve: a chain past the cap.
        let mut p = delta(edit(&a.raw, 50), &a);
        let q = delta(edit(&p.raw, 60), &p);
        p.bytes[..20].copy_from_slice(&q.fp);
        let e = decode_all(&range(&[&p, &q]), &[], &FpMap::default()).unwrap_err();
        assert!(e.contains("longer than"), "{e}");
        let e = outside_bases(&range(&[&p, &q]), &[], none).unwrap_err();
        assert!(e.reason.contains("longer than"), "{e}");
        // The same loop through fetched chunks.
        let e = outside_bases(&range(&[&q]), &range(&[&p]), none).unwrap_err();
        assert!(e.reason.contains("longer than"), "{e}");
        // A raw length no chunk can have is refused before room is made for it, for a whole
        // chunk and for a delta alike.
        for (c, raw_len) in [(&a, usize::MAX), (&b, MAX_CHUNK_RAW as usize + 1)] {
            let mut huge = range(&[c]);
            huge[0].raw_len = raw_len;
            let fetched = if c.codec == CODEC_DELTA {
                range(&[&a])
            } else {
                Vec::new()
            };
            let e = decode_all(&huge, &fetched, &FpMap::default()).unwrap_err();
            assert!(e.contains("exceeds the chunk limit"), "{e}");
        }
        // A truncated delta payload is refused, not a panic.
        let mut t = delta(edit(&a.raw, 70), &a);
        t.bytes.truncate(5);
        assert!(outside_bases(&range(&[&t]), &[], none).is_err());
        assert!(decode_all(&range(&[&t]), &[], &FpMap::default()).is_err());
        // A damaged whole chunk of the range (raw, or zstd that still decodes) is refused
        // before anything of its batch is handed out.
        let good = plain(data(5, 3000), false);
        let mut raw = plain(data(6, 5000), false);
        raw.bytes[100] ^= 0x10;
        let e = decode_all(&range(&[&good, &raw]), &[], &FpMap::default()).unwrap_err();
        assert!(
            e.contains(&to_hex(&raw.fp)) && e.contains("stored bytes"),
            "{e}"
        );
        let mut z = plain(data(7, 5000), true);
        z.fp[0] ^= 1; // as if another chunk's bytes sat at its place
        let e = decode_all(&range(&[&z]), &[], &FpMap::default()).unwrap_err();
        assert!(e.contains(&to_hex(&z.fp)), "{e}");
    }

    #[test]
    fn a_chain_answer_resolves_in_one_round() {
        // dict <- a <- b <- c (outside) <- d (in the range); f (in the range) names a.
        // `chains: true` answers c then b, a and dict in one round: nothing is missing after.
        let dict = plain(data(8, 12000), true);
        let a = delta(edit(&dict.raw, 40), &dict);
        let b = delta(edit(&a.raw, 900), &a);
        let c = delta(edit(&b.raw, 3000), &b);
        let d = delta(edit(&c.raw, 5000), &c);
        let f = delta(edit(&a.raw, 7000), &a);
        let chunks = range(&[&d, &f]);
        assert_eq!(outside_bases(&chunks, &[], none).unwrap(), vec![c.fp, a.fp]);
        let answer = range(&[&c, &a, &b, &dict]);
        assert!(outside_bases(&chunks, &answer, none).unwrap().is_empty());
        let got = decode_all(&chunks, &answer, &FpMap::default()).unwrap();
        for s in [&d, &f] {
            assert_eq!(got[&s.fp], (s.raw.clone(), true));
        }
        for s in [&c, &b, &a, &dict] {
            assert_eq!(
                got[&s.fp],
                (s.raw.clone(), false),
                "each link handed out once"
            );
        }
        // The dictionary held raw (`have`): the answer stops above it.
        let known = |fp: &Fingerprint| *fp == dict.fp;
        let answer = range(&[&c, &a, &b]);
        assert!(outside_bases(&chunks, &answer, known).unwrap().is_empty());
        let outside: FpMap<_> = [(dict.fp, dict.raw.clone())].into_iter().collect();
        let got = decode_all(&chunks, &answer, &outside).unwrap();
        assert_eq!(got[&d.fp].0, d.raw);
        assert!(!got.contains_key(&dict.fp), "a held base is not handed out");
        // A link held raw stops the decoding there, though the answer holds the links
        // below it: those are neither decoded nor handed out.
        let outside: FpMap<_> = [(b.fp, b.raw.clone()), (a.fp, a.raw.clone())]
            .into_iter()
            .collect();
        let answer = range(&[&c, &a, &b, &dict]);
        let got = decode_all(&chunks, &answer, &outside).unwrap();
        assert_eq!(got[&d.fp].0, d.raw);
        assert_eq!(got[&f.fp].0, f.raw);
        assert_eq!(got[&c.fp], (c.raw.clone(), false));
        assert!(!got.contains_key(&dict.fp) && !got.contains_key(&b.fp));
        // A chain answer that lacks a link (a server that stopped early): the next round
        // names it.
        let answer = range(&[&c, &a]);
        assert_eq!(
            outside_bases(&chunks, &answer, none).unwrap(),
            vec![b.fp, dict.fp]
        );
    }
}
