//! Test inputs shared by the resemblance tests and the readers that decode deltas.

/// Text-like bytes from a seed: compressible, and different for each seed.
pub fn data(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            b"abcdefgh \n"[(x % 10) as usize]
        })
        .collect()
}

/// `base` with one byte changed at `at` and one inserted at `at / 2`: a small edit, as a
/// delta against `base` is meant for.
pub fn edit(base: &[u8], at: usize) -> Vec<u8> {
    let mut v = base.to_vec();
    v[at] ^= 0x55;
    v.insert(at / 2, b'!');
    v
}
