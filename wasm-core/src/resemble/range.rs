//! Decoding every chunk of one stored byte range, delta chunks included, for readers that
//! fetch containers themselves (the page's search workers; DARE §3.4 decoding).
//!
//! A delta chunk (codec 2) decodes only against the raw bytes of its base, which may sit in
//! the same range, in another container, or be a delta itself. A reader that scans ranges
//! does not want to walk chains through an index it does not have, so the work is split:
//! - [`outside_bases`] names the bases the range's deltas need and the range does not hold;
//!   the caller finds their raw bytes elsewhere (chunks it decoded before, or the server's
//!   `chunks/get`, which answers every chunk decoded whatever its chain);
//! - [`RangeDecoder::decode`] decodes the range's codec 0/1 chunks first, then its deltas
//!   round by round against bases decoded in the range or handed in, so a chain inside the
//!   range resolves in any storage order, and hands each chunk's raw bytes out exactly once.
//!
//! Every decoded delta is checked against its fingerprint, so a wrong base (a stale cache, a
//! corrupt range) is an error and never silently wrong bytes. A base that never becomes
//! available (missing, or a loop of deltas) is an error too.

use std::collections::{HashMap, HashSet};

use super::delta::{base_of, DeltaDecoder, CODEC_DELTA};
use crate::compress::Decompressor;
use crate::hash::{fingerprint, to_hex, Fingerprint};

/// One chunk of a stored range: its fingerprint, codec, stored bytes and raw length.
#[derive(Debug, Clone, Copy)]
pub struct RangeChunk<'a> {
    pub fp: Fingerprint,
    pub codec: u8,
    pub stored: &'a [u8],
    pub raw_len: usize,
}

