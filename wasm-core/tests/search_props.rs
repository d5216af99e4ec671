//! Property tests: DedupSearch (physical + logical phase) and the naive search give exactly
//! the matches of a brute-force scan of every reassembled file, on random deduplicated
//! corpora. Runs natively (`cargo test`) and in Wasm (`cargo test --target
//! wasm32-unknown-unknown`, Node).

mod common;

use common::Rng;
use std::collections::HashMap;

use wasm_core::hash::{fingerprint, Fingerprint};
use wasm_core::search::*;

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test;

/// Fewer rounds in Wasm (debug Wasm in Node is slower).
const ROUNDS: u64 = if cfg!(target_arch = "wasm32") {
    60
} else {
    3000
};

/// A deduplicated store: unique chunks plus files as lists of chunk indexes.
struct Corpus {
    chunks: Vec<Vec<u8>>,
    index: HashMap<Vec<u8>, usize>,
    files: Vec<Vec<usize>>,
}

impl Corpus {
    fn new() -> Self {
        Corpus {
            chunks: Vec::new(),
            index: HashMap::new(),
            files: Vec::new(),
        }
    }
    fn add(&mut self, c: Vec<u8>) -> usize {
        if let Some(&i) = self.index.get(&c) {
            return i;
        }
        self.chunks.push(c.clone());
        self.index.insert(c, self.chunks.len() - 1);
        self.chunks.len() - 1
    }
    fn file_bytes(&self, f: usize) -> Vec<u8> {
        self.files[f]
            .iter()
            .flat_map(|&c| self.chunks[c].iter().copied())
            .collect()
    }
}

fn filler(rng: &mut Rng, alphabet: &[u8], len: usize) -> Vec<u8> {
    (0..len).map(|_| *rng.pick(alphabet)).collect()
}

/// Random chunk of `len` bytes with keyword pieces planted: whole keywords inside, a
/// keyword prefix at the end, a keyword suffix at the start.
fn planted_chunk(rng: &mut Rng, alphabet: &[u8], kws: &[Vec<u8>], len: usize) -> Vec<u8> {
    let mut c = filler(rng, alphabet, len);
    for _ in 0..rng.below(3) {
        let k = rng.pick(kws);
        if k.len() <= len {
            let at = rng.below(len - k.len() + 1);
            c[at..at + k.len()].copy_from_slice(k);
        }
    }
    if rng.chance(50) {
        let k = rng.pick(kws);
        let s = rng.range(1, k.len()).min(len);
        c[len - s..].copy_from_slice(&k[..s]);
    }
    if rng.chance(50) {
        let k = rng.pick(kws);
        let s = rng.range(1, k.len()).min(len);
        c[..s].copy_from_slice(&k[k.len() - s..]);
    }
    c
}

/// `min_chunk`: every chunk but a file's last is at least this long (the rule that bounds
/// keywords); `min_chunk == 1` gives arbitrary chunking (short chunks anywhere).
fn random_corpus(
    rng: &mut Rng,
    alphabet: &[u8],
    kws: &[Vec<u8>],
    max_len: usize,
    min_chunk: usize,
) -> Corpus {
    let mut corpus = Corpus::new();
    let mut pool = Vec::new();
    let mut short = Vec::new();
    for _ in 0..rng.range(4, 24) {
        let len = rng.range(min_chunk.max(1), max_len * 3);
        let c = if rng.chance(10) {
            rng.pick(kws).clone() // a chunk that is exactly a keyword
        } else {
            planted_chunk(rng, alphabet, kws, len)
        };
        if c.len() >= min_chunk {
            pool.push(corpus.add(c));
        }
    }
    for _ in 0..rng.range(1, 6) {
        // Short chunks: keyword pieces or noise, 1..max_len bytes.
        let k = rng.pick(kws);
        let c = if rng.chance(60) {
            let a = rng.below(k.len());
            let b = rng.range(a + 1, k.len());
            k[a..b].to_vec()
        } else {
            let l = rng.range(1, max_len);
            filler(rng, alphabet, l)
        };
        short.push(corpus.add(c));
    }
    // Every split of every keyword across a boundary, in a file of its own.
    for k in kws {
        for s in 1..k.len() {
            if rng.chance(70) {
                let pad_a = rng.range(min_chunk.saturating_sub(s), max_len);
                let mut a = filler(rng, alphabet, pad_a);
                a.extend_from_slice(&k[..s]);
                let mut b = k[s..].to_vec();
                let pad_b = rng.range(0, max_len);
                b.extend(filler(rng, alphabet, pad_b));
                let (ia, ib) = (corpus.add(a), corpus.add(b));
                pool.push(ia);
                pool.push(ib);
                corpus.files.push(vec![ia, ib]);
            }
        }
    }
    let long_pool: Vec<usize> = pool
        .iter()
        .copied()
        .filter(|&i| corpus.chunks[i].len() >= min_chunk)
        .collect();
    for _ in 0..rng.range(3, 30) {
        let mut f = Vec::new();
        for _ in 0..rng.range(0, 8) {
            if min_chunk <= 1 && rng.chance(30) {
                f.push(*rng.pick(&short));
            } else if let Some(&last) = f.last().filter(|_| rng.chance(15)) {
                f.push(last); // the same chunk twice in a row
            } else {
                f.push(*rng.pick(&long_pool));
            }
        }
        if rng.chance(40) {
            f.push(*rng.pick(&short));
        }
        corpus.files.push(f);
    }
    corpus
}

