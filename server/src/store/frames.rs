//! Frames: the delta pass's last step, storing a version's new chunks together (docs/FORMAT.md,
//! "Codec 2, method 3: frames and slices"; issue 17, beyond DARE).
//!
//! DARE (§3.4) stores each similar chunk as a delta against one base chunk. What that leaves
//! is redundancy further away: between the new chunks of one version and between a chunk and
//! the neighbours of its base. A frame is a run of the version's new chunks (at most 1 MiB of
//! raw bytes) stored as one chunk no manifest names, compressed whole or as a delta against
//! **one** older frame, so every member copies from the other members and from the whole
//! older frame; each member becomes a 25-byte slice of its frame.
//!
//! Which older frame: each member carries the base the pass found for it (DupAdj,
//! super-features or the dictionary); the frame that base sits in is the member's *target*.
//! Members are grouped by target, in first-use order within a group, and each group is cut
//! into frames of at most 1 MiB. Each frame then takes as its base the target most of its
//! members' raw bytes point to, counting the frames of this version already made (so a
//! version's later frames reach its earlier ones). docs/BENCHMARKS.md, "Frames with one
//! base", measured this grouping against one base per chunk and against several bases per
//! frame.
//!
//! Chains stay within the reader's cap of `MAX_CHAIN_DEPTH` links: a frame's own chain is
//! kept within one link less, so that its slices, one link more, stay within it. A target
//! deeper than that is replaced by its own base. A frame is kept only if it and its slices
//! store less than its members do as the pass would otherwise store them.

use std::{
    collections::{HashMap, HashSet},
    rc::Rc,
};

use wasm_core::{
    compress::{Compressor, CODEC_ZSTD},
    format::bundle::MAX_CHUNK_RAW,
    hash::{fingerprint, Fingerprint},
    resemble::{
        delta::{DeltaEncoder, CODEC_DELTA, MAX_CHAIN_DEPTH},
        frame::{Frame, SLICE_LEN},
    },
};

use super::delta::DecodeBack;

/// Whether the delta pass stores frames: on unless `DITTO_FRAMES=0`.
pub fn frames_enabled() -> bool {
    std::env::var("DITTO_FRAMES").map_or(true, |v| v != "0")
}

/// zstd level of frames: a frame is written once, off the upload path, and its members
/// share its cost.
pub const FRAME_LEVEL: i32 = 19;

/// zstd level at which a frame is encoded both against its base and whole to choose how it
/// is stored, so that only the stored form costs [`FRAME_LEVEL`] (what a choice at this
/// level gives up: docs/BENCHMARKS.md, "Restoring from frames").
pub const PROBE_LEVEL: i32 = 3;

/// Deepest chain a frame may have, so that its slices stay within the readers' cap.
pub const FRAME_MAX_DEPTH: usize = MAX_CHAIN_DEPTH - 1;

/// A frame the pass stores.
pub struct NewFrame {
    pub fp: Fingerprint,
    pub raw_len: u32,
    /// `CODEC_DELTA` against `base`, or `CODEC_ZSTD` whole.
    pub codec: u8,
    pub base: Option<Fingerprint>,
    pub payload: Vec<u8>,
    /// Each member and its offset in the frame's raw bytes.
    pub members: Vec<(Fingerprint, u32)>,
    /// Links of its own chain.
    pub depth: usize,
}

/// What [`plan`] needs of the pass.
pub trait Inputs {
    /// The next chunk down a chunk's chain: the base the pass chose for a candidate, the
    /// stored base of any other chunk.
    fn base(&self, fp: &Fingerprint) -> Option<Fingerprint>;
    /// The frame a stored slice is a slice of.
    fn slice_frame(&self, fp: &Fingerprint) -> Option<Fingerprint>;
    /// Links of a stored chunk's chain.
    fn depth(&self, fp: &Fingerprint) -> usize;
    /// What a member stores if it is not in a frame.
    fn stored_len(&self, fp: &Fingerprint) -> u64;
    /// Raw bytes of a chunk, verified (`None`: unreadable).
    fn raw(&mut self, fp: &Fingerprint) -> Option<Rc<Vec<u8>>>;
    /// Whether the repository stores a chunk of this fingerprint.
    fn stored(&self, fp: &Fingerprint) -> bool;
}

/// A member and its raw bytes.
type Member = (Fingerprint, Rc<Vec<u8>>);

/// A frame as a target: its fingerprint and the links of its chain.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct Target {
    fp: Fingerprint,
    depth: usize,
}