/// The distinct bases that the delta chunks of `chunks` name and that `chunks` does not
/// hold, in first-named order.
pub fn outside_bases(chunks: &[RangeChunk<'_>]) -> Result<Vec<Fingerprint>, String> {
    let inside: HashSet<Fingerprint> = chunks.iter().map(|c| c.fp).collect();
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for c in chunks.iter().filter(|c| c.codec == CODEC_DELTA) {
        let b = base_of(c.stored).map_err(|e| format!("chunk {}: {e}", to_hex(&c.fp)))?;
        if !inside.contains(&b) && seen.insert(b) {
            out.push(b);
        }
    }
    Ok(out)
}

/// Reusable decoder of stored ranges (its zstd contexts live across ranges).
pub struct RangeDecoder {
    dec: Decompressor,
    delta: DeltaDecoder,
    deltas: u64,
}

impl RangeDecoder {
    pub fn new() -> Result<Self, String> {
        Ok(RangeDecoder {
            dec: Decompressor::new().map_err(|e| e.to_string())?,
            delta: DeltaDecoder::new().map_err(|e| e.to_string())?,
            deltas: 0,
        })
    }

    /// Delta chunks decoded so far.
    pub fn deltas(&self) -> u64 {
        self.deltas
    }

    /// Decodes every chunk of `chunks` and calls `emit` once per chunk with its raw bytes
    /// (codec 0/1 chunks in range order, then the deltas as their bases become available).
    /// `outside` holds the raw bytes of the bases [`outside_bases`] named (more is harmless).
    pub fn decode(
        &mut self,
        chunks: &[RangeChunk<'_>],
        outside: &HashMap<Fingerprint, Vec<u8>>,
        mut emit: impl FnMut(&Fingerprint, &[u8]),
    ) -> Result<(), String> {
        let named = |c: &RangeChunk<'_>| base_of(c.stored).map_err(|e| chunk_err(&c.fp, e));
        // Bases inside the range are kept once decoded; nothing else is copied.
        let mut wanted = HashSet::new();
        for c in chunks.iter().filter(|c| c.codec == CODEC_DELTA) {
            wanted.insert(named(c)?);
        }
        let mut held: HashMap<Fingerprint, Vec<u8>> = HashMap::new();
        let mut pending = Vec::new();
        for c in chunks {
            if c.codec == CODEC_DELTA {
                pending.push(c);
                continue;
            }
            let raw = self
                .dec
                .decompress(c.codec, c.stored, c.raw_len)
                .map_err(|e| chunk_err(&c.fp, e))?;
            if wanted.contains(&c.fp) {
                held.insert(c.fp, raw.to_vec());
            }
            emit(&c.fp, raw);
        }
        while !pending.is_empty() {
            let before = pending.len();
            let mut rest = Vec::new();
            for c in pending {
                let b = named(c)?;
                let Some(base) = held.get(&b).or_else(|| outside.get(&b)) else {
                    rest.push(c);
                    continue;
                };
                let raw = self
                    .delta
                    .decode(c.stored, &b, base, c.raw_len)
                    .map_err(|e| chunk_err(&c.fp, e))?;
                if fingerprint(&raw) != c.fp {
                    return Err(chunk_err(&c.fp, "delta decodes to other bytes"));
                }
                self.deltas += 1;
                emit(&c.fp, &raw);
                if wanted.contains(&c.fp) {
                    held.insert(c.fp, raw);
                }
            }
            if rest.len() == before {
                let c = rest[0];
                return Err(chunk_err(
                    &c.fp,
                    format!("delta base {} not available", to_hex(&named(c)?)),
                ));
            }
            pending = rest;
        }
        Ok(())
    }
}

fn chunk_err(fp: &Fingerprint, e: impl std::fmt::Display) -> String {
    format!("chunk {}: {e}", to_hex(fp))
}

#[cfg(test)]
mod tests {
    use super::super::delta::DeltaEncoder;
    use super::*;
    use crate::compress::{Compressor, CODEC_RAW};

    fn data(seed: u64, n: usize) -> Vec<u8> {
        let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                b"abcdefgh \n"[(x % 10) as usize]
            })
            .collect()
    }

    fn edit(base: &[u8], at: usize) -> Vec<u8> {
        let mut v = base.to_vec();
        v[at] ^= 0x55;
        v.insert(at / 2, b'!');
        v
    }

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

    fn decode_all(
        chunks: &[RangeChunk<'_>],
        outside: &HashMap<Fingerprint, Vec<u8>>,
    ) -> Result<HashMap<Fingerprint, Vec<u8>>, String> {
        let mut d = RangeDecoder::new().unwrap();
        let mut out = HashMap::new();
        d.decode(chunks, outside, |fp, raw| {
            assert!(
                out.insert(*fp, raw.to_vec()).is_none(),
                "a chunk emitted twice"
            );
        })?;
        Ok(out)
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
        assert_eq!(outside_bases(&chunks).unwrap(), vec![x.fp]);
        let outside: HashMap<_, _> = [(x.fp, x.raw.clone())].into();
        let got = decode_all(&chunks, &outside).unwrap();
        assert_eq!(got.len(), order.len());
        for s in order {
            assert_eq!(got[&s.fp], s.raw);
        }
        let mut r = RangeDecoder::new().unwrap();
        r.decode(&chunks, &outside, |_, _| {}).unwrap();
        assert_eq!(r.deltas(), 4);
    }

    #[test]
    fn missing_or_wrong_base_and_loops_are_errors() {
        let a = plain(data(4, 9000), true);
        let b = delta(edit(&a.raw, 300), &a);
        let chunks = range(&[&b]);
        let e = decode_all(&chunks, &HashMap::new()).unwrap_err();
        assert!(e.contains("not available"), "{e}");
        // Another chunk's bytes under the base's fingerprint: the check catches it.
        let wrong: HashMap<_, _> = [(a.fp, edit(&a.raw, 9))].into();
        let e = decode_all(&chunks, &wrong).unwrap_err();
        assert!(e.contains(&to_hex(&b.fp)), "{e}");
        // Two deltas naming each other never resolve.
        let mut p = delta(edit(&a.raw, 50), &a);
        let q = delta(edit(&p.raw, 60), &p);
        p.bytes[..20].copy_from_slice(&q.fp);
        let e = decode_all(&range(&[&p, &q]), &HashMap::new()).unwrap_err();
        assert!(e.contains("not available"), "{e}");
        assert!(outside_bases(&range(&[&p, &q])).unwrap().is_empty());
        // A truncated delta payload is refused, not a panic.
        let mut t = delta(edit(&a.raw, 70), &a);
        t.bytes.truncate(5);
        assert!(outside_bases(&range(&[&t])).is_err());
    }
}
