//! The device cache file: a search worker's decoded chunks and their trigram summaries,
//! kept in the browser's origin private file system between page loads, so that the first
//! search after a load scans from the device as a repeat search scans from memory.
//!
//! The layout is docs/SEARCH.md's "The device cache file": a header with the repository it
//! caches, a table of chunks (fingerprint, raw length, how many deltas named it as their base,
//! flags), the summaries of the chunks that have one, a CRC-32 of all of that, then the
//! chunks' raw bytes. The file is a cache, so a reader trusts nothing in it: the metadata must
//! pass the CRC and describe exactly the bytes there are ([`decode`] refuses the file
//! otherwise), and every chunk must be the stored chunk its fingerprint names
//! ([`crate::hash::is_stored_chunk`], the plain SHA-1 four chunks at a time first, as restore
//! checks a bundle); a chunk that is not is dropped with its summary and the rest are kept.

use crate::crc32::crc32;
use std::collections::HashSet;

use crate::hash::{not_stored_flat, Fingerprint, FINGERPRINT_LEN};
use crate::search::Trigrams;

const MAGIC: &[u8; 8] = b"DSCACHE2";
/// Fingerprint, raw length, named count, flags.
const ROW: usize = FINGERPRINT_LEN + 4 + 4 + 1;
/// The one flag read; bit 0 is unused and ignored (files written earlier may have it set).
const SUMMARISED: u8 = 2;

/// One chunk to write.
pub struct Entry<'a> {
    pub fp: Fingerprint,
    pub raw: &'a [u8],
    /// How many delta chunks seen so far named it as their base.
    pub named: u32,
    pub summary: Option<&'a Trigrams>,
}

/// One chunk read back: its raw bytes are `bytes[offset..offset + len]` of the decoded file.
pub struct LoadedChunk {
    pub fp: Fingerprint,
    pub offset: usize,
    pub len: usize,
    pub named: u32,
    pub summary: Option<Trigrams>,
}

/// A file read back: the chunks that passed their check, in the file's order.
pub struct Loaded {
    pub key: String,
    pub chunks: Vec<LoadedChunk>,
    /// Chunks dropped because their bytes are not the chunk their fingerprint names.
    pub dropped: u32,
}

#[derive(Debug, PartialEq, Eq)]
pub enum CacheFileError {
    /// Not a cache file of this format (or a file cut short before its header ends).
    Magic,
    /// Shorter or longer than its table says.
    Length,
    /// The metadata does not match its CRC-32.
    Crc,
    /// A summary's size does not follow from its chunk's length.
    Summary,
}

impl std::fmt::Display for CacheFileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CacheFileError::Magic => "not a search cache file of this format",
            CacheFileError::Length => "the file's length does not match its table",
            CacheFileError::Crc => "the file's table or summaries fail their CRC-32",
            CacheFileError::Summary => "a summary's size does not match its chunk",
        })
    }
}

/// The file of `entries`, caching repository `key`: [`encode_meta`], then each entry's raw
/// bytes in order.
pub fn encode(key: &str, entries: &[Entry]) -> Vec<u8> {
    let mut out = encode_meta(key, entries);
    for e in entries {
        out.extend_from_slice(e.raw);
    }
    out
}

/// The file of `entries` up to its CRC-32: what precedes the chunks' raw bytes, which a
/// writer may then append a few at a time.
pub fn encode_meta(key: &str, entries: &[Entry]) -> Vec<u8> {
    let summaries: usize = entries
        .iter()
        .filter_map(|e| e.summary)
        .map(|t| t.bytes())
        .sum();
    let mut out = Vec::with_capacity(8 + 4 + key.len() + 4 + entries.len() * ROW + summaries + 4);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(key.len() as u32).to_le_bytes());
    out.extend_from_slice(key.as_bytes());
    out.extend_from_slice(&(entries.len() as u32).to_le_bytes());
    for e in entries {
        out.extend_from_slice(&e.fp);
        out.extend_from_slice(&(e.raw.len() as u32).to_le_bytes());
        out.extend_from_slice(&e.named.to_le_bytes());
        out.push(if e.summary.is_some() { SUMMARISED } else { 0 });
    }
    for t in entries.iter().filter_map(|e| e.summary) {
        for w in t.words() {
            out.extend_from_slice(&w.to_le_bytes());
        }
    }
    let crc = crc32(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Reads `n` bytes at `*at`, advancing it.
fn take<'a>(bytes: &'a [u8], at: &mut usize, n: usize) -> Result<&'a [u8], CacheFileError> {
    let end = at.checked_add(n).ok_or(CacheFileError::Length)?;
    let s = bytes.get(*at..end).ok_or(CacheFileError::Length)?;
    *at = end;
    Ok(s)
}

