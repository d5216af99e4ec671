//! Multi-buffer SHA-1: four independent messages hashed at once, one per u32 lane.
//!
//! Plain SHA-1 without collision detection, so not a chunk fingerprint: the backup's lookup
//! keys, which a chunk to be stored has confirmed first (see the module `hash`).
//!
//! SHA-1 is a serial chain within one message, so a single message cannot use SIMD well;
//! many chunk fingerprints can. Each lane runs the ordinary FIPS 180-4 compression on its
//! own message. A scheduler keeps the four lanes busy: it runs as many compressions as the
//! lane with the fewest blocks left needs, then retires finished lanes (digest out) and
//! loads the next messages. Full blocks are read straight from the caller's buffer; only
//! the last one or two (padding) blocks of a message are assembled in a small per-lane
//! buffer; idle lanes read a zero block and their results are ignored.
//!
//! The rounds are written with renamed variables (macros), not loops over arrays, so the
//! state stays in registers / Wasm locals.

use super::lanes::Lanes;
#[cfg(target_arch = "wasm32")]
use super::lanes::Vec4;
use super::{Fingerprint, FINGERPRINT_LEN};

const IV: [u32; 5] = [
    0x6745_2301,
    0xEFCD_AB89,
    0x98BA_DCFE,
    0x1032_5476,
    0xC3D2_E1F0,
];
const K: [u32; 4] = [0x5A82_7999, 0x6ED9_EBA1, 0x8F1B_BCDC, 0xCA62_C1D6];
static ZERO_BLOCK: [u8; 64] = [0; 64];

/// One SHA-1 compression on four lanes.
#[inline(always)]
fn compress4<L: Lanes>(st: &mut [L; 5], blocks: [&[u8; 64]; 4], k: &[L; 4]) {
    let mut w = L::load_blocks(blocks);
    let (mut a, mut b, mut c, mut d, mut e) = (st[0], st[1], st[2], st[3], st[4]);

    // f for rounds 0-19 (choose), 20-39 and 60-79 (parity), 40-59 (majority).
    macro_rules! f {
        (ch, $b:ident, $c:ident, $d:ident) => {
            L::select($c, $d, $b)
        };
        (par, $b:ident, $c:ident, $d:ident) => {
            $b.xor($c).xor($d)
        };
        (maj, $b:ident, $c:ident, $d:ident) => {
            L::select($c, $b, $b.xor($d))
        };
    }
    // Message word t; from t = 16 on it is expanded in place in a 16-word ring.
    macro_rules! word {
        ($t:expr) => {{
            if $t >= 16 {
                w[$t & 15] = w[($t + 13) & 15]
                    .xor(w[($t + 8) & 15])
                    .xor(w[($t + 2) & 15])
                    .xor(w[$t & 15])
                    .rotl::<1>();
            }
            w[$t & 15]
        }};
    }
    macro_rules! round {
        ($f:ident, $k:expr, $t:expr, $a:ident, $b:ident, $c:ident, $d:ident, $e:ident) => {
            $e = $e
                .add($a.rotl::<5>())
                .add(f!($f, $b, $c, $d))
                .add($k)
                .add(word!($t));
            $b = $b.rotl::<30>();
        };
    }
    // Five rounds rotate the roles of a..e back to where they started.
    macro_rules! five {
        ($f:ident, $k:expr, $t:expr) => {
            round!($f, $k, $t, a, b, c, d, e);
            round!($f, $k, $t + 1, e, a, b, c, d);
            round!($f, $k, $t + 2, d, e, a, b, c);
            round!($f, $k, $t + 3, c, d, e, a, b);
            round!($f, $k, $t + 4, b, c, d, e, a);
        };
    }
    five!(ch, k[0], 0);
    five!(ch, k[0], 5);
    five!(ch, k[0], 10);
    five!(ch, k[0], 15);
    five!(par, k[1], 20);
    five!(par, k[1], 25);
    five!(par, k[1], 30);
    five!(par, k[1], 35);
    five!(maj, k[2], 40);
    five!(maj, k[2], 45);
    five!(maj, k[2], 50);
    five!(maj, k[2], 55);
    five!(par, k[3], 60);
    five!(par, k[3], 65);
    five!(par, k[3], 70);
    five!(par, k[3], 75);

    st[0] = st[0].add(a);
    st[1] = st[1].add(b);
    st[2] = st[2].add(c);
    st[3] = st[3].add(d);
    st[4] = st[4].add(e);
}

/// What one lane is hashing.
struct Lane {
    /// Index of the message (into `ranges` / `out`).
    msg: usize,
    data_start: usize,
    full_blocks: usize,
    total_blocks: usize,
    next_block: usize,
    /// The message tail, the 0x80 marker, zeros and the 64-bit bit length.
    tail: [u8; 128],
}

