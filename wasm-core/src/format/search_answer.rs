//! The server's search answer as bytes (`application/x-ditto-search`, docs/FORMAT.md "Search
//! answer"): what `POST search` answers a client that asks for it instead of JSON. An answer
//! holds a `(keyword, offset)` pair per match and each hit file's recipe; as JSON, hundreds of
//! thousands of matches took the server longer to write and the page longer to parse than the
//! search itself. The server encodes ([`SearchAnswerWriter`]) and the page reads
//! ([`decode_search_answer`], through `bindings::search_answer`).

use super::{u32_at, u64_at};
use crate::hash::{Fingerprint, FINGERPRINT_LEN};

pub const SEARCH_ANSWER_MAGIC: [u8; 4] = *b"DSRA";
pub const SEARCH_ANSWER_FORMAT: u32 = 1;
pub const SEARCH_ANSWER_HEADER_LEN: usize = 16;
/// A file's fixed fields: version, size, path length, recipe chunks, hits, hit bytes.
pub const FILE_HEAD_LEN: usize = 32;
/// The most bytes an unsigned LEB128 number up to `u64::MAX` takes.
const MAX_VARINT_LEN: usize = 10;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SearchAnswerError {
    BadMagic,
    UnknownFormat(u32),
    /// The bytes end inside the part named, or go on after the last file.
    BadLength(&'static str),
    /// The head or a path is not UTF-8.
    NotUtf8(&'static str),
    /// A file's hits do not read as its count of pairs in its count of bytes.
    BadHits,
}

impl std::fmt::Display for SearchAnswerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SearchAnswerError::BadMagic => write!(f, "not a search answer (bad magic)"),
            SearchAnswerError::UnknownFormat(v) => write!(
                f,
                "search answer in format {v}, format {SEARCH_ANSWER_FORMAT} is read"
            ),
            SearchAnswerError::BadLength(part) => {
                write!(f, "search answer: its length does not match its {part}")
            }
            SearchAnswerError::NotUtf8(part) => write!(f, "search answer: its {part} is not UTF-8"),
            SearchAnswerError::BadHits => write!(f, "search answer: a file's hits are malformed"),
        }
    }
}

impl std::error::Error for SearchAnswerError {}

/// Writes an answer file by file: the head (the answer's other fields as a JSON object), then
/// exactly `files` files.
pub struct SearchAnswerWriter {
    out: Vec<u8>,
    files: u32,
    written: u32,
}

impl SearchAnswerWriter {
    pub fn new(head_json: &[u8], files: u32) -> Self {
        let mut out = Vec::with_capacity(SEARCH_ANSWER_HEADER_LEN + head_json.len());
        out.extend_from_slice(&SEARCH_ANSWER_MAGIC);
        out.extend_from_slice(&SEARCH_ANSWER_FORMAT.to_le_bytes());
        out.extend_from_slice(&(head_json.len() as u32).to_le_bytes());
        out.extend_from_slice(&files.to_le_bytes());
        out.extend_from_slice(head_json);
        SearchAnswerWriter {
            out,
            files,
            written: 0,
        }
    }

    /// One file with hits: its recipe as `(fingerprint, raw length)` and its hits as
    /// `(keyword, offset)`, by offset (then keyword), as the client is to show them.
    pub fn file<'a>(
        &mut self,
        version: u64,
        size: u64,
        path: &str,
        recipe: impl ExactSizeIterator<Item = (&'a Fingerprint, u32)> + Clone,
        hits: &[(u32, u64)],
    ) {
        let chunks = recipe.len();
        let out = &mut self.out;
        out.reserve(FILE_HEAD_LEN + path.len() + chunks * (FINGERPRINT_LEN + 4) + hits.len() * 4);
        out.extend_from_slice(&version.to_le_bytes());
        out.extend_from_slice(&size.to_le_bytes());
        out.extend_from_slice(&(path.len() as u32).to_le_bytes());
        out.extend_from_slice(&(chunks as u32).to_le_bytes());
        out.extend_from_slice(&(hits.len() as u32).to_le_bytes());
        let hit_bytes_at = out.len();
        out.extend_from_slice(&[0; 4]);
        out.extend_from_slice(path.as_bytes());
        for (fp, _) in recipe.clone() {
            out.extend_from_slice(fp);
        }
        for (_, len) in recipe {
            out.extend_from_slice(&len.to_le_bytes());
        }
        let start = out.len();
        let mut last = 0;
        for &(keyword, offset) in hits {
            assert!(offset >= last, "search answer: hits by offset");
            put_varint(out, offset - last);
            put_varint(out, u64::from(keyword));
            last = offset;
        }
        let hit_bytes = (out.len() - start) as u32;
        out[hit_bytes_at..hit_bytes_at + 4].copy_from_slice(&hit_bytes.to_le_bytes());
        self.written += 1;
    }

