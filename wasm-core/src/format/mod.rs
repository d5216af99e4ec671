//! Byte formats shared by the browser and the storage server (see `docs/FORMAT.md`).
//!
//! Pure Rust, no I/O: encoders and decoders only.

pub mod bundle;
pub mod container;
pub mod locations;
pub mod manifest;
pub mod search_answer;

use crate::hash::{Fingerprint, FINGERPRINT_LEN};

/// Parses a 40-character hex fingerprint (either case).
pub fn parse_fp_hex(s: &str) -> Option<Fingerprint> {
    let b = s.as_bytes();
    if b.len() != FINGERPRINT_LEN * 2 {
        return None;
    }
    let mut out = [0u8; FINGERPRINT_LEN];
    for (i, pair) in b.chunks_exact(2).enumerate() {
        out[i] = (hex_digit(pair[0])? << 4) | hex_digit(pair[1])?;
    }
    Some(out)
}

fn hex_digit(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

pub(crate) fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

pub(crate) fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

pub(crate) fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::{fingerprint, to_hex};

    #[test]
    fn hex_round_trip() {
        let fp = fingerprint(b"abc");
        let hex = to_hex(&fp);
        assert_eq!(parse_fp_hex(&hex), Some(fp));
        assert_eq!(parse_fp_hex(&hex.to_uppercase()), Some(fp));
        assert_eq!(parse_fp_hex(&hex[1..]), None);
        assert_eq!(parse_fp_hex(&format!("{}g", &hex[1..])), None);
    }
}