fn u32_at(bytes: &[u8], at: &mut usize) -> Result<u32, CacheFileError> {
    Ok(u32::from_le_bytes(take(bytes, at, 4)?.try_into().unwrap()))
}

/// Reads a file [`encode`] wrote, checking it as the module documentation says.
pub fn decode(bytes: &[u8]) -> Result<Loaded, CacheFileError> {
    if bytes.get(..8) != Some(MAGIC) {
        return Err(CacheFileError::Magic);
    }
    let mut at = 8;
    let key_len = u32_at(bytes, &mut at)? as usize;
    let key = String::from_utf8_lossy(take(bytes, &mut at, key_len)?).into_owned();
    let n = u32_at(bytes, &mut at)? as usize;
    let table = take(
        bytes,
        &mut at,
        n.checked_mul(ROW).ok_or(CacheFileError::Length)?,
    )?;
    let rows: Vec<(Fingerprint, usize, u32, u8)> = table
        .chunks_exact(ROW)
        .map(|r| {
            let fp: Fingerprint = r[..FINGERPRINT_LEN].try_into().unwrap();
            let len = u32::from_le_bytes(r[20..24].try_into().unwrap()) as usize;
            let named = u32::from_le_bytes(r[24..28].try_into().unwrap());
            (fp, len, named, r[28])
        })
        .collect();
    // Sums in u64: a table that claims more than the address space fails the length checks.
    let summary_bytes: u64 = rows
        .iter()
        .filter(|r| r.3 & SUMMARISED != 0)
        .map(|r| Trigrams::words_for(r.1) as u64 * 8)
        .sum();
    let summary_bytes = usize::try_from(summary_bytes).map_err(|_| CacheFileError::Length)?;
    let words = take(bytes, &mut at, summary_bytes)?;
    let meta_end = at;
    let crc = u32_at(bytes, &mut at)?;
    if crc32(&bytes[..meta_end]) != crc {
        return Err(CacheFileError::Crc);
    }
    let raw_total: u64 = rows.iter().map(|r| r.1 as u64).sum();
    if (bytes.len() - at) as u64 != raw_total {
        return Err(CacheFileError::Length);
    }
    let mut ranges = Vec::with_capacity(n);
    let mut offset = at;
    for r in &rows {
        ranges.push((offset, r.1));
        offset += r.1;
    }
    // The plain SHA-1 four chunks at a time, the detecting fingerprint only where that
    // differs (hash::not_stored_flat).
    let names: Vec<u8> = rows.iter().flat_map(|r| r.0).collect();
    let bad: HashSet<usize> = not_stored_flat(bytes, &ranges, &names)
        .map(|(k, _)| k)
        .collect();
    let mut words = words
        .chunks_exact(8)
        .map(|w| u64::from_le_bytes(w.try_into().unwrap()));
    let mut chunks = Vec::with_capacity(n);
    let mut dropped = 0;
    for (k, ((fp, len, named, flags), (offset, _))) in rows.into_iter().zip(ranges).enumerate() {
        let summary = if flags & SUMMARISED != 0 {
            let w: Box<[u64]> = words.by_ref().take(Trigrams::words_for(len)).collect();
            Some(Trigrams::from_words(len, w).ok_or(CacheFileError::Summary)?)
        } else {
            None
        };
        if bad.contains(&k) {
            dropped += 1;
            continue;
        }
        chunks.push(LoadedChunk {
            fp,
            offset,
            len,
            named,
            summary,
        });
    }
    Ok(Loaded {
        key,
        chunks,
        dropped,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::{fingerprint, is_stored_chunk};

    fn chunk(seed: u32, len: usize) -> Vec<u8> {
        let mut x = seed.wrapping_mul(2_654_435_761).max(1);
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                b'a' + (x % 26) as u8
            })
            .collect()
    }

    fn sample() -> (Vec<Vec<u8>>, Vec<Trigrams>) {
        let raws: Vec<Vec<u8>> = [0, 1, 2, 513, 4096, 70_000, 5]
            .iter()
            .enumerate()
            .map(|(i, &len)| chunk(i as u32 + 1, len))
            .collect();
        let sums = raws.iter().map(|r| Trigrams::of(r)).collect();
        (raws, sums)
    }

    fn entries<'a>(raws: &'a [Vec<u8>], sums: &'a [Trigrams]) -> Vec<Entry<'a>> {
        raws.iter()
            .zip(sums)
            .enumerate()
            .map(|(i, (r, t))| Entry {
                fp: fingerprint(r),
                raw: r,
                named: i as u32 * 3,
                summary: (i % 3 != 1).then_some(t),
            })
            .collect()
    }

    #[test]
    fn round_trip() {
        let (raws, sums) = sample();
        let es = entries(&raws, &sums);
        let file = encode("http://x\0repo", &es);
        let back = decode(&file).unwrap();
        assert_eq!(back.key, "http://x\0repo");
        assert_eq!(back.dropped, 0);
        assert_eq!(back.chunks.len(), es.len());
        for (c, e) in back.chunks.iter().zip(&es) {
            assert_eq!(c.fp, e.fp);
            assert_eq!(&file[c.offset..c.offset + c.len], e.raw);
            assert!(is_stored_chunk(&file[c.offset..c.offset + c.len], &c.fp));
            assert_eq!(c.named, e.named);
            assert_eq!(
                c.summary.as_ref().map(|t| t.words().to_vec()),
                e.summary.map(|t| t.words().to_vec())
            );
        }
        let empty = encode("k", &[]);
        let back = decode(&empty).unwrap();
        assert!(back.chunks.is_empty());
    }

    #[test]
    fn a_damaged_chunk_is_dropped_alone() {
        let (raws, sums) = sample();
        let es = entries(&raws, &sums);
        let mut file = encode("k", &es);
        // The last chunk (5 bytes) ends the file; the one before is 70 000 bytes.
        let n = file.len();
        file[n - 5 - 100] ^= 1;
        let back = decode(&file).unwrap();
        assert_eq!(back.dropped, 1);
        let kept: Vec<Fingerprint> = back.chunks.iter().map(|c| c.fp).collect();
        let want: Vec<Fingerprint> = es
            .iter()
            .filter(|e| e.raw.len() != 70_000)
            .map(|e| e.fp)
            .collect();
        assert_eq!(kept, want);
    }

    #[test]
    fn damaged_metadata_or_length_refuses_the_file() {
        let (raws, sums) = sample();
        let file = encode("k", &entries(&raws, &sums));
        assert_eq!(
            decode(&file[..file.len() - 1]).err(),
            Some(CacheFileError::Length)
        );
        let mut longer = file.clone();
        longer.push(0);
        assert_eq!(decode(&longer).err(), Some(CacheFileError::Length));
        // A flipped bit in the table, then one in a summary.
        for at in [8 + 4 + 1 + 4 + 22, 8 + 4 + 1 + 4 + 7 * ROW + 3] {
            let mut bad = file.clone();
            bad[at] ^= 0x10;
            assert!(decode(&bad).is_err(), "byte {at}");
        }
        assert_eq!(decode(b"DSCACHE0").err(), Some(CacheFileError::Magic));
        assert_eq!(decode(b"").err(), Some(CacheFileError::Magic));
        assert_eq!(decode(b"DSCACHE2\x05").err(), Some(CacheFileError::Length));
        // A file of the chunk-wide summaries before is refused, not misread.
        assert_eq!(decode(b"DSCACHE1\x05").err(), Some(CacheFileError::Magic));
        // Every cut of the file is refused, never a panic.
        for cut in 0..file.len() - 70_000 {
            assert!(decode(&file[..cut]).is_err(), "cut {cut}");
        }
    }
}
