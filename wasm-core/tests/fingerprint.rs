//! The chunk fingerprint against the RustCrypto `sha1` crate (ordinary data: identical) and
//! on the SHAttered pair (two PDFs with one SHA-1: distinct fingerprints). Runs natively
//! and in Wasm (Node, via wasm-bindgen-test).
use sha1::Digest;
use std::collections::HashSet;
use wasm_core::chunk::pipeline::ChunkPipeline;
use wasm_core::chunk::{make_chunker_or_default, test_bytes};
use wasm_core::hash::{
    confirm_flat, fingerprint, fingerprint_many, fingerprint_many_flat, first_not_stored_flat,
    is_stored_chunk, lookup_keys_flat, Fingerprint, Fingerprinter,
};

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

/// The SHAttered PDFs (Stevens et al. 2017): equal up to byte 192, different collision
/// blocks from byte 192 to 320, equal again after; equal SHA-1.
static SHATTERED_1: &[u8] = include_bytes!("../testdata/shattered-1.pdf");
static SHATTERED_2: &[u8] = include_bytes!("../testdata/shattered-2.pdf");

fn sha1_plain(m: &[u8]) -> Fingerprint {
    sha1::Sha1::digest(m).into()
}

/// xorshift64: deterministic lengths without a dev-dependency.
fn lengths(seed: u64, n: usize, max: usize) -> Vec<usize> {
    let mut s = seed | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s % (max as u64 + 1)) as usize
        })
        .collect()
}

#[test]
fn ordinary_data_fingerprints_are_plain_sha1() {
    let data = test_bytes(5, 200_001);
    let mut lens = lengths(9, 40, 200_000);
    lens.extend([0, 1, 55, 56, 63, 64, 65, 119, 120, 128, 200_000]);
    for (i, &len) in lens.iter().enumerate() {
        let at = (i * 7919) % (data.len() - len + 1);
        let m = &data[at..at + len];
        assert_eq!(fingerprint(m), sha1_plain(m), "len {len} at {at}");
        let (fp, attacked) = {
            let mut f = Fingerprinter::new();
            f.update(&m[..len / 3]);
            f.update(&m[len / 3..]);
            f.finish_checked()
        };
        assert_eq!(fp, sha1_plain(m), "streamed, len {len}");
        assert!(!attacked, "len {len}: ordinary data reported as an attack");
    }
}

#[test]
fn batches_are_plain_sha1_on_ordinary_data() {
    let buf = test_bytes(6, 1 << 20);
    let lens = lengths(11, 300, 20_000);
    let mut ranges = Vec::new();
    let mut at = 0;
    for l in lens {
        if at + l > buf.len() {
            at = 0;
        }
        ranges.push((at, l));
        at += l;
    }
    let mut out = vec![[0u8; 20]; ranges.len()];
    fingerprint_many(&buf, &ranges, &mut out);
    let mut flat = vec![0u8; 20 * ranges.len()];
    fingerprint_many_flat(&buf, &ranges, &mut flat);
    assert_eq!(out.as_flattened(), &flat[..]);
    for (i, &(o, l)) in ranges.iter().enumerate() {
        assert_eq!(out[i], sha1_plain(&buf[o..o + l]), "chunk {i} len {l}");
    }
    // The worker's pipeline (chunker + batch fingerprints) on ordinary data.
    let mut p =
        ChunkPipeline::new(make_chunker_or_default("default", None, None, None, None).unwrap());
    let mut checked = 0;
    let mut check = |p: &ChunkPipeline, n: usize| {
        let base = p.offsets().first().copied().unwrap_or(0) as usize;
        for k in 0..n {
            let o = p.offsets()[k] as usize - base;
            let l = p.lengths()[k] as usize;
            let start = base + o;
            assert_eq!(
                &p.fingerprints()[20 * k..20 * k + 20],
                &sha1_plain(&buf[start..start + l])
            );
        }
        checked += n;
    };
    for block in buf.chunks(100_000) {
        let n = p.push(block);
        check(&p, n);
    }
    let n = p.finish();
    check(&p, n);
    assert!(checked > 100, "{checked} chunks");
}