impl Lane {
    fn new(msg: usize, buf: &[u8], off: usize, len: usize) -> Lane {
        let full_blocks = len / 64;
        let total_blocks = (len + 8) / 64 + 1;
        let rest = &buf[off + full_blocks * 64..off + len];
        let mut tail = [0u8; 128];
        tail[..rest.len()].copy_from_slice(rest);
        tail[rest.len()] = 0x80;
        let tail_end = (total_blocks - full_blocks) * 64;
        tail[tail_end - 8..tail_end].copy_from_slice(&((len as u64) * 8).to_be_bytes());
        Lane {
            msg,
            data_start: off,
            full_blocks,
            total_blocks,
            next_block: 0,
            tail,
        }
    }

    #[inline(always)]
    fn block<'a>(&'a self, buf: &'a [u8]) -> &'a [u8; 64] {
        let k = self.next_block;
        let s: &[u8] = if k < self.full_blocks {
            let at = self.data_start + 64 * k;
            &buf[at..at + 64]
        } else {
            let at = 64 * (k - self.full_blocks);
            &self.tail[at..at + 64]
        };
        s.try_into().expect("64-byte block")
    }
}

/// Plain SHA-1 of many messages, given as `(offset, length)` ranges of one buffer; digest `i`
/// goes to `out[i]`. Panics if a range lies outside `buf` or `out` is shorter than
/// `ranges`.
pub fn sha1_many(buf: &[u8], ranges: &[(usize, usize)], out: &mut [Fingerprint]) {
    sha1_many_flat(buf, ranges, out.as_flattened_mut())
}

/// Same as [`sha1_many`], writing 20 bytes per digest into a flat byte slice.
///
/// In Wasm this is the simd128 multi-buffer path. Natively it hashes one chunk at a time
/// with the `sha1` crate, which uses the CPU's SHA extensions where present and is then
/// faster than 4 portable lanes (measured: docs/BENCHMARKS.md); the portable lanes stay
/// available, and tested, as [`sha1_many_portable`].
pub fn sha1_many_flat(buf: &[u8], ranges: &[(usize, usize)], out: &mut [u8]) {
    #[cfg(target_arch = "wasm32")]
    {
        sha1_many_with::<Vec4>(buf, ranges, out)
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        assert!(
            out.len() >= ranges.len() * FINGERPRINT_LEN,
            "output shorter than the batch"
        );
        for (i, &(off, len)) in ranges.iter().enumerate() {
            out[i * FINGERPRINT_LEN..][..FINGERPRINT_LEN]
                .copy_from_slice(&<sha1::Sha1 as sha1::Digest>::digest(&buf[off..off + len]));
        }
    }
}

fn sha1_many_with<L: Lanes>(buf: &[u8], ranges: &[(usize, usize)], out: &mut [u8]) {
    assert!(
        out.len() >= ranges.len() * FINGERPRINT_LEN,
        "output shorter than the batch"
    );
    for &(off, len) in ranges {
        assert!(
            off.checked_add(len).is_some_and(|e| e <= buf.len()),
            "range out of buffer"
        );
    }
    let mut st: [L; 5] = std::array::from_fn(|i| L::splat(IV[i]));
    // Round constants as run-time values: kept in locals across the loop instead of being
    // rematerialised as constants in every round (V8 builds a v128 constant from GPRs).
    let kv: [L; 4] = std::array::from_fn(|i| L::splat(std::hint::black_box(K[i])));
    let mut lanes: [Option<Lane>; 4] = [None, None, None, None];
    let mut next_msg = 0;
    loop {
        // Load idle lanes with the next messages.
        for (l, slot) in lanes.iter_mut().enumerate() {
            if slot.is_none() && next_msg < ranges.len() {
                let (off, len) = ranges[next_msg];
                *slot = Some(Lane::new(next_msg, buf, off, len));
                for (j, s) in st.iter_mut().enumerate() {
                    *s = s.with_lane(l, IV[j]);
                }
                next_msg += 1;
            }
        }
        // Run as many compressions as the lane closest to its end needs.
        let Some(steps) = lanes
            .iter()
            .flatten()
            .map(|ln| ln.total_blocks - ln.next_block)
            .min()
        else {
            break;
        };
        for _ in 0..steps {
            let blocks: [&[u8; 64]; 4] = std::array::from_fn(|l| match &lanes[l] {
                Some(ln) => ln.block(buf),
                None => &ZERO_BLOCK,
            });
            compress4(&mut st, blocks, &kv);
            for ln in lanes.iter_mut().flatten() {
                ln.next_block += 1;
            }
        }
        // Retire finished lanes.
        for (l, slot) in lanes.iter_mut().enumerate() {
            if let Some(ln) = slot {
                if ln.next_block == ln.total_blocks {
                    let d = &mut out[ln.msg * FINGERPRINT_LEN..][..FINGERPRINT_LEN];
                    for (j, s) in st.iter().enumerate() {
                        d[4 * j..4 * j + 4].copy_from_slice(&s.lane(l).to_be_bytes());
                    }
                    *slot = None;
                }
            }
        }
    }
}

/// The portable-lanes variant, on every target (lets Wasm tests compare it with simd128).
#[doc(hidden)]
pub fn sha1_many_portable(buf: &[u8], ranges: &[(usize, usize)], out: &mut [Fingerprint]) {
    sha1_many_with::<super::lanes::Portable>(buf, ranges, out.as_flattened_mut())
}
