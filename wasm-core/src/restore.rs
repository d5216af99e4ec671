//! Restore verification: a `chunks/get` bundle decoded and every chunk checked against its
//! fingerprint in one pass, with each chunk's CRC-32 for the zip the page writes. Nothing
//! unverified leaves here.
//!
//! A restore asks for delta chunks as stored, with their base chains (`"deltas": "stored"`,
//! `"chains": true`, docs/API.md), so that what crosses the link is what the repository
//! stores, not the chunks' raw bytes: a bundle is then the requested chunks followed by the
//! chain links they need, and its deltas are decoded here against those (DARE §3.4 decoding,
//! [`crate::resemble::range`], as the search's workers do). A [`RestoreSession`] keeps what
//! its answers carried, as stored, so that the restore can name those chunks in the next
//! request's `have` and the server does not send them again as another delta's links.
//!
//! For a zip, a session also compresses each verified chunk into its deflate fragment
//! ([`crate::deflate`]), so the page writes compressed entries without compressing anything
//! and the raw bytes never leave the worker.

use crate::{
    compress, crc32,
    deflate::{self, Fragmenter},
    format::bundle::{decode_bundle, BundleEntry, Codec, MAX_BUNDLE_RAW},
    hash::{self, Fingerprint, FpMap, FpSet},
    resemble::range::{RangeChunk, RangeDecoder, RangeError},
};

/// A bundle whose chunks all verified: raw bytes back to back in bundle order.
pub struct VerifiedBundle {
    pub fps: Vec<Fingerprint>,
    pub lengths: Vec<u32>,
    pub crcs: Vec<u32>,
    pub raw: Vec<u8>,
    /// For a zip ([`RestoreSession::verify`] with `zip`): each chunk's deflate fragment.
    pub fragments: Option<Fragments>,
}

/// The verified chunks' deflate fragments ([`crate::deflate`]) back to back, chunk k
/// `lengths[k]` bytes of `bytes`.
pub struct Fragments {
    pub bytes: Vec<u8>,
    pub lengths: Vec<u32>,
}

/// Why a bundle was refused: `chunk` (index, fingerprint) is damaged, or the bundle itself is
/// malformed (`chunk` is `None`).
#[derive(Debug, PartialEq, Eq)]
pub struct Refused {
    pub chunk: Option<(usize, Fingerprint)>,
    pub reason: String,
}

/// Decodes every chunk of `bundle` (zstd capped at its raw length) and checks that each is
/// the stored chunk it was sent under ([`hash::first_not_stored_flat`]: the multi-buffer
/// plain SHA-1, the fingerprint where that differs). The first `requested` entries are the
/// answer; the rest are chain links their deltas need (not answered, and checked only
/// through the chunks decoded from them: a damaged link is named when one of those fails,
/// [`crate::resemble::range`]). A bundle of fewer entries is refused.
pub fn verify_bundle(bundle: &[u8], requested: usize) -> Result<VerifiedBundle, Refused> {
    let entries = answer_entries(bundle, requested)?;
    verify_entries(
        &entries,
        requested,
        &FpMap::default(),
        &mut Bases::default(),
    )
}

/// The entries of `bundle`, refused if fewer than `requested`.
fn answer_entries(bundle: &[u8], requested: usize) -> Result<Vec<BundleEntry<'_>>, Refused> {
    let entries = decode_bundle(bundle).map_err(|e| Refused {
        chunk: None,
        reason: e.to_string(),
    })?;
    if entries.len() < requested {
        return Err(Refused {
            chunk: None,
            reason: format!(
                "{} chunks answered for {requested} requested",
                entries.len()
            ),
        });
    }
    // The answer is laid out in one buffer of its raw bytes: a sum past any bundle's (it
    // could pass the 4 GiB of a wasm32 address) is refused before anything is allocated.
    let raw: u64 = entries[..requested].iter().map(|e| e.raw_len as u64).sum();
    if raw > MAX_BUNDLE_RAW {
        return Err(Refused {
            chunk: None,
            reason: format!("an answer of {raw} raw bytes; at most {MAX_BUNDLE_RAW}"),
        });
    }
    Ok(entries)
}

