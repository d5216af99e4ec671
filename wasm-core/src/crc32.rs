//! CRC-32 (IEEE 802.3, the zip checksum), slicing-by-16: sixteen table lookups per 16 input
//! bytes, independent of each other but for the first four. wasm32 has no carry-less
//! multiply, so the folding (PCLMUL) method that native CRC libraries use is not available in
//! the page; of the table methods, sixteen tables (16 KiB) run faster than eight in Wasm
//! (docs/BENCHMARKS.md, "CRC-32 (the zip checksum) and zstd").

const POLY: u32 = 0xedb8_8320;

/// `t[0]` is the byte-at-a-time table; `t[s][i]` is the CRC of byte `i` followed by `s` zero
/// bytes, so one lookup per input byte accounts for where it sits in a 16-byte block.
const fn tables() -> [[u32; 256]; 16] {
    let mut t = [[0u32; 256]; 16];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 { (c >> 1) ^ POLY } else { c >> 1 };
            k += 1;
        }
        t[0][i] = c;
        i += 1;
    }
    let mut s = 1;
    while s < 16 {
        let mut i = 0;
        while i < 256 {
            let prev = t[s - 1][i];
            t[s][i] = (prev >> 8) ^ t[0][(prev & 0xff) as usize];
            i += 1;
        }
        s += 1;
    }
    t
}

static TABLES: [[u32; 256]; 16] = tables();

/// Continues `crc` (0 for a fresh one) over `data`.
pub fn update(crc: u32, data: &[u8]) -> u32 {
    let t = &TABLES;
    let mut c = !crc;
    let mut blocks = data.chunks_exact(16);
    for b in &mut blocks {
        let lo = c ^ u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        c = t[15][(lo & 0xff) as usize]
            ^ t[14][((lo >> 8) & 0xff) as usize]
            ^ t[13][((lo >> 16) & 0xff) as usize]
            ^ t[12][(lo >> 24) as usize]
            ^ t[11][b[4] as usize]
            ^ t[10][b[5] as usize]
            ^ t[9][b[6] as usize]
            ^ t[8][b[7] as usize]
            ^ t[7][b[8] as usize]
            ^ t[6][b[9] as usize]
            ^ t[5][b[10] as usize]
            ^ t[4][b[11] as usize]
            ^ t[3][b[12] as usize]
            ^ t[2][b[13] as usize]
            ^ t[1][b[14] as usize]
            ^ t[0][b[15] as usize];
    }
    for &b in blocks.remainder() {
        c = (c >> 8) ^ t[0][((c ^ b as u32) & 0xff) as usize];
    }
    !c
}

/// The CRC-32 of `data`.
pub fn crc32(data: &[u8]) -> u32 {
    update(0, data)
}

/// a(x) * b(x) modulo the CRC polynomial (bit-reflected, as zlib's `multmodp`).
fn mult_mod_p(a: u32, mut b: u32) -> u32 {
    let mut m = 1u32 << 31;
    let mut p = 0u32;
    loop {
        if a & m != 0 {
            p ^= b;
            if a & (m - 1) == 0 {
                break;
            }
        }
        m >>= 1;
        b = if b & 1 != 0 { (b >> 1) ^ POLY } else { b >> 1 };
    }
    p
}

/// The CRC of `A` followed by `B` from `crc(A)`, `crc(B)` and `len(B)` (zlib's
/// `crc32_combine`): a file's checksum from the checksums of its chunks.
pub fn combine(crc_a: u32, crc_b: u32, len_b: u64) -> u32 {
    // x^(8 * len_b) mod P by squaring: x^(2^k) for the set bits of 8 * len_b.
    let mut p = 1u32 << 31; // x^0
    let mut x2k = 1u32 << 30; // x^1
    let mut n = len_b.wrapping_mul(8);
    while n != 0 {
        if n & 1 != 0 {
            p = mult_mod_p(x2k, p);
        }
        x2k = mult_mod_p(x2k, x2k);
        n >>= 1;
    }
    mult_mod_p(p, crc_a) ^ crc_b
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bitwise(data: &[u8]) -> u32 {
        let mut c = !0u32;
        for &b in data {
            c ^= b as u32;
            for _ in 0..8 {
                c = if c & 1 != 0 { (c >> 1) ^ POLY } else { c >> 1 };
            }
        }
        !c
    }

    #[test]
    fn known_values_and_the_bitwise_definition() {
        assert_eq!(crc32(b""), 0);
        assert_eq!(crc32(b"123456789"), 0xcbf4_3926);
        let data: Vec<u8> = (0..10_007u32).map(|i| (i * 31 + i / 7) as u8).collect();
        for len in [0, 1, 7, 8, 9, 15, 16, 17, 31, 33, 63, 64, 65, 1000, 10_007] {
            assert_eq!(crc32(&data[..len]), bitwise(&data[..len]), "{len}");
        }
        assert_eq!(update(crc32(&data[..333]), &data[333..]), crc32(&data));
    }

    #[test]
    fn equals_the_crc32fast_crate() {
        let data = crate::chunk::test_bytes(0x9e37_79b9, 70_000);
        for (start, len) in [
            (0, 70_000),
            (1, 16),
            (3, 17),
            (5, 4099),
            (7, 65_536),
            (11, 0),
        ] {
            let d = &data[start..start + len];
            assert_eq!(crc32(d), crc32fast::hash(d), "{start}+{len}");
        }
    }

    #[test]
    fn combine_equals_the_crc_of_the_concatenation() {
        let data: Vec<u8> = (0..50_000u32).map(|i| (i ^ (i >> 5)) as u8).collect();
        for cut in [0, 1, 8, 4096, 49_999, 50_000] {
            let (a, b) = data.split_at(cut);
            assert_eq!(
                combine(crc32(a), crc32(b), b.len() as u64),
                crc32(&data),
                "{cut}"
            );
        }
    }
}
