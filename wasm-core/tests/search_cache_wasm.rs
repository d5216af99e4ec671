//! The search workers' `ChunkCache` and its device cache file, inside Wasm (Node): a file
//! read back holds the same chunks and summaries, the file the cache writes in pieces
//! (`save`, then `saveChunks`) reads back the same, damage costs only what it touches, and
//! the budget keeps a prefix of the file.
#![cfg(target_arch = "wasm32")]

use wasm_bindgen_test::*;
use wasm_core::bindings::search::ChunkCache;
use wasm_core::hash::fingerprint;
use wasm_core::search::cache_file::{encode, Entry};
use wasm_core::search::Trigrams;

fn raws() -> Vec<Vec<u8>> {
    (0..9u8)
        .map(|i| {
            (0..1000 + 700 * i as usize)
                .map(|j| (j as u8) ^ i.wrapping_mul(37))
                .collect()
        })
        .collect()
}

/// A file of `raws`, every third chunk without a summary, the first named as a base.
fn file(raws: &[Vec<u8>], key: &str) -> Vec<u8> {
    let sums: Vec<Trigrams> = raws.iter().map(|r| Trigrams::of(r)).collect();
    let entries: Vec<Entry> = raws
        .iter()
        .zip(&sums)
        .enumerate()
        .map(|(i, (r, t))| Entry {
            fp: fingerprint(r),
            raw: r,
            named: if i == 0 { 5 } else { 0 },
            summary: (i % 3 != 2).then_some(t),
        })
        .collect();
    encode(key, &entries)
}

fn saved(cache: &mut ChunkCache, key: &str) -> Vec<u8> {
    let mut out = cache.save(key);
    loop {
        let piece = cache.save_chunks(3000.0);
        if piece.is_empty() {
            return out;
        }
        out.extend_from_slice(&piece);
    }
}

#[wasm_bindgen_test]
fn file_round_trips_through_the_cache() {
    let raws = raws();
    let fps: Vec<u8> = raws.iter().flat_map(|r| fingerprint(r)).collect();
    let mut cache = ChunkCache::new(1e9);
    assert_eq!(cache.load(&file(&raws, "repo"), "repo").unwrap(), 0);
    assert_eq!(cache.count(), raws.len() as u32);
    let mut want = Vec::new();
    for r in &raws {
        want.extend_from_slice(&(r.len() as u32).to_le_bytes());
        want.extend_from_slice(r);
    }
    assert_eq!(cache.raw_chunks(&fps), want);
    assert_eq!(cache.held_bases(8), fingerprint(&raws[0]).to_vec());
    let bytes = cache.bytes();
    let changes = cache.changes();

    // Written in pieces and read back: the same chunks, summaries and bases.
    let again = saved(&mut cache, "repo");
    assert_eq!(cache.changes(), changes, "writing changes nothing");
    let mut back = ChunkCache::new(1e9);
    assert_eq!(back.load(&again, "repo").unwrap(), 0);
    assert_eq!(back.raw_chunks(&fps), want);
    assert_eq!(
        back.bytes(),
        bytes,
        "summaries came back (they count in the budget)"
    );
    assert_eq!(back.held_bases(8), fingerprint(&raws[0]).to_vec());
    // The three chunks without a summary are summarised now; the others had theirs.
    assert_eq!(back.summarize(1e9), 0);
    assert!(back.bytes() > bytes);

    // Read in place (the worker reads the file into the cache's own buffer): the same.
    let mut in_place = ChunkCache::new(1e9);
    let at = in_place.file_buffer(again.len() as u32 + 7) as usize as *mut u8;
    // SAFETY: `file_buffer` answered the address of `again.len() + 7` bytes it owns.
    unsafe { std::ptr::copy_nonoverlapping(again.as_ptr(), at, again.len()) };
    assert_eq!(in_place.load_buffer(again.len() as u32, "repo").unwrap(), 0);
    assert_eq!(in_place.raw_chunks(&fps), want);
    assert_eq!(in_place.bytes(), bytes);

    // A chunk's byte changed: that chunk alone is left out.
    let mut bad = again.clone();
    let n = bad.len();
    bad[n - 10] ^= 1;
    let mut some = ChunkCache::new(1e9);
    assert_eq!(some.load(&bad, "repo").unwrap(), 1);
    assert_eq!(some.count(), raws.len() as u32 - 1);

    // Another repository's file, or damaged metadata: refused, the cache left empty.
    let mut other = ChunkCache::new(1e9);
    assert!(other.load(&again, "another").is_err());
    assert_eq!(other.count(), 0);
    let mut meta = again.clone();
    meta[20] ^= 1;
    assert!(other.load(&meta, "repo").is_err());
    assert_eq!(other.count(), 0);

    // A small budget keeps the file's first chunks that fit. The file's order is the
    // cache's map order, so the budget fits the largest chunk with its summary (6 600 + 1 024
    // bytes) whichever comes first, and not all of them (34 200 bytes).
    let mut small = ChunkCache::new(9000.0);
    small.load(&again, "repo").unwrap();
    assert!(small.count() > 0 && small.count() < raws.len() as u32);
    assert!(small.bytes() <= 9000.0);
}
