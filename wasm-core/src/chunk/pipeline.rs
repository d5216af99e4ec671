//! Chunk + lookup-key pipeline for one file: block stream in, `(offset, length, key)` per
//! chunk out, in flat arrays (what the Wasm bindings hand to JavaScript as typed arrays).
//! Chunks completed by one `push` get their keys (plain SHA-1, [`crate::hash`]) together,
//! straight from the stream's buffer (no copy per chunk); [`ChunkPipeline::confirm`] turns
//! the keys of the chunks to be stored into their fingerprints.

use super::stream::{ChunkStream, StreamChunk};
use super::DynChunker;
use crate::hash::{confirm_flat, lookup_keys_flat, FINGERPRINT_LEN};

pub struct ChunkPipeline {
    stream: ChunkStream<DynChunker>,
    /// Chunks of the last batch (completed by the last push/finish).
    batch: Vec<StreamChunk>,
    ranges: Vec<(usize, usize)>,
    offsets: Vec<u64>,
    lengths: Vec<u32>,
    fingerprints: Vec<u8>,
    taken: Vec<crate::hash::Fingerprint>,
}

impl ChunkPipeline {
    pub fn new(chunker: DynChunker) -> Self {
        ChunkPipeline {
            stream: ChunkStream::new(chunker),
            batch: Vec::new(),
            ranges: Vec::new(),
            offsets: Vec::new(),
            lengths: Vec::new(),
            fingerprints: Vec::new(),
            taken: Vec::new(),
        }
    }

    /// Feeds the next block; returns how many chunks it completed (the new batch).
    pub fn push(&mut self, block: &[u8]) -> usize {
        self.stream.push(block);
        self.collect()
    }

    /// Ends the file; returns the number of chunks in the final batch.
    pub fn finish(&mut self) -> usize {
        self.stream.finish();
        self.collect()
    }

    fn collect(&mut self) -> usize {
        self.batch.clear();
        self.batch.extend(self.stream.drain());
        let (buf, base) = self.stream.buffer();
        self.ranges.clear();
        self.offsets.clear();
        self.lengths.clear();
        for c in &self.batch {
            self.ranges.push(((c.offset - base) as usize, c.len));
            self.offsets.push(c.offset);
            self.lengths.push(c.len as u32);
        }
        self.fingerprints
            .resize(self.batch.len() * FINGERPRINT_LEN, 0);
        // RapidCDC already hashed its chunks (it needs the keys to jump); reuse those.
        self.taken.clear();
        if self.stream.cutter().take_fingerprints(&mut self.taken) {
            assert_eq!(
                self.taken.len(),
                self.batch.len(),
                "one fingerprint per chunk"
            );
            self.fingerprints.copy_from_slice(self.taken.as_flattened());
        } else {
            lookup_keys_flat(buf, &self.ranges, &mut self.fingerprints);
        }
        self.batch.len()
    }

    /// Confirms chunks `which` of the last batch (indices): their keys become their
    /// fingerprints ([`crate::hash::confirm_flat`]). Returns how many changed.
    pub fn confirm(&mut self, which: &[u32]) -> Result<usize, String> {
        let (buf, _) = self.stream.buffer();
        confirm_flat(buf, &self.ranges, which, &mut self.fingerprints)
    }

    /// Stream offsets of the chunks of the last batch.
    pub fn offsets(&self) -> &[u64] {
        &self.offsets
    }

    pub fn lengths(&self) -> &[u32] {
        &self.lengths
    }

    /// 20 bytes per chunk of the last batch: its lookup key, or its fingerprint once
    /// confirmed.
    pub fn fingerprints(&self) -> &[u8] {
        &self.fingerprints
    }

    /// The bytes of all chunks of the last batch, contiguous (chunk `i` starts at
    /// `offsets[i] - offsets[0]`), valid until the next push.
    pub fn batch_bytes(&self) -> &[u8] {
        match (self.batch.first(), self.batch.last()) {
            (Some(first), Some(last)) => {
                let (buf, base) = self.stream.buffer();
                let from = (first.offset - base) as usize;
                let to = (last.offset - base) as usize + last.len;
                &buf[from..to]
            }
            _ => &[],
        }
    }

    /// Total bytes fed so far.
    pub fn position(&self) -> u64 {
        self.stream.position()
    }
}

#[cfg(test)]
mod tests {
    use super::super::{chunk_all, make_chunker, test_bytes};
    use super::*;

    #[test]
    fn pipeline_matches_chunk_all_and_sha1() {
        let data = test_bytes(11, 1_000_000);
        let want = chunk_all(
            &make_chunker("fastcdc", 2048, 8192, 65536, 1).unwrap(),
            &data,
        );
        let mut p = ChunkPipeline::new(make_chunker("fastcdc", 2048, 8192, 65536, 1).unwrap());
        let mut got = Vec::new();
        let mut check_batch = |p: &ChunkPipeline| {
            let bytes = p.batch_bytes();
            for i in 0..p.offsets().len() {
                let (o, l) = (p.offsets()[i] as usize, p.lengths()[i] as usize);
                let rel = o - p.offsets()[0] as usize;
                assert_eq!(&bytes[rel..rel + l], &data[o..o + l]);
                let fp = &p.fingerprints()[20 * i..20 * i + 20];
                assert_eq!(fp, crate::hash::fingerprint(&data[o..o + l]));
                got.push((o, l));
            }
        };
        for block in data.chunks(100_003) {
            p.push(block);
            check_batch(&p);
        }
        p.finish();
        check_batch(&p);
        assert_eq!(got, want);
        assert_eq!(p.position(), data.len() as u64);
    }

    #[test]
    fn rapid_pipeline_reuses_its_fingerprints_correctly() {
        use super::super::make_rapid_chunker;
        let v1 = super::super::twostage::test_text(40, 600_000);
        let mut v2 = v1.clone();
        v2.splice(300_000..300_000, b"an edit".iter().copied());
        let plain = chunk_all(
            &make_chunker("twostage", 2048, 7680, 65536, 2).unwrap(),
            &v1,
        );
        let fps: Vec<_> = plain
            .iter()
            .map(|&(o, l)| crate::hash::fingerprint(&v1[o..o + l]))
            .collect();
        let sizes: Vec<u32> = plain.iter().map(|c| c.1 as u32).collect();
        let c = make_rapid_chunker("default", None, None, None, None, &fps, &sizes, &[]).unwrap();
        let mut p = ChunkPipeline::new(c);
        let mut covered = 0;
        let mut check = |p: &ChunkPipeline| {
            for i in 0..p.offsets().len() {
                let (o, l) = (p.offsets()[i] as usize, p.lengths()[i] as usize);
                assert_eq!(o, covered);
                assert_eq!(
                    &p.fingerprints()[20 * i..20 * i + 20],
                    crate::hash::fingerprint(&v2[o..o + l])
                );
                covered += l;
            }
        };
        for b in v2.chunks(77_777) {
            p.push(b);
            check(&p);
        }
        p.finish();
        check(&p);
        assert_eq!(covered, v2.len());
    }
}