#[test]
fn shattered_pair_gets_two_fingerprints() {
    assert_ne!(SHATTERED_1, SHATTERED_2);
    assert_eq!(SHATTERED_1.len(), SHATTERED_2.len());
    // The attack: one SHA-1 for two files, and for any prefix that covers the collision blocks.
    assert_eq!(sha1_plain(SHATTERED_1), sha1_plain(SHATTERED_2));
    assert_eq!(
        sha1_plain(&SHATTERED_1[..320]),
        sha1_plain(&SHATTERED_2[..320])
    );

    for len in [320, 1000, 8192, SHATTERED_1.len()] {
        let (a, b) = (&SHATTERED_1[..len], &SHATTERED_2[..len]);
        let (fa, attacked_a) = {
            let mut f = Fingerprinter::new();
            f.update(a);
            f.finish_checked()
        };
        let (fb, attacked_b) = {
            let mut f = Fingerprinter::new();
            f.update(b);
            f.finish_checked()
        };
        assert!(
            attacked_a && attacked_b,
            "prefix {len}: attack not detected"
        );
        assert_ne!(
            fa, fb,
            "prefix {len}: one fingerprint for two different byte strings"
        );
        assert_ne!(
            fa,
            sha1_plain(a),
            "prefix {len}: fingerprint is the colliding SHA-1"
        );
        assert_ne!(
            fb,
            sha1_plain(b),
            "prefix {len}: fingerprint is the colliding SHA-1"
        );
        assert_eq!(fingerprint(a), fa);
        assert_eq!(fingerprint(b), fb);
    }
}

/// The read check (plain SHA-1 first, the fingerprint where that differs) against the
/// fingerprint itself: it accepts exactly the bytes whose fingerprint is the name, on
/// ordinary data, on the SHAttered pair named by their safe hashes, and in batches.
#[test]
fn reads_accept_exactly_the_stored_chunk() {
    let data = test_bytes(11, 300_000);
    let mut ranges: Vec<(usize, usize)> = Vec::new();
    let mut at = 0;
    for len in lengths(12, 37, 9000) {
        ranges.push((at, len));
        at += len;
    }
    let fps: Vec<Fingerprint> = ranges
        .iter()
        .map(|&(o, l)| fingerprint(&data[o..o + l]))
        .collect();
    for (k, &(o, l)) in ranges.iter().enumerate() {
        assert!(is_stored_chunk(&data[o..o + l], &fps[k]));
        // Another chunk's name, or the bytes one bit off: refused, as by the fingerprint.
        let other = fps[(k + 1) % fps.len()];
        assert_eq!(
            is_stored_chunk(&data[o..o + l], &other),
            fingerprint(&data[o..o + l]) == other
        );
        let mut flipped = data[o..o + l].to_vec();
        if let Some(b) = flipped.first_mut() {
            *b ^= 1;
            assert!(!is_stored_chunk(&flipped, &fps[k]));
        }
    }
    let flat: Vec<u8> = fps.iter().flatten().copied().collect();
    assert_eq!(first_not_stored_flat(&data, &ranges, &flat), None);
    // A wrong chunk in the batch is named with its fingerprint, the first one only.
    let mut wrong = flat.clone();
    wrong[5 * 20..6 * 20].copy_from_slice(&fps[6]);
    wrong[9 * 20..10 * 20].copy_from_slice(&fps[2]);
    let (o, l) = ranges[5];
    assert_eq!(
        first_not_stored_flat(&data, &ranges, &wrong),
        Some((5, fingerprint(&data[o..o + l])))
    );

    // The SHAttered pair, stored under their safe hashes: each is accepted under its own
    // name only, although both have one plain SHA-1.
    let (a, b) = (&SHATTERED_1[..8192], &SHATTERED_2[..8192]);
    let (fa, fb) = (fingerprint(a), fingerprint(b));
    assert!(is_stored_chunk(a, &fa) && is_stored_chunk(b, &fb));
    assert!(!is_stored_chunk(a, &fb) && !is_stored_chunk(b, &fa));
    // Why only the names of stored chunks may be checked so: the pair's shared plain SHA-1,
    // a name ingest never stores (422 `fingerprint_mismatch`), passes for either.
    assert!(is_stored_chunk(a, &sha1_plain(b)) && is_stored_chunk(b, &sha1_plain(a)));
    let pair = [a, b].concat();
    let ranges = [(0, a.len()), (a.len(), b.len())];
    assert_eq!(
        first_not_stored_flat(&pair, &ranges, &[fa, fb].concat()),
        None
    );
    assert_eq!(
        first_not_stored_flat(&pair, &ranges, &[fa, fa].concat()),
        Some((1, fb))
    );
}