    /// The answer. Panics unless exactly the files announced were written: an answer that
    /// says another count than it holds is a bug, not a state to send.
    pub fn finish(self) -> Vec<u8> {
        assert_eq!(self.written, self.files, "search answer: files written");
        self.out
    }
}

/// An answer checked and read in place.
#[derive(Debug, Clone)]
pub struct SearchAnswer<'a> {
    /// The answer's fields other than its files, as a JSON object.
    pub head: &'a str,
    pub files: Vec<AnswerFile<'a>>,
}

/// One file of an answer; its arrays stay the answer's bytes.
#[derive(Debug, Clone, Copy)]
pub struct AnswerFile<'a> {
    pub version: u64,
    pub size: u64,
    pub path: &'a str,
    fps: &'a [u8],
    lengths: &'a [u8],
    hit_count: usize,
    /// The hits as written, checked by [`decode_search_answer`].
    hits: &'a [u8],
}

impl<'a> AnswerFile<'a> {
    /// The recipe's fingerprints, 20 bytes each.
    pub fn fingerprints(&self) -> &'a [u8] {
        self.fps
    }

    pub fn chunks(&self) -> usize {
        self.fps.len() / FINGERPRINT_LEN
    }

    /// The recipe's raw chunk lengths.
    pub fn lengths(&self) -> impl ExactSizeIterator<Item = u32> + 'a {
        self.lengths.chunks_exact(4).map(|b| u32_at(b, 0))
    }

    pub fn hit_count(&self) -> usize {
        self.hit_count
    }

    /// `(keyword, offset)` pairs, by offset.
    pub fn hits(&self) -> Hits<'a> {
        Hits {
            bytes: self.hits,
            left: self.hit_count,
            offset: 0,
        }
    }
}

/// A file's hits, read from bytes [`decode_search_answer`] checked.
pub struct Hits<'a> {
    bytes: &'a [u8],
    left: usize,
    offset: u64,
}

impl Iterator for Hits<'_> {
    type Item = (u32, u64);

    fn next(&mut self) -> Option<(u32, u64)> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let (delta, keyword) = read_pair(&mut self.bytes).expect("checked when decoded");
        self.offset += delta;
        Some((keyword, self.offset))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for Hits<'_> {}

fn put_varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push(n as u8 | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// An unsigned LEB128 number of at most [`MAX_VARINT_LEN`] bytes that fits a `u64`.
fn read_varint(b: &mut &[u8]) -> Option<u64> {
    let mut n = 0u64;
    for (i, &byte) in b.iter().enumerate().take(MAX_VARINT_LEN) {
        let bits = u64::from(byte & 0x7f);
        if i == MAX_VARINT_LEN - 1 && bits > 1 {
            return None;
        }
        n |= bits << (7 * i);
        if byte & 0x80 == 0 {
            *b = &b[i + 1..];
            return Some(n);
        }
    }
    None
}

/// One hit as written: the offset's distance from the previous hit's, then the keyword.
fn read_pair(b: &mut &[u8]) -> Option<(u64, u32)> {
    let delta = read_varint(b)?;
    let keyword = u32::try_from(read_varint(b)?).ok()?;
    Some((delta, keyword))
}

/// Checks an answer's structure and lengths (every count is checked against the bytes left
/// before anything is sized by it) and reads its files.
pub fn decode_search_answer(bytes: &[u8]) -> Result<SearchAnswer<'_>, SearchAnswerError> {
    if bytes.len() < SEARCH_ANSWER_HEADER_LEN || bytes[..4] != SEARCH_ANSWER_MAGIC {
        return Err(SearchAnswerError::BadMagic);
    }
    let format = u32_at(bytes, 4);
    if format != SEARCH_ANSWER_FORMAT {
        return Err(SearchAnswerError::UnknownFormat(format));
    }
    let head_len = u32_at(bytes, 8) as usize;
    let count = u32_at(bytes, 12) as usize;
    let mut rest = &bytes[SEARCH_ANSWER_HEADER_LEN..];
    let head = take(&mut rest, head_len, "head")?;
    let head = std::str::from_utf8(head).map_err(|_| SearchAnswerError::NotUtf8("head"))?;
    // Each file takes at least its fixed fields.
    if rest.len() / FILE_HEAD_LEN < count {
        return Err(SearchAnswerError::BadLength("file count"));
    }
    let mut files = Vec::with_capacity(count);
    for _ in 0..count {
        let fixed = take(&mut rest, FILE_HEAD_LEN, "files")?;
        let path_len = u32_at(fixed, 16) as usize;
        let chunks = u32_at(fixed, 20) as usize;
        let hit_count = u32_at(fixed, 24) as usize;
        let hit_bytes = u32_at(fixed, 28) as usize;
        let path = take(&mut rest, path_len, "paths")?;
        let path = std::str::from_utf8(path).map_err(|_| SearchAnswerError::NotUtf8("path"))?;
        let fps = take_n(&mut rest, chunks, FINGERPRINT_LEN, "recipes")?;
        let lengths = take_n(&mut rest, chunks, 4, "recipes")?;
        let hits = take(&mut rest, hit_bytes, "hits")?;
        check_hits(hits, hit_count)?;
        files.push(AnswerFile {
            version: u64_at(fixed, 0),
            size: u64_at(fixed, 8),
            path,
            fps,
            lengths,
            hit_count,
            hits,
        });
    }
    if !rest.is_empty() {
        return Err(SearchAnswerError::BadLength("files"));
    }
    Ok(SearchAnswer { head, files })
}

