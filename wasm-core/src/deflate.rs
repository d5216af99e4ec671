//! Deflate fragments: a restore's zip compressed once per unique chunk.
//!
//! A zip entry of method 8 holds one raw deflate stream (RFC 1951). A version repeats its
//! chunks many times over (a release's unchanged files, the same file in several folders), so
//! compressing each file's bytes as they are written would compress the same data again for
//! every reference. Instead each chunk is compressed on its own, once, into a **fragment**:
//! a run of deflate blocks, none final, that starts and ends on a byte boundary and refers to
//! nothing before it (the compressor is reset for every chunk, and a sync flush ends the
//! fragment with an empty stored block, RFC 1951 §3.2.4, which aligns it). Any sequence of
//! fragments followed by [`END`], a final empty block, is then a valid deflate stream of the
//! chunks' bytes in that order, so the assembler writes a file's entry from its chunks'
//! fragments exactly as it writes stored data (the same idea as pigz's independent blocks).
//! What is lost is the history across chunk boundaries (a chunk cannot refer to the one
//! before it): at the chunk sizes a backup cuts, the output is about a sixth larger than
//! compressing whole files at the same level (docs/BENCHMARKS.md).
//!
//! Level 1 is used: a zip is written once and read once, and the time a restore spends
//! compressing must stay below what the smaller output saves the browser in writing it
//! (docs/BENCHMARKS.md, "A restore's zip deflated"). A chunk whose fragment would not be
//! smaller than its bytes in stored blocks is written in stored blocks, and one whose bytes
//! look like noise (compressed media, archives: a sample's byte entropy near 8 bits) is
//! stored without trying. Both decisions depend on the chunk's bytes alone, so a version's
//! zip is the same archive whichever way its chunks travelled.

use zlib_rs::{Deflate, DeflateFlush, Status};

/// The end of every deflate stream made of fragments: a final, empty block of fixed codes
/// (BFINAL 1, BTYPE 01, then the end-of-block code 256, seven zero bits).
pub const END: [u8; 2] = [0x03, 0x00];

/// A stored block holds at most this many bytes (its LEN field is 16 bits).
const STORED_MAX: usize = 0xffff;

/// The size of `len` bytes as stored blocks: 5 bytes of header per block of up to 64 KiB.
pub fn stored_len(len: usize) -> usize {
    len + 5 * len.div_ceil(STORED_MAX)
}

/// Appends `raw` to `out` as non-final stored blocks (nothing for an empty chunk).
pub fn push_stored(raw: &[u8], out: &mut Vec<u8>) {
    out.reserve(stored_len(raw.len()));
    for block in raw.chunks(STORED_MAX) {
        let n = block.len() as u16;
        // BFINAL 0, BTYPE 00, then padding to the byte boundary (fragments start on one).
        out.push(0);
        out.extend_from_slice(&n.to_le_bytes());
        out.extend_from_slice(&(!n).to_le_bytes());
        out.extend_from_slice(block);
    }
}

/// Bytes sampled at most by [`looks_compressible`].
const SAMPLES: usize = 4096;
/// Sampled byte entropy (bits per byte) from which a chunk is stored without trying: random
/// bytes sample at ~7.9 with 4 096 samples; text, code and executables at 4.5-6.5.
const NOISE_BITS: f64 = 7.5;

/// Whether deflate may gain on `raw`: the order-0 entropy of up to [`SAMPLES`] bytes taken
/// evenly across it is below [`NOISE_BITS`] (too few bytes to judge: yes).
pub fn looks_compressible(raw: &[u8]) -> bool {
    if raw.len() < 1024 {
        return true;
    }
    let stride = raw.len().div_ceil(SAMPLES);
    let mut counts = [0u32; 256];
    let mut n = 0u32;
    for &b in raw.iter().step_by(stride) {
        counts[b as usize] += 1;
        n += 1;
    }
    let n = n as f64;
    let bits: f64 = counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let p = c as f64 / n;
            -p * p.log2()
        })
        .sum();
    bits < NOISE_BITS
}

/// Compresses chunks into fragments, one compressor kept for all of them (its tables are
/// allocated once, not once per chunk).
pub struct Fragmenter {
    deflate: Deflate,
    scratch: Vec<u8>,
}

impl Default for Fragmenter {
    fn default() -> Self {
        Self::new()
    }
}

impl Fragmenter {
    pub fn new() -> Self {
        Fragmenter {
            deflate: Deflate::new(1, false, 15),
            scratch: Vec::new(),
        }
    }

    /// Appends the fragment of `raw` to `out`: deflated where that is smaller than stored
    /// blocks, else stored (without trying when its bytes look like noise).
    pub fn push(&mut self, raw: &[u8], out: &mut Vec<u8>) {
        let stored = stored_len(raw.len());
        if !raw.is_empty() && looks_compressible(raw) {
            if let Some(n) = self.deflate_into_scratch(raw) {
                if n < stored {
                    out.extend_from_slice(&self.scratch[..n]);
                    return;
                }
            }
        }
        push_stored(raw, out);
    }