fn brute_force(corpus: &Corpus, kws: &[Vec<u8>], files_only: bool) -> Vec<Match> {
    let mut out = Vec::new();
    for f in 0..corpus.files.len() {
        let data = corpus.file_bytes(f);
        for (k, kw) in kws.iter().enumerate() {
            for o in 0..data.len() {
                if data[o..].starts_with(kw) {
                    out.push(Match {
                        file: f as u64,
                        keyword: k as u32,
                        offset: o as u64,
                    });
                    if files_only {
                        break;
                    }
                }
            }
        }
    }
    out.sort();
    out
}

fn recipes(corpus: &Corpus, fps: &[Fingerprint]) -> Vec<(u64, Vec<ChunkRef>)> {
    corpus
        .files
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let r = f
                .iter()
                .map(|&c| ChunkRef::new(fps[c], corpus.chunks[c].len() as u64))
                .collect();
            (i as u64, r)
        })
        .collect()
}

#[derive(Default)]
struct Totals {
    matches: u64,
    tiny_records: u64,
    infix_lists: u64,
    tiny_lookups: u64,
    ruled_out: u64,
}

/// Runs DedupSearch and the naive search in both modes and compares with brute force.
fn check(corpus: &Corpus, kws: &[Vec<u8>], max_len: usize, what: &str, totals: &mut Totals) {
    let dict = Dictionary::new(kws.to_vec(), max_len).unwrap();
    let fps: Vec<Fingerprint> = corpus.chunks.iter().map(|c| fingerprint(c)).collect();
    let files = recipes(corpus, &fps);
    for mode in [Mode::AllMatches, Mode::FilesOnly] {
        let want = brute_force(corpus, kws, mode == Mode::FilesOnly);
        // Physical phase in shuffled-ish order: reverse storage order.
        let chunks = fps
            .iter()
            .zip(&corpus.chunks)
            .rev()
            .map(|(f, c)| (*f, &c[..]));
        let (got, db, tiny) = search(&dict, chunks, &files, mode);
        if got != want {
            let missing: Vec<_> = want.iter().filter(|m| !got.contains(m)).collect();
            let extra: Vec<_> = got.iter().filter(|m| !want.contains(m)).collect();
            panic!(
                "{what} {mode:?}: DedupSearch differs.\nkeywords {:?}\nmissing {missing:?}\nextra {extra:?}\nfiles {:?}",
                kws.iter().map(|k| String::from_utf8_lossy(k)).collect::<Vec<_>>(),
                missing
                    .iter()
                    .chain(&extra)
                    .map(|m| corpus.files[m.file as usize]
                        .iter()
                        .map(|&c| String::from_utf8_lossy(&corpus.chunks[c]).into_owned())
                        .collect::<Vec<_>>())
                    .collect::<Vec<_>>()
            );
        }
        // The same through the byte encoding, as the workers hand the records over.
        let db2 = ResultDb::decode(&db.encode()).unwrap();
        let mut encoded = Vec::new();
        for t in tiny.records() {
            t.encode(&mut encoded);
        }
        let mut tiny2 = MemTinyStore::new();
        tiny2.add_encoded(&encoded).unwrap();
        assert_eq!(
            tiny2.len(),
            tiny.len(),
            "{what}: tiny records lost in the encoding"
        );
        let mut lp = LogicalPhase::new(&dict, mode);
        let mut got2 = Vec::new();
        for (id, r) in &files {
            lp.search_file(&db2, *id, r, &mut tiny2, &mut got2);
        }
        // Each file's matches come in order of offset, then keyword (the page lists them so).
        for w in got2.windows(2) {
            if w[0].file == w[1].file {
                assert!(
                    (w[0].offset, w[0].keyword) < (w[1].offset, w[1].keyword),
                    "{what} {mode:?}: out of order: {w:?}"
                );
            }
        }
        got2.sort();
        assert_eq!(got2, want, "{what} {mode:?}: via the encoding");
        totals.tiny_lookups += tiny2.lookups;

        // The same through the page's binding: the recipes held as `FileRecipes`, every
        // file walked in one call.
        #[cfg(target_arch = "wasm32")]
        {
            use wasm_core::bindings::search::{FileRecipes, RecipeSearch, SearchKeywords};
            let ids: Vec<u32> = files.iter().map(|(id, _)| *id as u32).collect();
            let counts: Vec<u32> = files.iter().map(|(_, r)| r.len() as u32).collect();
            let fps: Vec<u8> = files
                .iter()
                .flat_map(|(_, r)| r.iter().flat_map(|c| c.fp))
                .collect();
            let lengths: Vec<u32> = files
                .iter()
                .flat_map(|(_, r)| r.iter().map(|c| c.len as u32))
                .collect();
            let held = FileRecipes::new(&ids, &counts, &fps, &lengths)
                .unwrap_or_else(|_| panic!("{what}: recipes refused"));
            assert_eq!(held.files(), files.len());
            let keywords = SearchKeywords::from(dict.clone());
            let mut walk = RecipeSearch::new(&keywords, mode == Mode::FilesOnly);
            walk.add_results(&db.encode())
                .unwrap_or_else(|_| panic!("{what}: records refused"));
            walk.add_tiny(&encoded)
                .unwrap_or_else(|_| panic!("{what}: tiny records refused"));
            walk.search_files(&held);
            let mut got4: Vec<Match> = walk
                .take_matches()
                .chunks_exact(3)
                .map(|m| Match {
                    file: m[0] as u64,
                    keyword: m[1] as u32,
                    offset: m[2] as u64,
                })
                .collect();
            got4.sort();
            assert_eq!(got4, want, "{what} {mode:?}: through FileRecipes");
        }

        // The same with every chunk's trigram summary, as a repeat search in the page
        // scans its cached chunks: chunks ruled out are read at their ends only.
        let mut phys = PhysicalPhase::new(&dict);
        let mut tiny3 = MemTinyStore::new();
        for (fp, c) in fps.iter().zip(&corpus.chunks) {
            if let Some(t) = phys.scan_summarized(fp, c, Some(&Trigrams::of(c))) {
                tiny3.put(t);
            }
        }
        let (db3, stats3) = phys.finish();
        let mut lp = LogicalPhase::new(&dict, mode);
        let mut got3 = Vec::new();
        for (id, r) in &files {
            lp.search_file(&db3, *id, r, &mut tiny3, &mut got3);
        }
        got3.sort();
        assert_eq!(got3, want, "{what} {mode:?}: with trigram summaries");
        totals.ruled_out += stats3.ruled_out;

        let mut naive = NaiveSearch::new(&dict, mode);
        let mut got_naive = Vec::new();
        for (i, f) in corpus.files.iter().enumerate() {
            naive.search_file(
                i as u64,
                f.iter().map(|&c| &corpus.chunks[c][..]),
                &mut got_naive,
            );
        }
        got_naive.sort();
        assert_eq!(got_naive, want, "{what} {mode:?}: naive differs");
        if mode == Mode::AllMatches {
            totals.matches += want.len() as u64;
            totals.tiny_records += tiny.len() as u64;
            totals.infix_lists += db.stats().infix_lists;
        }
    }
}