/// [`verify_bundle`] over parsed entries, with the chunks a session holds as further links
/// and the bases it decoded before.
fn verify_entries(
    entries: &[BundleEntry<'_>],
    requested: usize,
    held: &FpMap<Held>,
    bases: &mut Bases,
) -> Result<VerifiedBundle, Refused> {
    if entries.iter().any(|e| e.codec == Codec::Delta) {
        return verify_with_deltas(entries, requested, held, bases);
    }
    let entries = &entries[..requested];
    let total: usize = entries.iter().map(|e| e.raw_len as usize).sum();
    let mut raw = Vec::with_capacity(total);
    let mut dec = compress::Decompressor::new().map_err(|e| Refused {
        chunk: None,
        reason: e.to_string(),
    })?;
    let mut ranges = Vec::with_capacity(entries.len());
    let mut crcs = Vec::with_capacity(entries.len());
    for (k, e) in entries.iter().enumerate() {
        let bad = |reason: String| Refused {
            chunk: Some((k, e.fp)),
            reason,
        };
        let start = raw.len();
        match e.codec {
            Codec::Raw => {
                if e.payload.len() != e.raw_len as usize {
                    return Err(bad(format!(
                        "stored length {} != raw length {}",
                        e.payload.len(),
                        e.raw_len
                    )));
                }
                raw.extend_from_slice(e.payload);
            }
            Codec::Zstd => {
                raw.resize(start + e.raw_len as usize, 0);
                dec.decompress_into(compress::CODEC_ZSTD, e.payload, &mut raw[start..])
                    .map_err(|why| bad(format!("its zstd data does not decode ({why})")))?;
            }
            Codec::Delta => unreachable!("bundles with deltas are verified by verify_with_deltas"),
        }
        crcs.push(crc32::crc32(&raw[start..]));
        ranges.push((start, e.raw_len as usize));
    }
    let fps: Vec<u8> = entries.iter().flat_map(|e| e.fp).collect();
    if let Some((k, got)) = hash::first_not_stored_flat(&raw, &ranges, &fps) {
        return Err(Refused {
            chunk: Some((k, entries[k].fp)),
            reason: format!(
                "its bytes fingerprint as {}, not as its fingerprint",
                hash::to_hex(&got)
            ),
        });
    }
    Ok(VerifiedBundle {
        fps: entries.iter().map(|e| e.fp).collect(),
        lengths: entries.iter().map(|e| e.raw_len).collect(),
        crcs,
        raw,
        fragments: None,
    })
}

/// [`verify_bundle`] of a bundle holding delta chunks: the requested entries are decoded as
/// one range against the links after them ([`RangeDecoder`], which checks every chunk it
/// hands out), then laid out in request order (a repeated chunk in each of its places).
fn verify_with_deltas<'b>(
    entries: &[BundleEntry<'b>],
    requested: usize,
    held: &'b FpMap<Held>,
    bases: &mut Bases,
) -> Result<VerifiedBundle, Refused> {
    let as_range = |e: &BundleEntry<'b>| RangeChunk {
        fp: e.fp,
        codec: e.codec as u8,
        stored: e.payload,
        raw_len: e.raw_len as usize,
    };
    let (answer, links) = entries.split_at(requested);
    let chunks: Vec<RangeChunk<'_>> = answer.iter().map(as_range).collect();
    let fetched: Vec<RangeChunk<'_>> = links
        .iter()
        .map(as_range)
        .chain(held.iter().map(|(fp, h)| RangeChunk {
            fp: *fp,
            codec: h.codec,
            stored: &h.stored,
            raw_len: h.raw_len,
        }))
        .collect();
    let mut starts = Vec::with_capacity(requested);
    let mut places: FpMap<Vec<usize>> =
        FpMap::with_capacity_and_hasher(requested, Default::default());
    let mut total = 0usize;
    for (k, e) in answer.iter().enumerate() {
        starts.push(total);
        total += e.raw_len as usize;
        places.entry(e.fp).or_default().push(k);
    }
    let mut raw = vec![0u8; total];
    let mut filled = vec![false; requested];
    // The chunk at fault, with its place in the bundle (past the answer when it is not
    // among the requested ones).
    let refused = |e: RangeError| Refused {
        chunk: e.chunk.map(|fp| {
            let k = entries.iter().position(|x| x.fp == fp).unwrap_or(requested);
            (k, fp)
        }),
        reason: e.reason,
    };
    let mut dec = RangeDecoder::new().map_err(refused)?;
    let links = dec
        .decode(
            &chunks,
            &fetched,
            &|fp| bases.raw.get(fp).map(Vec::as_slice),
            |fp, bytes| {
                for &k in places.get(fp).into_iter().flatten() {
                    // The decoder hands out `raw_len` bytes for a chunk of the range; a length
                    // that differs leaves the place unfilled, which is refused below.
                    if bytes.len() == answer[k].raw_len as usize {
                        raw[starts[k]..][..bytes.len()].copy_from_slice(bytes);
                        filled[k] = true;
                    }
                }
            },
        )
        .map_err(refused)?;
    // The links the chains needed, kept for the next answers' chains: only ever used as
    // bases, whose every output is checked.
    for (fp, raw) in links {
        bases.keep(fp, raw);
    }
    if let Some(k) = filled.iter().position(|f| !f) {
        return Err(Refused {
            chunk: Some((k, answer[k].fp)),
            reason: "it was not decoded".into(),
        });
    }
    let crcs = answer
        .iter()
        .enumerate()
        .map(|(k, e)| crc32::crc32(&raw[starts[k]..][..e.raw_len as usize]))
        .collect();
    Ok(VerifiedBundle {
        fps: answer.iter().map(|e| e.fp).collect(),
        lengths: answer.iter().map(|e| e.raw_len).collect(),
        crcs,
        raw,
        fragments: None,
    })
}