/// Frames for `members` (the version's candidates, first-use order); a member left out
/// (unreadable, or in a frame that would not pay or did not decode back through `back`)
/// keeps what the pass chose for it.
pub fn plan(
    members: &[Fingerprint],
    inputs: &mut dyn Inputs,
    back: &mut DecodeBack,
) -> Vec<NewFrame> {
    let is_member: HashSet<Fingerprint> = members.iter().copied().collect();
    let mut frames: Vec<NewFrame> = Vec::new();
    let mut framed: HashMap<Fingerprint, usize> = HashMap::new();
    let mut raws: Vec<Rc<Vec<u8>>> = Vec::new();

    // Groups by the target each member has before any frame of this version exists.
    let mut groups: Vec<(Option<Target>, Vec<Member>)> = Vec::new();
    for fp in members {
        // A chunk that stores no more than a slice would gains nothing from a frame.
        if inputs.stored_len(fp) <= SLICE_LEN as u64 {
            continue;
        }
        let Some(raw) = inputs.raw(fp) else { continue };
        let t = target(fp, &is_member, &framed, &frames, inputs);
        match groups.iter_mut().find(|(g, _)| *g == t) {
            Some((_, ms)) => ms.push((*fp, raw)),
            None => groups.push((t, vec![(*fp, raw)])),
        }
    }
    let mut coders = Coders::new();
    for (group_target, ms) in groups {
        for cut in cut(&ms) {
            // The target most of the frame's raw bytes point to now.
            let mut votes: Vec<(Target, u64)> = Vec::new();
            for (fp, raw) in cut {
                if let Some(t) = target(fp, &is_member, &framed, &frames, inputs) {
                    match votes.iter_mut().find(|(v, _)| *v == t) {
                        Some((_, n)) => *n += raw.len() as u64,
                        None => votes.push((t, raw.len() as u64)),
                    }
                }
            }
            let best = votes
                .iter()
                .fold(None::<(Target, u64)>, |b, &(t, n)| match b {
                    Some((_, m)) if m >= n => b,
                    _ => Some((t, n)),
                })
                .map(|(t, _)| t)
                .or(group_target);
            let frame = Frame::of(cut.iter().map(|(_, r)| r.as_slice()));
            let base_raw = best.and_then(|t| match framed_raw(&t.fp, &frames, &raws) {
                Some(r) => Some(r),
                None => inputs.raw(&t.fp),
            });
            let Some((codec, base, payload)) = encode(
                &mut coders,
                back,
                &frame.raw,
                best.zip(base_raw.as_deref().map(|b| b.as_slice())),
            ) else {
                continue;
            };
            let replaces: u64 = cut.iter().map(|(fp, _)| inputs.stored_len(fp)).sum();
            let cost = (payload.len() + SLICE_LEN * cut.len()) as u64;
            if cost >= replaces {
                continue;
            }
            let fp = fingerprint(&frame.raw);
            // A frame whose bytes are a chunk's already (one member, or members that another
            // version stored as one chunk) is not stored again: left as they are.
            if is_member.contains(&fp) || frames.iter().any(|f| f.fp == fp) || inputs.stored(&fp) {
                continue;
            }
            let k = frames.len();
            for (fp, _) in cut {
                framed.insert(*fp, k);
            }
            frames.push(NewFrame {
                fp,
                raw_len: frame.raw.len() as u32,
                codec,
                base: base.map(|t| t.fp),
                payload,
                members: cut.iter().map(|(fp, _)| *fp).zip(frame.offsets).collect(),
                depth: base.map_or(0, |t| t.depth + 1),
            });
            raws.push(Rc::new(frame.raw));
        }
    }
    frames
}

/// The encoders of a pass's frames: at [`PROBE_LEVEL`] to choose between a delta against the
/// frame's base and the frame whole, at [`FRAME_LEVEL`] for the one stored.
struct Coders {
    probe: Option<(DeltaEncoder, Compressor)>,
    delta: Option<DeltaEncoder>,
    whole: Option<Compressor>,
}

impl Coders {
    fn new() -> Self {
        Coders {
            probe: DeltaEncoder::new(PROBE_LEVEL)
                .ok()
                .zip(Compressor::new(PROBE_LEVEL).ok()),
            delta: DeltaEncoder::new(FRAME_LEVEL).ok(),
            whole: Compressor::new(FRAME_LEVEL).ok(),
        }
    }
}