fn random_keywords(rng: &mut Rng, alphabet: &[u8], max_len: usize) -> Vec<Vec<u8>> {
    (0..rng.range(1, 6))
        .map(|_| {
            let n = if rng.chance(15) {
                max_len
            } else {
                rng.range(1, max_len.min(12))
            };
            filler(rng, alphabet, n)
        })
        .collect()
}

fn run_rounds(seed: u64, min_chunk_is_max_len: bool) -> Totals {
    let mut rng = Rng(seed);
    let mut totals = Totals::default();
    for round in 0..ROUNDS {
        let max_len = rng.range(2, 24);
        let (alphabet, kws): (Vec<u8>, Vec<Vec<u8>>) = match round % 4 {
            0 => (
                b"DEUPx".to_vec(),
                vec![b"DEDUP".to_vec(), b"UP".to_vec(), b"DED".to_vec()]
                    .into_iter()
                    .filter(|k| k.len() <= max_len)
                    .collect(),
            ),
            1 => {
                let a = b"aab".to_vec();
                let k = random_keywords(&mut rng, &a, max_len);
                (a, k)
            }
            2 => {
                let a = vec![0u8, 1, 0xff, 0x80, b'\n'];
                let k = random_keywords(&mut rng, &a, max_len);
                (a, k)
            }
            _ => {
                let a = b"abcdex".to_vec();
                let k = random_keywords(&mut rng, &a, max_len);
                (a, k)
            }
        };
        if kws.is_empty() {
            continue;
        }
        let min_chunk = if min_chunk_is_max_len { max_len } else { 1 };
        let corpus = random_corpus(&mut rng, &alphabet, &kws, max_len, min_chunk);
        check(
            &corpus,
            &kws,
            max_len,
            &format!("seed {seed} round {round}"),
            &mut totals,
        );
    }
    totals
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test)]
fn random_corpora_min_chunk_rule() {
    let t = run_rounds(1, true);
    // The generator must actually exercise every path.
    assert!(t.matches > 1000, "{}", t.matches);
    assert!(t.tiny_records > 50, "{}", t.tiny_records);
    assert!(t.tiny_lookups > 10, "{}", t.tiny_lookups);
    assert!(t.ruled_out > 1000, "{}", t.ruled_out);
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test)]
fn random_corpora_arbitrary_chunking() {
    let t = run_rounds(2, false);
    assert!(t.matches > 1000, "{}", t.matches);
    assert!(t.infix_lists > 20, "{}", t.infix_lists);
    assert!(t.ruled_out > 1000, "{}", t.ruled_out);
}

