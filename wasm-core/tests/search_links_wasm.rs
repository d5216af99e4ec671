//! The search workers' delta bases, inside Wasm (Node): the links of a base chain that a job
//! fetched are kept in the chunk cache unchecked (they only serve as bases), checked when a
//! later job scans one as a chunk of its own, and a damaged one is dropped, from the cache's
//! own check or from a decode that names it, so the search asked again fetches it.
#![cfg(target_arch = "wasm32")]

use wasm_bindgen::JsValue;
use wasm_bindgen_test::*;
use wasm_core::bindings::search::{ChunkCache, ContainerScan, FetchedBases, SearchKeywords};
use wasm_core::format::bundle::{encode_bundle, BundleEntry, Codec};
use wasm_core::hash::{fingerprint, Fingerprint};
use wasm_core::resemble::delta::DeltaEncoder;

/// Bytes no delta can find elsewhere (xorshift), with `word` at `at`.
fn noise(seed: u64, len: usize, word: &[u8], at: usize) -> Vec<u8> {
    let mut x = seed | 1;
    let mut out: Vec<u8> = (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            b'a' + (x % 26) as u8
        })
        .collect();
    out[at..at + word.len()].copy_from_slice(word);
    out
}

/// One stored chunk of a job's range.
struct Stored {
    fp: Fingerprint,
    codec: u8,
    stored: Vec<u8>,
    raw_len: u32,
}

fn delta_of(base: &[u8], raw: &[u8]) -> Stored {
    let payload = DeltaEncoder::new(3)
        .unwrap()
        .encode(&fingerprint(base), base, raw)
        .unwrap()
        .to_vec();
    Stored {
        fp: fingerprint(raw),
        codec: 2,
        stored: payload,
        raw_len: raw.len() as u32,
    }
}

fn whole(raw: &[u8]) -> Stored {
    Stored {
        fp: fingerprint(raw),
        codec: 0,
        stored: raw.to_vec(),
        raw_len: raw.len() as u32,
    }
}

/// A job over `chunks` laid out back to back as one container range from offset 1000: the
/// cached ones are scanned from the cache, the bases the others need come from `bases`
/// (as `chunks/get` would answer: the asked ones first), then the rest is scanned. Answers
/// what `scan_cached` left and the scan's result.
fn job(
    cache: &mut ChunkCache,
    scan: &mut ContainerScan,
    chunks: &[&Stored],
    bases: &[&Stored],
) -> (Vec<u32>, Result<u32, JsValue>) {
    let fps: Vec<u8> = chunks.iter().flat_map(|c| c.fp).collect();
    let missing = scan
        .scan_cached(cache, &fps)
        .map_err(JsValue::from)
        .unwrap();
    let rest: Vec<&Stored> = missing.iter().map(|&k| chunks[k as usize]).collect();
    let mut data = Vec::new();
    let (mut offsets, mut stored_lens, mut codecs, mut raw_lens) = (vec![], vec![], vec![], vec![]);
    for c in &rest {
        offsets.push(1000.0 + data.len() as f64);
        data.extend_from_slice(&c.stored);
        stored_lens.push(c.stored.len() as u32);
        codecs.push(c.codec);
        raw_lens.push(c.raw_len);
    }
    let fps: Vec<u8> = rest.iter().flat_map(|c| c.fp).collect();
    let mut fetched = FetchedBases::new();
    let want = scan
        .outside_bases(
            cache,
            &data,
            1000.0,
            &fps,
            &offsets,
            &stored_lens,
            &codecs,
            &raw_lens,
            &fetched,
        )
        .map_err(JsValue::from)
        .unwrap();
    if !want.is_empty() {
        let entries: Vec<BundleEntry> = want
            .chunks_exact(20)
            .map(|fp| {
                bases
                    .iter()
                    .find(|b| b.fp == fp)
                    .expect("a base the test holds")
            })
            .map(|b| BundleEntry {
                fp: b.fp,
                codec: Codec::from_u8(b.codec).unwrap(),
                raw_len: b.raw_len,
                payload: &b.stored,
            })
            .collect();
        fetched
            .add(&encode_bundle(&entries), &want)
            .map_err(JsValue::from)
            .unwrap();
    }
    let r = scan
        .scan(
            cache,
            &data,
            1000.0,
            &fps,
            &offsets,
            &stored_lens,
            &codecs,
            &raw_lens,
            &fetched,
        )
        .map_err(JsValue::from);
    (missing, r)
}