/// `raw` stored as a delta against `target` (the frame's base and its raw bytes) or whole,
/// whichever the probe finds smaller: `(codec, base, payload)`, or `None` if neither
/// encodes (a frame whole zstd does not shrink is not worth storing) or the choice does not
/// decode back through `back`.
fn encode(
    coders: &mut Coders,
    back: &mut DecodeBack,
    raw: &[u8],
    target: Option<(Target, &[u8])>,
) -> Option<(u8, Option<Target>, Vec<u8>)> {
    if let (Some((t, b)), Some((delta, whole))) = (target, coders.probe.as_mut()) {
        let delta_len = delta.encode(&t.fp, b, raw).ok().map(|p| p.len());
        let (codec, whole) = whole.compress(raw);
        if delta_len.is_some_and(|n| codec != CODEC_ZSTD || n < whole.len()) {
            if let Some(p) = coders
                .delta
                .as_mut()
                .and_then(|e| e.encode(&t.fp, b, raw).ok())
            {
                let p = back.check(CODEC_DELTA, p.to_vec(), Some((&t.fp, b)), raw)?;
                return Some((CODEC_DELTA, Some(t), p));
            }
        }
    }
    let (codec, bytes) = coders.whole.as_mut()?.compress(raw);
    if codec != CODEC_ZSTD {
        return None;
    }
    let bytes = back.check(CODEC_ZSTD, bytes.to_vec(), None, raw)?;
    Some((CODEC_ZSTD, None, bytes))
}

/// The raw bytes of a frame made in this pass.
fn framed_raw(fp: &Fingerprint, frames: &[NewFrame], raws: &[Rc<Vec<u8>>]) -> Option<Rc<Vec<u8>>> {
    frames
        .iter()
        .position(|f| f.fp == *fp)
        .map(|k| raws[k].clone())
}

/// Runs of `ms` of at most [`MAX_CHUNK_RAW`] raw bytes, in order.
fn cut(ms: &[Member]) -> Vec<&[Member]> {
    let mut out = Vec::new();
    let (mut start, mut size) = (0, 0usize);
    for (k, (_, raw)) in ms.iter().enumerate() {
        if k > start && size + raw.len() > MAX_CHUNK_RAW as usize {
            out.push(&ms[start..k]);
            (start, size) = (k, 0);
        }
        size += raw.len();
    }
    if start < ms.len() {
        out.push(&ms[start..]);
    }
    out
}