/// Chunks of many blocks: a scan that reads only the runs of blocks the trigram summary
/// lets a keyword start in finds exactly what a whole scan finds, with keywords planted
/// across block borders and longer than a block filter's span.
#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test)]
fn block_runs_find_what_a_whole_scan_finds() {
    let mut rng = Rng(7);
    let (mut runs, mut nothing, mut whole) = (0, 0, 0);
    let mut runs_list = Vec::new();
    let rounds = ROUNDS / 10;
    for round in 0..rounds {
        // Wide alphabets keep the filters sparse enough to rule blocks out.
        let alphabet: Vec<u8> = (0..rng.range(8, 64) as u8).map(|b| b'!' + b).collect();
        let max_len = rng.range(3, 200);
        let kws: Vec<Vec<u8>> = (0..rng.range(1, 12))
            .map(|_| {
                let n = rng.range(3, max_len);
                filler(&mut rng, &alphabet, n)
            })
            .collect();
        let dict = Dictionary::new(kws.clone(), max_len).unwrap();
        for mode in [Mode::AllMatches, Mode::FilesOnly] {
            let mut plain = PhysicalScanner::for_mode(&dict, mode);
            let mut summarized = PhysicalScanner::for_mode(&dict, mode);
            for _ in 0..4 {
                let len = rng.range(1, 9000);
                let mut c = filler(&mut rng, &alphabet, len);
                for _ in 0..rng.below(4) {
                    let k = rng.pick(&kws);
                    // Near a block border half of the time.
                    let at = if rng.chance(50) {
                        (rng.below(len / 1024 + 1) * 1024).saturating_sub(rng.below(k.len()))
                    } else {
                        rng.below(len)
                    };
                    let n = k.len().min(len - at.min(len));
                    c[at.min(len)..at.min(len) + n].copy_from_slice(&k[..n]);
                }
                let fp = fingerprint(&c);
                let t = Trigrams::of(&c);
                let (scope, spared) = dict.trigrams().blocks(&t, c.len(), &mut runs_list);
                let in_runs: usize = runs_list.iter().map(|r| r.1 - r.0).sum();
                match scope {
                    Scope::Runs => runs += 1,
                    Scope::Nothing => nothing += 1,
                    Scope::Whole => whole += 1,
                }
                assert_eq!(
                    spared,
                    if scope == Scope::Whole {
                        0
                    } else {
                        len - in_runs
                    }
                );
                let (scan, s) = summarized.scan_summarized(&fp, &c, Some(&t));
                assert_eq!(
                    scan,
                    plain.scan_chunk(&fp, &c),
                    "round {round} {mode:?}: {kws:?}"
                );
                assert_eq!((s.bytes, s.ruled_out), (spared, scope == Scope::Nothing));
            }
        }
    }
    // Every scope must actually be exercised.
    assert!(
        runs > rounds && nothing > rounds / 8 && whole > rounds / 8,
        "{runs} {nothing} {whole}"
    );
}

