//! The worker-facing bindings, exercised inside Wasm (Node): ChunkEngine's batches cover
//! the input in order, match the chunker run on the whole buffer, and carry the right
//! fingerprints; fingerprintMany equals plain SHA-1 on ordinary data; the
//! multi-buffer SHA-1's simd128 lanes agree with the portable lanes.
#![cfg(target_arch = "wasm32")]

use wasm_bindgen_test::*;
use wasm_core::bindings::{fingerprint_many, ChunkEngine, RecipeHints};
use wasm_core::chunk::{chunk_all, make_chunker_or_default, test_bytes};

fn run_engine(kind: &str, data: &[u8], block: usize) -> Vec<(usize, usize)> {
    drive(
        ChunkEngine::new(kind, None, None, None, None).unwrap(),
        data,
        block,
    )
    .0
}

/// Feeds `data` to `e` in `block`-byte pieces, checking that the batches follow each other
/// without gaps and carry their chunks' fingerprints; the chunks and the engine.
fn drive(mut e: ChunkEngine, data: &[u8], block: usize) -> (Vec<(usize, usize)>, ChunkEngine) {
    let mut got = Vec::new();
    let mut take = |e: &ChunkEngine, n: u32| {
        let (off, len, fps) = (e.offsets(), e.lengths(), e.fingerprints());
        assert_eq!(off.len(), n as usize);
        for i in 0..off.len() {
            let (o, l) = (off[i] as usize, len[i] as usize);
            assert_eq!(
                o,
                got.last().map_or(0, |&(po, pl)| po + pl),
                "batches follow each other"
            );
            assert_eq!(
                &fps[20 * i..20 * i + 20],
                &wasm_core::hash::fingerprint(&data[o..o + l])
            );
            got.push((o, l));
        }
    };
    for b in data.chunks(block) {
        let n = e.push(b).unwrap();
        take(&e, n);
    }
    let n = e.finish().unwrap();
    take(&e, n);
    (got, e)
}

#[wasm_bindgen_test]
fn engine_with_recipe_hints_equals_plain_default() {
    use wasm_core::chunk::twostage::test_text;
    let v1 = test_text(71, 600_000);
    let other = test_bytes(72, 90_000);
    let mut v2 = v1.clone();
    v2.splice(200_000..200_000, b"an edit".iter().copied());
    v2.drain(400_000..400_500);
    // The previous version: two files chunked by the plain engine.
    let (mut fps, mut lens, mut counts) = (Vec::new(), Vec::new(), Vec::new());
    for f in [&v1, &other] {
        let cs = run_engine("default", f, 1 << 20);
        counts.push(cs.len() as u32);
        for (o, l) in cs {
            fps.extend_from_slice(&wasm_core::hash::fingerprint(&f[o..o + l]));
            lens.push(l as u32);
        }
    }
    let hints = RecipeHints::new(&fps, &lens, &counts).unwrap();
    for (data, file) in [(&v2, 0), (&v2, -1), (&v2, 1), (&other, 1), (&v1, 0)] {
        let want = run_engine("default", data, 1 << 20);
        for block in [5000, 1 << 20] {
            let (got, e) = drive(ChunkEngine::with_hints(&hints, file), data, block);
            assert_eq!(got, want, "file {file} block {block}");
            if file == 0 {
                assert!(
                    e.predicted() as usize * 10 >= want.len() * 7,
                    "{} of {}",
                    e.predicted(),
                    want.len()
                );
            }
        }
    }
    assert!(RecipeHints::new(&fps[..20], &lens, &counts).is_err());
}

#[wasm_bindgen_test]
fn engine_batches_match_whole_buffer_chunking() {
    let data = test_bytes(21, 700_000);
    for kind in ["default", "fastcdc", "fixed"] {
        let want = chunk_all(
            &make_chunker_or_default(kind, None, None, None, None).unwrap(),
            &data,
        );
        for block in [1000, 65_536, 1 << 20] {
            assert_eq!(run_engine(kind, &data, block), want, "{kind} block {block}");
        }
    }
}

