//! Streaming driver: feeds any [`CutPoint`] from blocks of arbitrary size.
//!
//! A cut is only taken once `max_size` bytes after the chunk start are buffered (or the
//! stream has ended), and `history` bytes before it are kept, so the cut points are exactly
//! those of [`super::chunk_all`] on the concatenated input, whatever the block sizes.

use super::CutPoint;

/// One chunk found in a stream: absolute offset and length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamChunk {
    pub offset: u64,
    pub len: usize,
}

/// Buffers a block stream and emits chunks. Bytes of chunks not yet drained stay available
/// through [`ChunkStream::bytes`] until the next [`ChunkStream::push`].
pub struct ChunkStream<C: CutPoint> {
    cutter: C,
    buf: Vec<u8>,
    /// Stream offset of `buf[0]`.
    base: u64,
    /// Index in `buf` where the next chunk starts.
    start: usize,
    pending: Vec<StreamChunk>,
    finished: bool,
}

impl<C: CutPoint> ChunkStream<C> {
    pub fn new(cutter: C) -> Self {
        ChunkStream {
            cutter,
            buf: Vec::new(),
            base: 0,
            start: 0,
            pending: Vec::new(),
            finished: false,
        }
    }

    pub fn cutter(&self) -> &C {
        &self.cutter
    }

    pub fn cutter_mut(&mut self) -> &mut C {
        &mut self.cutter
    }

    /// Appends a block and cuts every chunk whose end is now decided.
    pub fn push(&mut self, block: &[u8]) {
        assert!(!self.finished, "ChunkStream::push after finish");
        self.compact();
        self.buf.extend_from_slice(block);
        let max = self.cutter.max_size();
        while self.buf.len() - self.start >= max {
            self.cut_one();
        }
    }

    /// Ends the stream: the remaining bytes become the last chunk(s).
    pub fn finish(&mut self) {
        self.finished = true;
        while self.start < self.buf.len() {
            self.cut_one();
        }
    }

    fn cut_one(&mut self) {
        let end = self.cutter.cut(&self.buf, self.start);
        assert!(end > self.start && end <= self.buf.len());
        self.pending.push(StreamChunk {
            offset: self.base + self.start as u64,
            len: end - self.start,
        });
        self.start = end;
    }

    /// Drops bytes nobody can need any more: before the first undrained chunk and before
    /// the history window. Only when that is at least half the buffer, so that tiny blocks
    /// do not cause a copy each.
    fn compact(&mut self) {
        let mut keep_from = self.start.saturating_sub(self.cutter.history());
        if let Some(first) = self.pending.first() {
            keep_from = keep_from.min((first.offset - self.base) as usize);
        }
        if keep_from > 0 && keep_from * 2 >= self.buf.len() {
            self.buf.drain(..keep_from);
            self.base += keep_from as u64;
            self.start -= keep_from;
        }
    }

    /// Chunks found since the last drain.
    pub fn pending(&self) -> &[StreamChunk] {
        &self.pending
    }

    pub fn drain(&mut self) -> std::vec::Drain<'_, StreamChunk> {
        self.pending.drain(..)
    }

    /// Clears the pending list (after the caller has used [`Self::pending`]).
    pub fn clear_pending(&mut self) {
        self.pending.clear();
    }

    /// The bytes of a chunk from [`Self::pending`] (valid until the next push).
    pub fn bytes(&self, c: &StreamChunk) -> &[u8] {
        let from = (c.offset - self.base) as usize;
        &self.buf[from..from + c.len]
    }

    /// Buffer holding all pending chunks, and the stream offset of its first byte: lets a
    /// caller hash many chunks in one batch without copying.
    pub fn buffer(&self) -> (&[u8], u64) {
        (&self.buf, self.base)
    }

    /// Total bytes pushed so far.
    pub fn position(&self) -> u64 {
        self.base + self.buf.len() as u64
    }
}