/// Figure 1 / Table 1 of the paper: DEDUP and UP, overlapping, split every way.
#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test)]
fn dedup_up_every_split() {
    let kws = vec![b"DEDUP".to_vec(), b"UP".to_vec()];
    let text = b"xxDEDEDUPxxDEDUPUPxDUPDEDUx";
    let mut corpus = Corpus::new();
    // Every way to cut the text into chunks of 5 or more bytes plus each 2-cut.
    for a in 5..text.len() - 5 {
        let (x, y) = text.split_at(a);
        let (ix, iy) = (corpus.add(x.to_vec()), corpus.add(y.to_vec()));
        corpus.files.push(vec![ix, iy]);
        for b in a + 5..text.len() - 5 {
            let (y1, y2) = text[a..].split_at(b - a);
            let ids = vec![ix, corpus.add(y1.to_vec()), corpus.add(y2.to_vec())];
            corpus.files.push(ids);
        }
    }
    let mut t = Totals::default();
    check(&corpus, &kws, 5, "DEDUP/UP", &mut t);
    // DEDUP at 4 and 11 ("DEDU" at 22 is not a match), UP at 7, 14, 16, 20.
    let per_file = brute_force(&corpus, &kws, false)
        .iter()
        .filter(|m| m.file == 0)
        .count();
    assert_eq!(per_file, 2 + 4);
}

/// A one-byte partial completed through the tiny store, from both sides.
#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test)]
fn tiny_partials_complete_matches() {
    let kws = vec![b"DEDUP".to_vec()];
    let dict = Dictionary::new(kws.clone(), 8).unwrap();
    let chunks: Vec<&[u8]> = vec![b"xxxxDEDU", b"Pxxxxxxx", b"xxxxxxxD", b"EDUPxxxx"];
    let fps: Vec<Fingerprint> = chunks.iter().map(|c| fingerprint(c)).collect();
    let files = vec![
        (0, vec![ChunkRef::new(fps[0], 8), ChunkRef::new(fps[1], 8)]),
        (1, vec![ChunkRef::new(fps[2], 8), ChunkRef::new(fps[3], 8)]),
        (2, vec![ChunkRef::new(fps[1], 8), ChunkRef::new(fps[2], 8)]),
    ];
    let (got, db, mut tiny) = search(
        &dict,
        fps.iter().copied().zip(chunks.iter().copied()),
        &files,
        Mode::AllMatches,
    );
    assert_eq!(
        got,
        vec![
            Match {
                file: 0,
                keyword: 0,
                offset: 4
            },
            Match {
                file: 1,
                keyword: 0,
                offset: 7
            },
        ]
    );
    // "Pxxxxxxx" and "xxxxxxxD" hold only one-byte partials: tiny records, not chunk-results.
    assert_eq!(tiny.len(), 2);
    assert!(!db.chunk_results.contains_key(&fps[1]));
    assert_eq!(
        tiny.get(&fps[1], 0),
        Some(TinyEntry {
            keyword: 0,
            prefix: false,
            suffix: true
        })
    );
    assert_eq!(db.chunk_results[&fps[0]].entries[0].longest_prefix, 4);
    assert_eq!(db.chunk_results[&fps[3]].entries[0].longest_suffix, 4);
}