/// Whether `bytes` are exactly `count` hits whose offsets add up within a `u64`.
fn check_hits(mut bytes: &[u8], count: usize) -> Result<(), SearchAnswerError> {
    // A hit takes two bytes at least: a larger count is refused before it is walked.
    if count > bytes.len() / 2 {
        return Err(SearchAnswerError::BadHits);
    }
    let mut offset = 0u64;
    for _ in 0..count {
        let (delta, _) = read_pair(&mut bytes).ok_or(SearchAnswerError::BadHits)?;
        offset = offset
            .checked_add(delta)
            .ok_or(SearchAnswerError::BadHits)?;
    }
    if !bytes.is_empty() {
        return Err(SearchAnswerError::BadHits);
    }
    Ok(())
}

fn take<'a>(
    rest: &mut &'a [u8],
    n: usize,
    part: &'static str,
) -> Result<&'a [u8], SearchAnswerError> {
    if rest.len() < n {
        return Err(SearchAnswerError::BadLength(part));
    }
    let (a, b) = rest.split_at(n);
    *rest = b;
    Ok(a)
}

fn take_n<'a>(
    rest: &mut &'a [u8],
    n: usize,
    size: usize,
    part: &'static str,
) -> Result<&'a [u8], SearchAnswerError> {
    let len = n
        .checked_mul(size)
        .ok_or(SearchAnswerError::BadLength(part))?;
    take(rest, len, part)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::fingerprint;

    fn sample() -> (Vec<u8>, Fingerprint, Fingerprint) {
        let (a, b) = (fingerprint(b"a"), fingerprint(b"b"));
        let mut w = SearchAnswerWriter::new(br#"{"matches":3}"#, 2);
        w.file(
            7,
            (1 << 40) + 1,
            "d/\u{e9}t\u{e9}.txt",
            [(&a, 8192u32), (&b, 17)].into_iter(),
            &[(0, 5), (1, (1 << 40) - 2)],
        );
        w.file(9, 0, "", std::iter::empty(), &[(2, 0)]);
        (w.finish(), a, b)
    }

    #[test]
    fn round_trip() {
        let (bytes, a, b) = sample();
        let read = decode_search_answer(&bytes).unwrap();
        assert_eq!(read.head, r#"{"matches":3}"#);
        assert_eq!(read.files.len(), 2);
        let f = &read.files[0];
        assert_eq!(
            (f.version, f.size, f.path),
            (7, (1 << 40) + 1, "d/\u{e9}t\u{e9}.txt")
        );
        assert_eq!(f.fingerprints(), [a, b].concat());
        assert_eq!(f.lengths().collect::<Vec<_>>(), [8192, 17]);
        assert_eq!(f.hits().collect::<Vec<_>>(), [(0, 5), (1, (1 << 40) - 2)]);
        let g = &read.files[1];
        assert_eq!((g.version, g.chunks(), g.hit_count()), (9, 0, 1));
    }

    #[test]
    fn layout_as_documented() {
        let (bytes, a, _) = sample();
        assert_eq!(&bytes[..4], b"DSRA");
        assert_eq!(u32_at(&bytes, 4), 1);
        assert_eq!(u32_at(&bytes, 8), 13);
        assert_eq!(u32_at(&bytes, 12), 2);
        let f = SEARCH_ANSWER_HEADER_LEN + 13;
        assert_eq!(u64_at(&bytes, f), 7);
        assert_eq!(u64_at(&bytes, f + 8), (1 << 40) + 1);
        let path_len = u32_at(&bytes, f + 16) as usize;
        assert_eq!(
            (path_len, u32_at(&bytes, f + 20), u32_at(&bytes, f + 24)),
            (11, 2, 2)
        );
        let fps = f + FILE_HEAD_LEN + path_len;
        assert_eq!(bytes[fps..fps + 20], a);
        assert_eq!(u32_at(&bytes, fps + 40), 8192);
        // Hits: (0, 5) as 5 then 0; (1, 2^40 - 2) as the distance 2^40 - 7 then 1, LEB128.
        let hits = fps + 48;
        let mut want = vec![5, 0];
        let mut d: u64 = (1 << 40) - 7;
        while d >= 0x80 {
            want.push(d as u8 | 0x80);
            d >>= 7;
        }
        want.extend([d as u8, 1]);
        assert_eq!(u32_at(&bytes, f + 28) as usize, want.len());
        assert_eq!(bytes[hits..hits + want.len()], want);
    }

    #[test]
    fn varints_at_their_limits() {
        for n in [0, 0x7f, 0x80, u64::from(u32::MAX), u64::MAX] {
            let mut b = Vec::new();
            put_varint(&mut b, n);
            let mut r = &b[..];
            assert_eq!(read_varint(&mut r), Some(n));
            assert!(r.is_empty());
        }
        // Past a u64, or never ending: refused.
        let mut past = vec![0xff; 9];
        past.push(0x02);
        assert_eq!(read_varint(&mut &past[..]), None);
        assert_eq!(read_varint(&mut &[0x80, 0x80][..]), None);
        // Offsets that add up past a u64.
        let mut w = SearchAnswerWriter::new(b"{}", 1);
        w.file(
            1,
            0,
            "",
            std::iter::empty(),
            &[(0, u64::MAX - 1), (0, u64::MAX)],
        );
        let mut bytes = w.finish();
        assert!(decode_search_answer(&bytes).is_ok());
        let last = bytes.len() - 2;
        bytes[last] = 2; // the second distance 1 -> 2
        assert_eq!(
            decode_search_answer(&bytes).unwrap_err(),
            SearchAnswerError::BadHits
        );
    }

    #[test]
    fn refuses_what_is_not_an_answer() {
        let (bytes, _, _) = sample();
        assert_eq!(
            decode_search_answer(b"DLOC\x01\0\0\0").unwrap_err(),
            SearchAnswerError::BadMagic
        );
        let mut other = bytes.clone();
        other[4] = 2;
        assert_eq!(
            decode_search_answer(&other).unwrap_err(),
            SearchAnswerError::UnknownFormat(2)
        );
        // Cut anywhere, or with a byte after it: refused, never read short.
        for cut in SEARCH_ANSWER_HEADER_LEN..bytes.len() {
            assert!(decode_search_answer(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut long = bytes.clone();
        long.push(0);
        assert_eq!(
            decode_search_answer(&long).unwrap_err(),
            SearchAnswerError::BadLength("files")
        );
        // Hostile counts are refused before anything is sized by them.
        let mut many = bytes.clone();
        many[12..16].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(decode_search_answer(&many).is_err());
        for at in [24, 28] {
            let mut hits = bytes.clone();
            let at = SEARCH_ANSWER_HEADER_LEN + 13 + at;
            hits[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
            assert!(decode_search_answer(&hits).is_err());
        }
        // One hit fewer than the bytes hold.
        let mut fewer = bytes.clone();
        fewer[SEARCH_ANSWER_HEADER_LEN + 13 + 24] = 1;
        assert_eq!(
            decode_search_answer(&fewer).unwrap_err(),
            SearchAnswerError::BadHits
        );
        let mut path = bytes;
        path[SEARCH_ANSWER_HEADER_LEN + 13 + FILE_HEAD_LEN + 2] = 0xff;
        assert_eq!(
            decode_search_answer(&path).unwrap_err(),
            SearchAnswerError::NotUtf8("path")
        );
    }
}