fn message(v: JsValue) -> String {
    js_sys::Error::from(v).message().into()
}

fn held(cache: &ChunkCache, fp: &Fingerprint) -> bool {
    cache.raw_chunks(fp)[..4] != u32::MAX.to_le_bytes()
}

#[wasm_bindgen_test]
fn links_are_kept_unchecked_and_checked_when_scanned() {
    let kw = SearchKeywords::new("NEEDLE", false, 2048).unwrap();
    let base = noise(1, 20_000, b"NEEDLE", 15_000);
    // Reads only the base's front half: damage in the back half passes its decode.
    let front = [&base[..10_000], &noise(2, 10_000, b"xx", 0)[..]].concat();
    let link = whole(&base);
    let d = delta_of(&base, &front);

    // The link comes with the delta's answer, is kept as a base and answers no snippet
    // until checked; a job that lists it scans it from the cache (found: NEEDLE).
    let mut cache = ChunkCache::new(1e9);
    let mut scan = ContainerScan::new(&kw, false).unwrap();
    let (missing, r) = job(&mut cache, &mut scan, &[&d], &[&link]);
    assert_eq!((missing, r.unwrap()), (vec![0], 0));
    assert_eq!(cache.count(), 2);
    assert_eq!(cache.held_bases(8), link.fp.to_vec());
    assert!(
        !held(&cache, &link.fp),
        "an unchecked link answers no snippet"
    );
    let (missing, _) = job(&mut cache, &mut scan, &[&link], &[]);
    assert!(
        missing.is_empty(),
        "the cached link is scanned from the cache"
    );
    assert!(held(&cache, &link.fp), "checked now");
    assert_eq!(
        scan.stats().unwrap()[2],
        1.0,
        "NEEDLE found in the link scanned as a chunk"
    );

    // The link damaged in its back half: the delta still checks out, the link is kept, and
    // the job that lists it finds it fails its check: dropped and read from the range.
    let mut bad = link.stored.clone();
    bad[15_500] ^= 0x20;
    let bad_link = Stored {
        stored: bad,
        ..whole(&base)
    };
    let mut cache = ChunkCache::new(1e9);
    let mut scan = ContainerScan::new(&kw, false).unwrap();
    job(&mut cache, &mut scan, &[&d], &[&bad_link]).1.unwrap();
    assert_eq!(cache.count(), 2);
    let (missing, r) = job(&mut cache, &mut scan, &[&link], &[]);
    assert_eq!(
        missing,
        vec![0],
        "the damaged link is not scanned from the cache"
    );
    r.unwrap();
    assert!(
        held(&cache, &link.fp),
        "the range's own copy is kept instead"
    );

    // Damaged in its front half: a later job's delta that reads it from the cache fails,
    // the link is named and dropped, and the job asked again fetches it.
    let back = [&noise(3, 10_000, b"yy", 0)[..], &base[10_000..]].concat();
    let d_back = delta_of(&base, &back);
    let mut bad = link.stored.clone();
    bad[500] ^= 0x20;
    let bad_link = Stored {
        stored: bad,
        ..whole(&base)
    };
    let mut cache = ChunkCache::new(1e9);
    let mut scan = ContainerScan::new(&kw, false).unwrap();
    job(&mut cache, &mut scan, &[&d_back], &[&bad_link])
        .1
        .unwrap();
    let e = job(&mut cache, &mut scan, &[&d], &[&link]).1.unwrap_err();
    let m = message(e);
    assert!(
        m.starts_with("a cached delta base was damaged and is dropped"),
        "{m}"
    );
    assert!(m.contains(&wasm_core::hash::to_hex(&link.fp)), "{m}");
    assert_eq!(cache.held_bases(8), Vec::<u8>::new(), "dropped");
    let mut scan = ContainerScan::new(&kw, false).unwrap();
    let (missing, r) = job(&mut cache, &mut scan, &[&d], &[&link]);
    assert_eq!(
        (missing, r.unwrap()),
        (vec![0], 0),
        "fetched again, the delta decodes"
    );
}