/// More than 254 matches in one chunk: the long location-list form.
#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test)]
fn long_location_list() {
    let kws = vec![b"ab".to_vec(), b"ba".to_vec(), b"zz".to_vec()];
    let dict = Dictionary::new(kws, 16).unwrap();
    let big = b"ab".repeat(300); // 300 "ab", 299 "ba"
    let small = b"xxabxxabxxzz".to_vec();
    let mut corpus = Corpus::new();
    let (i, j) = (corpus.add(big.clone()), corpus.add(small));
    corpus.files = vec![vec![i, j, i], vec![j]];
    let mut scanner = physical::PhysicalScanner::new(&dict);
    let scan = scanner.scan_chunk(&fingerprint(&big), &big);
    let c = scan.chunk.unwrap();
    assert_eq!(c.entries.len(), 2);
    assert_eq!(c.entries[0].exact_count, 255);
    assert_eq!(c.entries[1].exact_count, 255);
    let l = scan.locations.unwrap();
    assert_eq!(l.entries[0].long_count, Some(300));
    assert_eq!(l.entries[1].long_count, Some(299));
    assert_eq!(l.entries[0].offsets.len(), 300);
    let mut t = Totals::default();
    check(&corpus, dict.keywords(), 16, "long list", &mut t);
    assert_eq!(t.matches, 2 * 599 + 3 + 3);
}

/// Keywords longer than a file's short chunks: matches through 3 and more chunks.
#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test)]
fn matches_across_many_short_chunks() {
    let kw = b"0123456789abcdef".to_vec();
    let mut corpus = Corpus::new();
    let mut data = b"xx".to_vec();
    data.extend_from_slice(&kw);
    data.extend_from_slice(b"01234567890123456789abcdefyy");
    let mut rng = Rng(9);
    for _ in 0..200 {
        let mut f = Vec::new();
        let mut at = 0;
        while at < data.len() {
            let l = rng.range(1, 7).min(data.len() - at);
            f.push(corpus.add(data[at..at + l].to_vec()));
            at += l;
        }
        corpus.files.push(f);
    }
    let mut t = Totals::default();
    check(
        &corpus,
        &[kw, b"1234".to_vec(), b"9012".to_vec()],
        16,
        "short",
        &mut t,
    );
    assert_eq!(t.matches, 200 * (2 + 3 + 1));
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test)]
fn keyword_rules() {
    assert!(matches!(
        Dictionary::new(vec![b"abc".to_vec()], 2),
        Err(SearchError::KeywordTooLong { index: 0, .. })
    ));
    assert!(Dictionary::new(vec![], 2).is_err());
    assert!(Dictionary::new(vec![vec![]], 2).is_err());
    let d = Dictionary::new(vec![parse_keyword("00 ff", true).unwrap()], 2048).unwrap();
    let mut corpus = Corpus::new();
    let c = corpus.add(vec![1, 0, 0xff, 0]);
    corpus.files = vec![vec![c]];
    let fps = vec![fingerprint(&corpus.chunks[0])];
    let (got, _, _) = search(
        &d,
        [(fps[0], &corpus.chunks[0][..])],
        &recipes(&corpus, &fps),
        Mode::AllMatches,
    );
    assert_eq!(
        got,
        vec![Match {
            file: 0,
            keyword: 0,
            offset: 1
        }]
    );
}

/// Keywords as long as the minimum chunk size (2048 bytes), periodic and random, split at
/// every position, plus chunks that are exactly a keyword.
#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test)]
fn keywords_of_min_chunk_size() {
    let max_len = 2048;
    let mut rng = Rng(77);
    let alphabet = b"ab".to_vec();
    let periodic: Vec<u8> = b"ab".iter().copied().cycle().take(max_len).collect();
    let mut random = filler(&mut rng, &alphabet, max_len);
    random[..3].copy_from_slice(b"bba");
    let kws = vec![periodic, random, b"abba".to_vec()];
    let corpus = random_corpus(&mut rng, &alphabet, &kws, max_len, max_len);
    let mut t = Totals::default();
    check(&corpus, &kws, max_len, "2048-byte keywords", &mut t);
    assert!(t.matches > 1000, "{}", t.matches);
}