/// The worker's hybrid (web/src/worker/settle.ts) over one batch of a pipeline: chunks whose
/// lookup key is known keep it; the others are confirmed and passed on unless their
/// fingerprint is known. Returns the batch's names and the indices passed on.
fn settle(
    p: &mut ChunkPipeline,
    n: usize,
    known: &mut HashSet<Fingerprint>,
) -> (Vec<Fingerprint>, Vec<usize>) {
    let key = |p: &ChunkPipeline, i: usize| -> Fingerprint {
        p.fingerprints()[20 * i..20 * i + 20].try_into().unwrap()
    };
    let unknown: Vec<u32> = (0..n)
        .filter(|&i| !known.contains(&key(p, i)))
        .map(|i| i as u32)
        .collect();
    p.confirm(&unknown).unwrap();
    let fresh = unknown
        .iter()
        .map(|&i| i as usize)
        .filter(|&i| known.insert(key(p, i)))
        .collect();
    ((0..n).map(|i| key(p, i)).collect(), fresh)
}

/// One file through the hybrid: each chunk's `(offset, length, name, passed on)`.
fn back_up(
    data: &[u8],
    known: &mut HashSet<Fingerprint>,
) -> Vec<(usize, usize, Fingerprint, bool)> {
    let mut p =
        ChunkPipeline::new(make_chunker_or_default("default", None, None, None, None).unwrap());
    let mut out = Vec::new();
    let mut take = |p: &mut ChunkPipeline, n: usize, known: &mut HashSet<Fingerprint>| {
        let (names, fresh) = settle(p, n, known);
        for (k, name) in names.into_iter().enumerate() {
            out.push((
                p.offsets()[k] as usize,
                p.lengths()[k] as usize,
                name,
                fresh.contains(&k),
            ));
        }
    };
    for block in data.chunks(64 << 10) {
        let n = p.push(block);
        take(&mut p, n, known);
    }
    let n = p.finish();
    take(&mut p, n, known);
    out
}

/// The hybrid's oracle: every chunk ends up named by its fingerprint, whether passed on or
/// found known (under its plain SHA-1, equal to the fingerprint for ordinary chunks, or
/// under its fingerprint once confirmed). Returns how many were passed on.
fn check_names(data: &[u8], got: &[(usize, usize, Fingerprint, bool)]) -> usize {
    let mut covered = 0;
    for &(o, l, name, passed_on) in got {
        assert_eq!(o, covered);
        let c = &data[o..o + l];
        assert_eq!(
            name,
            fingerprint(c),
            "chunk at {o} (passed on: {passed_on})"
        );
        covered += l;
    }
    assert_eq!(covered, data.len());
    got.iter().filter(|c| c.3).count()
}

#[test]
fn hybrid_names_ordinary_data_by_fingerprint() {
    let v1 = test_bytes(21, 1_500_000);
    let mut v2 = v1.clone();
    v2.splice(700_000..700_100, test_bytes(22, 5000));
    let mut known = HashSet::new();
    let g1 = back_up(&v1, &mut known);
    assert_eq!(
        check_names(&v1, &g1),
        g1.len(),
        "first backup: every chunk is new"
    );
    // The next backup starts from the previous version's names (the hot cache).
    let mut known: HashSet<Fingerprint> = g1.iter().map(|c| c.2).collect();
    let g2 = back_up(&v2, &mut known);
    let new = check_names(&v2, &g2);
    assert!(
        new >= 1 && new < g2.len() / 4,
        "{new} of {} chunks new",
        g2.len()
    );
    for c in &g1 {
        assert_eq!(c.2, fingerprint(&v1[c.0..c.0 + c.1]));
    }
}