/// The frame (or whole chunk) member `fp`'s base sits in, within [`FRAME_MAX_DEPTH`] once a
/// frame is made against it: a frame of this pass, the frame of a stored slice, or a stored
/// chunk that is no slice (a dictionary). A member of this version not yet in a frame is
/// passed over for its own base; a target too deep for its own.
fn target(
    fp: &Fingerprint,
    is_member: &HashSet<Fingerprint>,
    framed: &HashMap<Fingerprint, usize>,
    frames: &[NewFrame],
    inputs: &dyn Inputs,
) -> Option<Target> {
    let mut at = inputs.base(fp)?;
    // Every step goes one link down a chain the pass checked or built within the cap, so
    // this ends; the bound is for a damaged index.
    for _ in 0..4 * MAX_CHAIN_DEPTH {
        let t = if let Some(&k) = framed.get(&at) {
            Target {
                fp: frames[k].fp,
                depth: frames[k].depth,
            }
        } else if is_member.contains(&at) {
            at = inputs.base(&at)?;
            continue;
        } else if let Some(frame) = inputs.slice_frame(&at) {
            Target {
                fp: frame,
                depth: inputs.depth(&frame),
            }
        } else {
            Target {
                fp: at,
                depth: inputs.depth(&at),
            }
        };
        if t.depth < FRAME_MAX_DEPTH {
            return Some(t);
        }
        at = match frames.iter().find(|f| f.fp == t.fp) {
            Some(f) => f.base?,
            None => inputs.base(&t.fp)?,
        };
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasm_core::{
        chunk::test_bytes as bytes,
        resemble::{delta::DeltaDecoder, frame::slice_payload},
    };

    /// `b` with a few bytes changed.
    fn edit(b: &[u8], seed: u64) -> Vec<u8> {
        let mut out = b.to_vec();
        for (k, v) in bytes(seed, 8).into_iter().enumerate() {
            let at = (k * 997 + seed as usize) % out.len();
            out[at] = v;
        }
        out
    }

    /// A repository in memory: chunks' raw bytes, stored bases, stored slices' frames, and
    /// the bases the pass chose for its candidates.
    #[derive(Default)]
    struct Repo {
        raw: HashMap<Fingerprint, Rc<Vec<u8>>>,
        parent: HashMap<Fingerprint, Fingerprint>,
        slices: HashSet<Fingerprint>,
        chosen: HashMap<Fingerprint, Fingerprint>,
        members: HashSet<Fingerprint>,
    }

    impl Repo {
        fn chunk(&mut self, raw: Vec<u8>) -> Fingerprint {
            let fp = fingerprint(&raw);
            self.raw.insert(fp, Rc::new(raw));
            fp
        }
    }

    impl Inputs for Repo {
        fn base(&self, fp: &Fingerprint) -> Option<Fingerprint> {
            if self.members.contains(fp) {
                return self.chosen.get(fp).copied();
            }
            self.parent.get(fp).copied()
        }
        fn slice_frame(&self, fp: &Fingerprint) -> Option<Fingerprint> {
            self.slices
                .contains(fp)
                .then(|| self.parent.get(fp).copied())
                .flatten()
        }
        fn depth(&self, fp: &Fingerprint) -> usize {
            let (mut d, mut at) = (0, *fp);
            while let Some(p) = self.parent.get(&at) {
                d += 1;
                at = *p;
            }
            d
        }
        fn stored_len(&self, fp: &Fingerprint) -> u64 {
            self.raw[fp].len() as u64
        }
        fn raw(&mut self, fp: &Fingerprint) -> Option<Rc<Vec<u8>>> {
            self.raw.get(fp).cloned()
        }
        fn stored(&self, fp: &Fingerprint) -> bool {
            self.raw.contains_key(fp) && !self.members.contains(fp)
        }
    }

    #[test]
    fn members_go_to_the_frame_of_their_base_within_the_cap_and_read_back() {
        let mut r = Repo::default();
        // Stored: frame f0 (whole), and frame f1 at the cap (three links: f1 -> f2 -> x -> y),
        // with a slice of each.
        let f0 = r.chunk(bytes(1, 200_000));
        let y = r.chunk(bytes(5, 1000));
        let x = r.chunk(bytes(4, 1000));
        let f2 = r.chunk(bytes(2, 200_000));
        let f1 = r.chunk(bytes(3, 200_000));
        r.parent.extend([(x, y), (f2, x), (f1, f2)]);
        let s0 = r.chunk(r.raw[&f0][..10_000].to_vec());
        let s1 = r.chunk(r.raw[&f1][..10_000].to_vec());
        r.parent.extend([(s0, f0), (s1, f1)]);
        r.slices.extend([s0, s1]);
        // Candidates: two edits of f0's bytes (one found through the other), two edits of
        // f2's bytes found through f1's slice (f1 is too deep to be a frame's base: its base
        // f2 is taken), one with no base.
        let f0raw = r.raw[&f0].clone();
        let f2raw = r.raw[&f2].clone();
        let m1 = r.chunk(edit(&f0raw[..60_000], 1));
        let m2 = r.chunk(edit(&f0raw[60_000..120_000], 2));
        let m3 = r.chunk(edit(&f2raw[..50_000], 3));
        let m4 = r.chunk(edit(&f2raw[50_000..100_000], 4));
        let m5 = r.chunk(bytes(9, 30_000));
        let members = vec![m1, m2, m3, m4, m5];
        r.members.extend(members.iter().copied());
        r.chosen.extend([(m1, s0), (m2, m1), (m3, s1), (m4, s1)]);

        let frames = plan(&members, &mut r, &mut DecodeBack::new().unwrap());
        let base_of = |m: &Fingerprint| frames.iter().find(|f| f.members.iter().any(|x| x.0 == *m));
        let a = base_of(&m1).expect("m1 framed");
        assert_eq!(a.base, Some(f0));
        assert!(a.members.iter().any(|x| x.0 == m2));
        let b = base_of(&m3).expect("m3 framed");
        assert_eq!(b.base, Some(f2));
        assert_eq!(b.depth, 3);
        // m5 alone in its group: a frame of one member is the member itself.
        assert!(base_of(&m5).is_none());
        let mut dec = DeltaDecoder::new().unwrap();
        for f in &frames {
            assert!(f.depth <= FRAME_MAX_DEPTH);
            let raw = match f.base {
                Some(b) => dec
                    .decode(&f.payload, &b, &r.raw[&b], f.raw_len as usize)
                    .unwrap(),
                None => wasm_core::compress::decompress(f.codec, &f.payload, f.raw_len as usize)
                    .unwrap(),
            };
            assert_eq!(fingerprint(&raw), f.fp);
            // Each member is its slice of the frame, and the frame stores far less.
            let mut stored = f.payload.len();
            for (m, at) in &f.members {
                let p = slice_payload(&f.fp, *at);
                let want = &r.raw[m];
                assert_eq!(dec.decode(&p, &f.fp, &raw, want.len()).unwrap(), **want);
                stored += SLICE_LEN;
            }
            let before: usize = f.members.iter().map(|(m, _)| r.raw[m].len()).sum();
            assert!(stored * 10 < before, "{stored} of {before}");
        }
    }
}