#[wasm_bindgen_test]
fn simd_lanes_match_portable_lanes() {
    let buf = test_bytes(22, 300_000);
    let mut offsets = Vec::new();
    let mut lengths = Vec::new();
    let mut at = 0u32;
    for l in (0..1100u32).chain([4096, 8191, 65_536, 70_001]) {
        if at + l > buf.len() as u32 {
            at = 0;
        }
        offsets.push(at);
        lengths.push(l);
        at += l;
    }
    let ranges: Vec<(usize, usize)> = offsets
        .iter()
        .zip(&lengths)
        .map(|(&o, &l)| (o as usize, l as usize))
        .collect();
    let mut simd = vec![0u8; 20 * ranges.len()];
    wasm_core::hash::sha1_many_flat(&buf, &ranges, &mut simd);
    let mut portable = vec![[0u8; 20]; ranges.len()];
    wasm_core::hash::multi::sha1_many_portable(&buf, &ranges, &mut portable);
    assert_eq!(simd, portable.as_flattened());
    // The fingerprints the restore worker checks: plain SHA-1 here (no attack blocks).
    let fps = fingerprint_many(&buf, &offsets, &lengths).unwrap();
    assert_eq!(fps, simd);
}

/// SegmentChunker chained over segments (the worker-pool split of a large file) gives the
/// same chunks and SHA-1s as ChunkEngine("default") on the whole file, and NewChunkBatch
/// packs exactly the chosen chunks' bytes.
#[wasm_bindgen_test]
fn segment_chunker_chain_equals_engine() {
    use wasm_core::bindings::{NewChunkBatch, SegmentChunker};
    let mut data = wasm_core::chunk::twostage::test_text(31, 900_000);
    data[200_000..300_000].copy_from_slice(&test_bytes(32, 100_000));
    data[400_000..600_000].fill(0);
    let mut want_fps = Vec::new();
    let want = {
        let mut e = ChunkEngine::new("default", None, None, None, None).unwrap();
        let mut out = Vec::new();
        for b in data.chunks(1 << 20) {
            e.push(b).unwrap();
            out.extend(
                e.offsets()
                    .iter()
                    .zip(e.lengths())
                    .map(|(&o, l)| (o as usize, l as usize)),
            );
            want_fps.extend(e.fingerprints());
        }
        e.finish().unwrap();
        out.extend(
            e.offsets()
                .iter()
                .zip(e.lengths())
                .map(|(&o, l)| (o as usize, l as usize)),
        );
        want_fps.extend(e.fingerprints());
        out
    };
    for seg in [65_537usize, 100_000, 262_144, 1 << 20] {
        let mut entry = 0.0;
        let (mut got, mut fps) = (Vec::new(), Vec::new());
        let mut batch = NewChunkBatch::new(3).unwrap();
        for start in (0..data.len()).step_by(seg) {
            let stop = (start + seg).min(data.len());
            let mut s = SegmentChunker::new(data.len() as f64, start as f64, stop as f64).unwrap();
            let (from, to) = (s.read_from() as usize, s.read_to() as usize);
            for b in data[from..to].chunks(77_777) {
                s.push(b).unwrap();
            }
            s.scan().unwrap();
            let n = s.select(entry).unwrap();
            entry = s.exit().unwrap();
            s.hash();
            let (off, len) = (s.offsets(), s.lengths());
            assert_eq!(off.len(), n as usize);
            got.extend(
                off.iter()
                    .zip(&len)
                    .map(|(&o, &l)| (o as usize, l as usize)),
            );
            fps.extend(s.fingerprints());
            batch.clear();
            batch.add_from_segment(&s, &[0, n - 1]).unwrap();
            assert_eq!(batch.raw_lengths(), vec![len[0], len[n as usize - 1]]);
            let stored = batch.stored();
            let l0 = batch.stored_lengths()[0] as usize;
            let first =
                wasm_core::compress::decompress(batch.codecs()[0], &stored[..l0], len[0] as usize)
                    .unwrap();
            assert_eq!(
                first,
                &data[off[0] as usize..off[0] as usize + len[0] as usize]
            );
            assert_eq!(&batch.fps()[..20], &wasm_core::hash::fingerprint(&first));
        }
        assert_eq!(got, want, "segment {seg}");
        assert_eq!(fps, want_fps, "segment {seg}");
    }
}