#[test]
fn hybrid_names_the_shattered_pair_apart() {
    // Two backups of one file: shattered-1, then shattered-2 (the e2e's case).
    let mut known = HashSet::new();
    let g1 = back_up(SHATTERED_1, &mut known);
    check_names(SHATTERED_1, &g1);
    let (o, l, f1, _) = g1[0];
    assert_eq!(o, 0);
    assert!(l >= 320, "first chunk holds the collision blocks");
    assert_ne!(
        f1,
        sha1_plain(&SHATTERED_1[..l]),
        "attacked chunk named by its SHA-1"
    );
    let mut hot: HashSet<Fingerprint> = g1.iter().map(|c| c.2).collect();
    let g2 = back_up(SHATTERED_2, &mut hot);
    assert_eq!(
        check_names(SHATTERED_2, &g2),
        1,
        "only the attacked chunk is new"
    );
    assert!(g2[0].3);
    assert_eq!(g2[0].2, fingerprint(&SHATTERED_2[..l]));
    assert_ne!(g2[0].2, f1);
    // Both files in one job: the second's first chunk has the first's key, and is still new.
    let g3 = back_up(SHATTERED_2, &mut known);
    assert_eq!(check_names(SHATTERED_2, &g3), 1);
    assert_eq!(g3[0].2, g2[0].2);
    // And again: nothing new, the attacked chunk found under its fingerprint.
    assert_eq!(
        check_names(SHATTERED_2, &back_up(SHATTERED_2, &mut known)),
        0
    );
    // Both attacked chunks in one batch, and the same chunk twice.
    let mut buf = SHATTERED_1[..l].to_vec();
    buf.extend_from_slice(&SHATTERED_2[..l]);
    let ranges = [(0, l), (l, l), (0, l)];
    let mut keys = vec![0u8; 60];
    lookup_keys_flat(&buf, &ranges, &mut keys);
    assert_eq!(keys[..20], keys[20..40], "the pair's keys collide");
    assert_eq!(confirm_flat(&buf, &ranges, &[0, 1, 2], &mut keys), Ok(3));
    assert_eq!(keys[..20], f1);
    assert_eq!(keys[20..40], g2[0].2);
    assert_eq!(keys[40..], f1);
    // Confirming again changes nothing; a bad index changes nothing either.
    assert_eq!(confirm_flat(&buf, &ranges, &[0, 1], &mut keys), Ok(0));
    assert!(confirm_flat(&buf, &ranges, &[0, 3], &mut keys).is_err());
    assert_eq!(keys[..20], f1);
}

/// The chunks a backup makes of each file: the first chunks carry the collision blocks and
/// have one SHA-1 (their lookup keys) but two fingerprints once confirmed, through the
/// worker's pipeline and the batch path.
#[test]
fn shattered_first_chunks_through_the_pipeline() {
    let chunks = |data: &[u8]| -> Vec<(usize, usize, Fingerprint)> {
        let mut p =
            ChunkPipeline::new(make_chunker_or_default("default", None, None, None, None).unwrap());
        let mut out = Vec::new();
        let mut take = |p: &mut ChunkPipeline, n: usize| {
            for k in 0..n {
                let (o, l) = (p.offsets()[k] as usize, p.lengths()[k] as usize);
                assert_eq!(
                    &p.fingerprints()[20 * k..20 * k + 20],
                    &sha1_plain(&data[o..o + l])
                );
            }
            let all: Vec<u32> = (0..n as u32).collect();
            let changed = p.confirm(&all).unwrap();
            assert_eq!(changed, usize::from(p.offsets().first() == Some(&0)));
            for k in 0..n {
                out.push((
                    p.offsets()[k] as usize,
                    p.lengths()[k] as usize,
                    p.fingerprints()[20 * k..20 * k + 20].try_into().unwrap(),
                ));
            }
        };
        for block in data.chunks(64 << 10) {
            let n = p.push(block);
            take(&mut p, n);
        }
        let n = p.finish();
        take(&mut p, n);
        out
    };
    let (c1, c2) = (chunks(SHATTERED_1), chunks(SHATTERED_2));
    let (o1, l1, f1) = c1[0];
    let (o2, l2, f2) = c2[0];
    assert_eq!((o1, l1), (o2, l2), "first chunks cut alike");
    assert!(l1 >= 320, "first chunk holds the collision blocks");
    let (a, b) = (&SHATTERED_1[..l1], &SHATTERED_2[..l2]);
    assert_eq!(
        sha1_plain(a),
        sha1_plain(b),
        "first chunks collide under SHA-1"
    );
    assert_ne!(f1, f2, "first chunks share a fingerprint");
    assert_eq!(f1, fingerprint(a));
    assert_eq!(f2, fingerprint(b));
    // Chunks after the collision blocks are ordinary data: plain SHA-1, shared by both files.
    for (x, y) in c1.iter().zip(&c2).skip(1) {
        assert_eq!(x, y);
        assert_eq!(x.2, sha1_plain(&SHATTERED_1[x.0..x.0 + x.1]));
    }
    // The batch path, both first chunks in one call.
    let mut buf = a.to_vec();
    buf.extend_from_slice(b);
    let mut out = vec![[0u8; 20]; 2];
    fingerprint_many(&buf, &[(0, l1), (l1, l2)], &mut out);
    assert_eq!(out, [f1, f2]);
}