#[wasm_bindgen_test]
fn held_bases_come_most_named_first_up_to_the_limit() {
    let kw = SearchKeywords::new("NEEDLE", false, 2048).unwrap();
    // Bases named by three, one and two deltas of one job's range (each base a link the job
    // fetched), and a base named by a delta but no longer held.
    let bases: Vec<Vec<u8>> = (0..4).map(|i| noise(21 + 2 * i, 8_000, b"x", 0)).collect();
    let named = [3usize, 1, 2, 1];
    let mut deltas = Vec::new();
    for (i, (b, &n)) in bases.iter().zip(&named).enumerate() {
        for k in 0..n {
            // Odd seeds, all different (the generator's seed is made odd).
            let tail = noise(101 + 2 * (8 * i + k) as u64, 500, b"y", 0);
            deltas.push(delta_of(b, &[&b[..6_000], &tail[..]].concat()));
        }
    }
    let links: Vec<Stored> = bases.iter().map(|b| whole(b)).collect();
    let mut cache = ChunkCache::new(1e9);
    let mut scan = ContainerScan::new(&kw, false).unwrap();
    let chunks: Vec<&Stored> = deltas.iter().collect();
    let (_, r) = job(
        &mut cache,
        &mut scan,
        &chunks,
        &links.iter().collect::<Vec<_>>(),
    );
    r.unwrap();
    // The base named once but no longer held is given back.
    assert!(cache.retain(&[&links[0].fp[..], &links[1].fp[..], &links[2].fp[..]].concat()) > 0.0);
    let order = |max| -> Vec<Fingerprint> {
        cache
            .held_bases(max)
            .chunks_exact(20)
            .map(|fp| fp.try_into().unwrap())
            .collect()
    };
    assert_eq!(order(8), vec![links[0].fp, links[2].fp, links[1].fp]);
    assert_eq!(order(2), vec![links[0].fp, links[2].fp]);
    assert_eq!(order(0), Vec::<Fingerprint>::new());
}

#[wasm_bindgen_test]
fn the_device_file_takes_the_scanned_chunks_and_no_link() {
    let kw = SearchKeywords::new("NEEDLE", false, 2048).unwrap();
    // Two links a job fetched: one damaged in the half its delta does not read (so the
    // delta checks out and the link is kept unchecked), one sound.
    let base = noise(1, 20_000, b"NEEDLE", 15_000);
    let d = delta_of(
        &base,
        &[&base[..10_000], &noise(2, 10_000, b"xx", 0)[..]].concat(),
    );
    let mut bad = whole(&base).stored;
    bad[15_500] ^= 0x20;
    let bad_link = Stored {
        stored: bad,
        ..whole(&base)
    };
    let base2 = noise(5, 20_000, b"NEEDLE", 100);
    let d2 = delta_of(
        &base2,
        &[&base2[..10_000], &noise(7, 10_000, b"zz", 0)[..]].concat(),
    );
    let link2 = whole(&base2);
    let mut cache = ChunkCache::new(1e9);
    let mut scan = ContainerScan::new(&kw, false).unwrap();
    job(&mut cache, &mut scan, &[&d, &d2], &[&bad_link, &link2])
        .1
        .unwrap();
    assert_eq!(cache.count(), 4);
    assert!(
        !held(&cache, &link2.fp),
        "unchecked until the file takes it"
    );

    let mut file = cache.save("repo");
    loop {
        let piece = cache.save_chunks(3000.0);
        if piece.is_empty() {
            break;
        }
        file.extend_from_slice(&piece);
    }
    assert_eq!(cache.count(), 4, "the links stay in memory, as bases");
    let mut back = ChunkCache::new(1e9);
    back.load(&file, "repo").map_err(JsValue::from).unwrap();
    // Links no file names leave the cache at the next page load (it keeps the chunks the
    // versions name), so the file does not carry them, damaged or not.
    assert_eq!(back.count(), 2, "only the chunks the job scanned");
    assert!(held(&back, &d.fp) && held(&back, &d2.fp));
    assert!(!held(&back, &link2.fp) && !held(&back, &bad_link.fp));
}