/// The automaton alone on longer haystacks (every skip mode, including the SIMD block
/// pre-check of the two-byte filter in Wasm) against brute force.
#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test)]
fn automaton_vs_brute_force() {
    let mut rng = Rng(5);
    for round in 0..ROUNDS {
        let alphabet: &[u8] = match round % 3 {
            0 => b"abcdefghijklmnopqrstuvwxyz .",
            1 => b"abcdefgh",
            _ => &[0, 1, 2, 3, 0xfe, 0xff],
        };
        let kws: Vec<Vec<u8>> = (0..rng.range(1, 20))
            .map(|_| {
                let n = rng.range(2, 8);
                filler(&mut rng, alphabet, n)
            })
            .collect();
        let len = rng.range(0, 3000);
        let mut hay = filler(&mut rng, alphabet, len);
        for _ in 0..rng.below(20) {
            let k = rng.pick(&kws).clone();
            if k.len() <= hay.len() {
                let at = rng.below(hay.len() - k.len() + 1);
                hay[at..at + k.len()].copy_from_slice(&k);
            }
        }
        let ac = Automaton::new(&kws).unwrap();
        let mut got = Vec::new();
        let end = ac.find_all(&hay, |k, at| got.push((k, at)));
        got.sort();
        let mut want = Vec::new();
        for (k, kw) in kws.iter().enumerate() {
            for o in 0..hay.len() {
                if hay[o..].starts_with(kw) {
                    want.push((k as u32, o));
                }
            }
        }
        want.sort();
        assert_eq!(got, want, "round {round}");
        let (mut p1, mut p2) = (Vec::new(), Vec::new());
        ac.end_partials(end, &mut p1);
        ac.end_partials(ac.run(ac.start(), &hay), &mut p2);
        assert_eq!(p1, p2, "round {round}");
    }
}

/// The match limits: the physical phase has overflowed only past four times the limit in
/// exact offsets, the logical phase only past the limit in matches (exactly the limit is
/// answered), and the matches below it are the brute force's.
#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test)]
fn match_limits() {
    let dict = Dictionary::new(vec![b"a".to_vec()], 16).unwrap();
    let chunk = vec![b'a'; 100];
    let fp = fingerprint(&chunk);
    let physical_after = |limit: usize| {
        let mut phase = PhysicalPhase::new(&dict);
        phase.limit(limit);
        let mut tiny = MemTinyStore::new();
        phase.add_chunk(&fp, &chunk, &mut tiny);
        (phase.overflowed(), phase, tiny)
    };
    assert!(
        !physical_after(25).0,
        "100 offsets, four times 25: not past it"
    );
    assert!(physical_after(24).0, "100 offsets, past four times 24");
    let (_, phase, mut tiny) = physical_after(25);
    let (db, _) = phase.finish();
    // One file holding the chunk three times: 300 matches.
    let recipe = vec![ChunkRef::new(fp, 100); 3];
    let walk = |limit: usize, tiny: &mut MemTinyStore| {
        let mut logical = LogicalPhase::new(&dict, Mode::AllMatches);
        logical.limit(limit);
        let mut out = Vec::new();
        logical.search_file(&db, 0, &recipe, tiny, &mut out);
        (logical.overflowed, out)
    };
    let (over, out) = walk(300, &mut tiny);
    assert!(!over);
    let want: Vec<Match> = (0..300)
        .map(|offset| Match {
            file: 0,
            keyword: 0,
            offset,
        })
        .collect();
    assert_eq!(out, want);
    assert!(walk(299, &mut tiny).0, "300 matches, past 299");
}

/// The page's held recipes refuse counts that do not describe the fingerprints and lengths
/// given, rather than walking a file with another file's chunks.
#[cfg(target_arch = "wasm32")]
#[wasm_bindgen_test]
fn file_recipes_refuse_inconsistent_counts() {
    use wasm_core::bindings::search::FileRecipes;
    let fps = [7u8; 60];
    assert!(FileRecipes::new(&[0, 1], &[1, 2], &fps, &[5, 6, 7]).is_ok());
    assert!(FileRecipes::new(&[0, 1], &[1, 1], &fps, &[5, 6, 7]).is_err());
    assert!(FileRecipes::new(&[0], &[1, 2], &fps, &[5, 6, 7]).is_err());
    assert!(FileRecipes::new(&[0, 1], &[1, 2], &fps[..40], &[5, 6, 7]).is_err());
}