    /// `raw` deflated and sync-flushed into `scratch`; its length, or None if the compressor
    /// did not take all of it in one call (then the chunk is stored).
    fn deflate_into_scratch(&mut self, raw: &[u8]) -> Option<usize> {
        // zlib's bound for one call, with room for the sync flush's empty stored block.
        let cap = zlib_rs::compress_bound(raw.len()) + 16;
        if self.scratch.len() < cap {
            self.scratch.resize(cap, 0);
        }
        self.deflate.reset();
        let status = self
            .deflate
            .compress(raw, &mut self.scratch[..cap], DeflateFlush::SyncFlush)
            .ok()?;
        let whole = self.deflate.total_in() as usize == raw.len() && status == Status::Ok;
        whole.then_some(self.deflate.total_out() as usize)
    }
}

/// The fragments of the chunks laid back to back in `raw` (chunk k `lengths[k]` bytes);
/// answers them back to back and their lengths.
pub fn fragments(fragmenter: &mut Fragmenter, raw: &[u8], lengths: &[u32]) -> (Vec<u8>, Vec<u32>) {
    let mut out = Vec::with_capacity(raw.len() / 2);
    let mut sizes = Vec::with_capacity(lengths.len());
    let mut at = 0;
    for &len in lengths {
        let chunk = &raw[at..at + len as usize];
        at += len as usize;
        let start = out.len();
        fragmenter.push(chunk, &mut out);
        sizes.push((out.len() - start) as u32);
    }
    (out, sizes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes no compressor can shrink (xorshift64*).
    fn noise(seed: u64, n: usize) -> Vec<u8> {
        let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        (0..n)
            .map(|_| {
                x ^= x >> 12;
                x ^= x << 25;
                x ^= x >> 27;
                (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 56) as u8
            })
            .collect()
    }

    fn inflate(stream: &[u8]) -> Vec<u8> {
        miniz_oxide::inflate::decompress_to_vec(stream).expect("a valid deflate stream")
    }

    fn samples() -> Vec<Vec<u8>> {
        let text: Vec<u8> = (0..40_000u32)
            .flat_map(|i| format!("line {} of a text chunk, {}\n", i % 97, i % 13).into_bytes())
            .take(150_000)
            .collect();
        vec![
            Vec::new(),
            b"x".to_vec(),
            text[..8192].to_vec(),
            noise(7, 70_000), // incompressible, more than one stored block
            text.clone(),     // compressible, larger than the 32 KiB window
            noise(9, 65_535), // exactly one stored block
            text[1000..1003].to_vec(),
        ]
    }

    #[test]
    fn fragments_in_any_order_and_repeated_inflate_to_the_chunks() {
        let chunks = samples();
        let mut f = Fragmenter::new();
        let frags: Vec<Vec<u8>> = chunks
            .iter()
            .map(|c| {
                let mut out = Vec::new();
                f.push(c, &mut out);
                out
            })
            .collect();
        // The oracle: miniz_oxide's inflater over every order a file could take them in.
        for order in [
            vec![0, 1, 2, 3, 4, 5, 6],
            vec![4, 4, 2, 3, 3, 0, 6, 1],
            vec![6],
            vec![],
        ] {
            let mut stream: Vec<u8> = order.iter().flat_map(|&k| frags[k].clone()).collect();
            stream.extend_from_slice(&END);
            let want: Vec<u8> = order.iter().flat_map(|&k| chunks[k].clone()).collect();
            assert_eq!(inflate(&stream), want, "order {order:?}");
        }
    }

    #[test]
    fn a_fragment_depends_only_on_its_chunk() {
        let chunks = samples();
        let mut fresh = Vec::new();
        Fragmenter::new().push(&chunks[2], &mut fresh);
        let mut used = Fragmenter::new();
        for c in &chunks {
            used.push(c, &mut Vec::new());
        }
        let mut again = Vec::new();
        used.push(&chunks[2], &mut again);
        assert_eq!(fresh, again);
    }

    #[test]
    fn compresses_text_and_stores_what_does_not_compress() {
        let chunks = samples();
        let mut f = Fragmenter::new();
        let mut text = Vec::new();
        f.push(&chunks[4], &mut text);
        assert!(text.len() * 4 < chunks[4].len(), "{} bytes", text.len());
        assert!(looks_compressible(&chunks[4]));
        let mut random = Vec::new();
        f.push(&chunks[3], &mut random);
        assert_eq!(random.len(), stored_len(chunks[3].len()));
        assert!(!looks_compressible(&chunks[3]));
        // Noise that deflate still shrinks (one random block repeated) is tried and shrunk;
        // noise the sample judges is stored as is, and both inflate to their bytes.
        let repeated = noise(3, 2000).repeat(20);
        let mut out = Vec::new();
        f.push(&repeated, &mut out);
        assert!(looks_compressible(&repeated) || out.len() == stored_len(repeated.len()));
        assert_eq!(inflate(&[out, END.to_vec()].concat()), repeated);
    }

    #[test]
    fn fragments_of_a_buffer_split_by_lengths() {
        let chunks = samples();
        let raw = chunks.concat();
        let lengths: Vec<u32> = chunks.iter().map(|c| c.len() as u32).collect();
        let (out, sizes) = fragments(&mut Fragmenter::new(), &raw, &lengths);
        assert_eq!(sizes.iter().map(|&s| s as usize).sum::<usize>(), out.len());
        assert_eq!(sizes[0], 0);
        let mut at = 0;
        for (k, c) in chunks.iter().enumerate() {
            let frag = &out[at..at + sizes[k] as usize];
            at += sizes[k] as usize;
            assert_eq!(inflate(&[frag, &END[..]].concat()), *c, "chunk {k}");
        }
    }
}