/// Raw bytes of the chain links a session decoded, within [`Bases::BYTES`]: not checked
/// against their fingerprints (they only ever serve as bases, and every chunk decoded from
/// them is checked, [`crate::resemble::range`]), so that a restore hashes what it writes,
/// not the frames its chunks are sliced from. A base that many answers' chains need (a
/// frame, whose members come in many requests) is decoded once, not once per answer.
/// Dropped whole when full (a restore walks its plan in order, so the bases it needs next
/// are mostly the ones it needed last).
#[derive(Default)]
pub struct Bases {
    raw: FpMap<Vec<u8>>,
    bytes: usize,
}

impl Bases {
    pub const BYTES: usize = 32 << 20;

    fn keep(&mut self, fp: Fingerprint, raw: Vec<u8>) {
        if self.raw.contains_key(&fp) || raw.len() > Self::BYTES {
            return;
        }
        if self.bytes + raw.len() > Self::BYTES {
            self.raw.clear();
            self.bytes = 0;
        }
        self.bytes += raw.len();
        self.raw.insert(fp, raw);
    }
}

/// A chunk a [`RestoreSession`] keeps: as stored, verified when it arrived.
pub struct Held {
    codec: u8,
    stored: Vec<u8>,
    raw_len: usize,
}

/// One restore's answers, kept as stored (a few bytes a delta) so that a later answer's
/// deltas may name them as bases without the server sending them again: the restore lists
/// what a session holds in its requests' `have` (docs/API.md), and the chain walk stops there.
/// A session keeps whole answers or nothing (at most [`RestoreSession::HELD_BYTES`]), so every
/// chunk it holds has its own chain held too, and it never drops what it kept, so a `have`
/// made from what it answered stays true.
#[derive(Default)]
pub struct RestoreSession {
    held: FpMap<Held>,
    held_bytes: usize,
    bases: Bases,
    fragmenter: Option<Fragmenter>,
}

impl RestoreSession {
    /// Stored bytes a session keeps at most: a restore worker's memory beside its answers,
    /// for as long as the restore runs.
    pub const HELD_BYTES: usize = 16 << 20;

    pub fn new() -> Self {
        Self::default()
    }

    /// [`verify_bundle`], the chunks held decoding the answer's deltas too, and with `zip`
    /// each chunk's deflate fragment; also answers the fingerprints this answer added to what
    /// the session holds.
    pub fn verify(
        &mut self,
        bundle: &[u8],
        requested: usize,
        zip: bool,
    ) -> Result<(VerifiedBundle, Vec<Fingerprint>), Refused> {
        let entries = answer_entries(bundle, requested)?;
        let mut verified = verify_entries(&entries, requested, &self.held, &mut self.bases)?;
        if zip {
            let fragmenter = self.fragmenter.get_or_insert_with(Fragmenter::new);
            let (bytes, lengths) = deflate::fragments(fragmenter, &verified.raw, &verified.lengths);
            verified.fragments = Some(Fragments { bytes, lengths });
        }
        let mut fresh: Vec<&BundleEntry<'_>> = Vec::new();
        let mut seen = FpSet::default();
        for e in &entries {
            if !self.held.contains_key(&e.fp) && seen.insert(e.fp) {
                fresh.push(e);
            }
        }
        let bytes: usize = fresh.iter().map(|e| e.payload.len()).sum();
        if self.held_bytes + bytes > Self::HELD_BYTES {
            return Ok((verified, Vec::new()));
        }
        self.held_bytes += bytes;
        let kept = fresh.iter().map(|e| e.fp).collect();
        for e in fresh {
            self.held.insert(
                e.fp,
                Held {
                    codec: e.codec as u8,
                    stored: e.payload.to_vec(),
                    raw_len: e.raw_len as usize,
                },
            );
        }
        Ok((verified, kept))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::bundle::BundleWriter;
    use crate::resemble::testdata::{data, edit};

    fn sample() -> (Vec<Vec<u8>>, Vec<u8>) {
        let chunks: Vec<Vec<u8>> = (0..5u32)
            .map(|i| {
                (0..(1000 + i * 777))
                    .map(|j| (j * (i + 3) / 5) as u8)
                    .collect()
            })
            .collect();
        let mut w = BundleWriter::new();
        for (i, c) in chunks.iter().enumerate() {
            let fp = hash::fingerprint(c);
            if i % 2 == 0 {
                let z = zstd::bulk::compress(c, 3).unwrap();
                w.push(&fp, Codec::Zstd, c.len() as u32, &z);
            } else {
                w.push(&fp, Codec::Raw, c.len() as u32, c);
            }
        }
        (chunks, w.finish())
    }

    #[test]
    fn verifies_decodes_and_checksums_every_chunk() {
        let (chunks, bundle) = sample();
        let v = verify_bundle(&bundle, 5).unwrap();
        assert_eq!(v.raw, chunks.concat());
        assert_eq!(
            v.lengths,
            chunks.iter().map(|c| c.len() as u32).collect::<Vec<_>>()
        );
        assert_eq!(
            v.crcs,
            chunks.iter().map(|c| crc32::crc32(c)).collect::<Vec<_>>()
        );
        assert_eq!(
            v.fps,
            chunks
                .iter()
                .map(|c| hash::fingerprint(c))
                .collect::<Vec<_>>()
        );
    }

    #[test]
    fn names_the_damaged_chunk() {
        let (chunks, bundle) = sample();
        // Flip a byte in the payload of the second (raw) chunk.
        let at = 16
            + 32
            + {
                let z = zstd::bulk::compress(&chunks[0], 3).unwrap();
                z.len()
            }
            + 32
            + 10;
        let mut bad = bundle.clone();
        bad[at] ^= 1;
        let e = verify_bundle(&bad, 5).err().unwrap();
        assert_eq!(e.chunk, Some((1, hash::fingerprint(&chunks[1]))));
        assert!(e.reason.contains("fingerprint as"), "{}", e.reason);
        let e = verify_bundle(&bundle[..bundle.len() - 1], 5).err().unwrap();
        assert_eq!(e.chunk, None);
        let e = verify_bundle(&bundle, 6).err().unwrap();
        assert_eq!(e.chunk, None);
        assert!(e.reason.contains("5 chunks answered for 6"), "{}", e.reason);
    }

    #[test]
    fn refuses_a_chunk_whose_declared_length_is_not_its_own() {
        let c: Vec<u8> = (0..3000u32).map(|j| (j * 7 / 3) as u8).collect();
        let fp = hash::fingerprint(&c);
        let z = zstd::bulk::compress(&c, 3).unwrap();
        for declared in [c.len() - 1, c.len() + 1, 0] {
            for (codec, payload) in [(Codec::Raw, &c), (Codec::Zstd, &z)] {
                let mut w = BundleWriter::new();
                w.push(&fp, codec, declared as u32, payload);
                // Refused by the bundle's parser or the decoder, never handed out.
                assert!(
                    verify_bundle(&w.finish(), 1).is_err(),
                    "{codec:?} declared {declared}"
                );
            }
        }
    }

    #[test]
    fn refuses_an_answer_larger_than_a_bundle_before_decoding_it() {
        // 1 025 entries declaring 1 MiB each: 1 GiB and more, as a damaged or hostile answer
        // could declare (16 384 of them would pass 4 GiB, wrapping the sum on wasm32).
        let mut w = BundleWriter::new();
        for k in 0..1025u32 {
            let mut fp = [0u8; 20];
            fp[..4].copy_from_slice(&k.to_le_bytes());
            w.push(&fp, Codec::Zstd, 1 << 20, &[0x28]);
        }
        let Err(e) = verify_bundle(&w.finish(), 1025) else {
            panic!("an answer of 1 025 MiB verified");
        };
        assert_eq!(e.chunk, None, "{}", e.reason);
        assert!(e.reason.contains("raw bytes; at most"), "{}", e.reason);
    }

    fn delta_of(raw: &[u8], base: &[u8]) -> Vec<u8> {
        let mut e = crate::resemble::delta::DeltaEncoder::new(3).unwrap();
        e.encode(&hash::fingerprint(base), base, raw)
            .unwrap()
            .to_vec()
    }

    /// A bundle as a restore's `chunks/get` with chains answers it: `d2` (a delta on `d1`,
    /// itself a delta on the whole chunk `b`), `w` (whole), `d2` again, then the links `d1`
    /// and `b`. Returns the raw chunks in answer order and the bundle.
    fn chained() -> (Vec<Vec<u8>>, Vec<u8>) {
        let b = data(7, 40_000);
        let d1 = edit(&b, 1_000);
        let d2 = edit(&d1, 30_000);
        let w = data(8, 5_000);
        let fp = |c: &[u8]| hash::fingerprint(c);
        let mut wr = BundleWriter::new();
        let z = |c: &[u8]| zstd::bulk::compress(c, 3).unwrap();
        wr.push(&fp(&d2), Codec::Delta, d2.len() as u32, &delta_of(&d2, &d1));
        wr.push(&fp(&w), Codec::Zstd, w.len() as u32, &z(&w));
        wr.push(&fp(&d2), Codec::Delta, d2.len() as u32, &delta_of(&d2, &d1));
        wr.push(&fp(&d1), Codec::Delta, d1.len() as u32, &delta_of(&d1, &b));
        wr.push(&fp(&b), Codec::Zstd, b.len() as u32, &z(&b));
        (vec![d2.clone(), w, d2], wr.finish())
    }

    #[test]
    fn decodes_deltas_against_the_links_after_the_answer() {
        let (answer, bundle) = chained();
        let v = verify_bundle(&bundle, 3).unwrap();
        assert_eq!(v.raw, answer.concat());
        assert_eq!(
            v.fps,
            answer
                .iter()
                .map(|c| hash::fingerprint(c))
                .collect::<Vec<_>>()
        );
        assert_eq!(
            v.crcs,
            answer.iter().map(|c| crc32::crc32(c)).collect::<Vec<_>>()
        );
        // Fewer bytes cross than the chunks hold raw.
        assert!(bundle.len() * 4 < answer.iter().map(Vec::len).sum::<usize>());
    }

    #[test]
    fn refuses_a_damaged_delta_or_link_and_a_missing_link() {
        let (_, bundle) = chained();
        let entries = decode_bundle(&bundle).unwrap();
        let offset_of = |k: usize| entries[k].payload.as_ptr() as usize - bundle.as_ptr() as usize;
        // A byte of the first delta's frame; then of the link `d1`'s frame.
        for (k, blamed) in [(0usize, 0usize), (3, 3)] {
            let mut bad = bundle.clone();
            let at = offset_of(k) + entries[k].payload.len() - 3;
            bad[at] ^= 0x20;
            let e = verify_bundle(&bad, 3).err().unwrap();
            let (i, fp) = e.chunk.expect("a chunk is named");
            assert_eq!(fp, entries[blamed].fp, "{}", e.reason);
            assert!(i == blamed || entries[i].fp == fp, "{}", e.reason);
        }
        // Without the last link the chain cannot be decoded.
        let mut w = BundleWriter::new();
        for e in &entries[..4] {
            w.push(&e.fp, e.codec, e.raw_len, e.payload);
        }
        let e = verify_bundle(&w.finish(), 3).err().unwrap();
        assert!(e.reason.contains("not available"), "{}", e.reason);
        // At fault: the link whose base is missing (so the page can retry it checked).
        assert_eq!(e.chunk, Some((3, entries[3].fp)), "{}", e.reason);
    }

    #[test]
    fn a_session_decodes_a_later_answer_against_what_it_holds() {
        let b = data(7, 40_000);
        let d1 = edit(&b, 1_000);
        let d2 = edit(&d1, 30_000);
        let fp = |c: &[u8]| hash::fingerprint(c);
        let z = |c: &[u8]| zstd::bulk::compress(c, 3).unwrap();
        // First answer: d1 with its link b.
        let mut w = BundleWriter::new();
        w.push(&fp(&d1), Codec::Delta, d1.len() as u32, &delta_of(&d1, &b));
        w.push(&fp(&b), Codec::Zstd, b.len() as u32, &z(&b));
        let first = w.finish();
        let mut session = RestoreSession::new();
        let (v, kept) = session.verify(&first, 1, false).unwrap();
        assert_eq!(v.raw, d1);
        assert_eq!(kept, vec![fp(&d1), fp(&b)]);
        // Second answer: d2 without links (the request's `have` named d1).
        let mut w = BundleWriter::new();
        w.push(&fp(&d2), Codec::Delta, d2.len() as u32, &delta_of(&d2, &d1));
        let second = w.finish();
        let (v, kept) = session.verify(&second, 1, false).unwrap();
        assert_eq!(v.raw, d2);
        assert_eq!(kept, vec![fp(&d2)]);
        // Without the session, the same answer lacks its base.
        let e = verify_bundle(&second, 1).err().unwrap();
        assert!(e.reason.contains("not available"), "{}", e.reason);
        // A refused answer keeps nothing.
        let mut bad = second.clone();
        let n = bad.len();
        bad[n - 2] ^= 0x20;
        let mut fresh = RestoreSession::new();
        fresh.verify(&first, 1, false).unwrap();
        assert!(fresh.verify(&bad, 1, false).is_err());
        assert!(!fresh.held.contains_key(&fp(&d2)));
    }

    #[test]
    fn for_a_zip_every_chunk_comes_with_its_deflate_fragment() {
        let (chunks, bundle) = sample();
        let (v, _) = RestoreSession::new().verify(&bundle, 5, true).unwrap();
        assert_eq!(v.raw, chunks.concat());
        let f = v.fragments.expect("fragments for a zip");
        assert_eq!(f.lengths.len(), 5);
        let mut at = 0;
        for (k, c) in chunks.iter().enumerate() {
            let frag = &f.bytes[at..][..f.lengths[k] as usize];
            at += f.lengths[k] as usize;
            let stream = [frag, &deflate::END[..]].concat();
            assert_eq!(
                miniz_oxide::inflate::decompress_to_vec(&stream).unwrap(),
                *c,
                "chunk {k}"
            );
            // The same fragment whether the chunk came raw (odd k) or compressed.
            let mut alone = Vec::new();
            Fragmenter::new().push(c, &mut alone);
            assert_eq!(frag, &alone[..], "chunk {k}");
        }
        assert_eq!(at, f.bytes.len());
        let (v, _) = RestoreSession::new().verify(&bundle, 5, false).unwrap();
        assert!(v.fragments.is_none());
    }
}
