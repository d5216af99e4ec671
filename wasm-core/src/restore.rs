//! Restore verification: a `chunks/get` bundle decoded and every chunk checked against its
//! fingerprint in one pass, with each chunk's CRC-32 for the zip the page writes. Nothing
//! unverified leaves here.

use crate::{
    compress, crc32,
    format::bundle::{decode_bundle, Codec},
    hash::{self, Fingerprint},
};

/// A bundle whose chunks all verified: raw bytes back to back in bundle order.
pub struct VerifiedBundle {
    pub fps: Vec<Fingerprint>,
    pub lengths: Vec<u32>,
    pub crcs: Vec<u32>,
    pub raw: Vec<u8>,
}

/// Why a bundle was refused: `chunk` (index, fingerprint) is damaged, or the bundle itself is
/// malformed (`chunk` is `None`).
#[derive(Debug, PartialEq, Eq)]
pub struct Refused {
    pub chunk: Option<(usize, Fingerprint)>,
    pub reason: String,
}

/// Decodes every chunk of `bundle` (zstd capped at its raw length) and checks that each is
/// the stored chunk it was sent under ([`hash::first_not_stored_flat`]: the multi-buffer
/// plain SHA-1, the fingerprint where that differs).
pub fn verify_bundle(bundle: &[u8]) -> Result<VerifiedBundle, Refused> {
    let entries = decode_bundle(bundle).map_err(|e| Refused {
        chunk: None,
        reason: e.to_string(),
    })?;
    let total: usize = entries.iter().map(|e| e.raw_len as usize).sum();
    let mut raw = Vec::with_capacity(total);
    let mut ranges = Vec::with_capacity(entries.len());
    let mut crcs = Vec::with_capacity(entries.len());
    for (k, e) in entries.iter().enumerate() {
        let bad = |reason: String| Refused {
            chunk: Some((k, e.fp)),
            reason,
        };
        let start = raw.len();
        match e.codec {
            Codec::Raw => {
                if e.payload.len() != e.raw_len as usize {
                    return Err(bad(format!(
                        "stored length {} != raw length {}",
                        e.payload.len(),
                        e.raw_len
                    )));
                }
                raw.extend_from_slice(e.payload);
            }
            Codec::Zstd => {
                let out = compress::decompress(compress::CODEC_ZSTD, e.payload, e.raw_len as usize)
                    .map_err(|why| bad(format!("its zstd data does not decode ({why})")))?;
                raw.extend_from_slice(&out);
            }
            Codec::Delta => {
                return Err(bad("codec 2 is not supported by this restore".into()));
            }
        }
        crcs.push(crc32::crc32(&raw[start..]));
        ranges.push((start, e.raw_len as usize));
    }
    let fps: Vec<u8> = entries.iter().flat_map(|e| e.fp).collect();
    if let Some((k, got)) = hash::first_not_stored_flat(&raw, &ranges, &fps) {
        return Err(Refused {
            chunk: Some((k, entries[k].fp)),
            reason: format!(
                "its bytes fingerprint as {}, not as its fingerprint",
                hash::to_hex(&got)
            ),
        });
    }
    Ok(VerifiedBundle {
        fps: entries.iter().map(|e| e.fp).collect(),
        lengths: entries.iter().map(|e| e.raw_len).collect(),
        crcs,
        raw,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::bundle::BundleWriter;

    fn sample() -> (Vec<Vec<u8>>, Vec<u8>) {
        let chunks: Vec<Vec<u8>> = (0..5u32)
            .map(|i| {
                (0..(1000 + i * 777))
                    .map(|j| (j * (i + 3) / 5) as u8)
                    .collect()
            })
            .collect();
        let mut w = BundleWriter::new();
        for (i, c) in chunks.iter().enumerate() {
            let fp = hash::fingerprint(c);
            if i % 2 == 0 {
                let z = zstd::bulk::compress(c, 3).unwrap();
                w.push(&fp, Codec::Zstd, c.len() as u32, &z);
            } else {
                w.push(&fp, Codec::Raw, c.len() as u32, c);
            }
        }
        (chunks, w.finish())
    }

    #[test]
    fn verifies_decodes_and_checksums_every_chunk() {
        let (chunks, bundle) = sample();
        let v = verify_bundle(&bundle).unwrap();
        assert_eq!(v.raw, chunks.concat());
        assert_eq!(
            v.lengths,
            chunks.iter().map(|c| c.len() as u32).collect::<Vec<_>>()
        );
        assert_eq!(
            v.crcs,
            chunks.iter().map(|c| crc32::crc32(c)).collect::<Vec<_>>()
        );
        assert_eq!(
            v.fps,
            chunks
                .iter()
                .map(|c| hash::fingerprint(c))
                .collect::<Vec<_>>()
        );
    }

    #[test]
    fn names_the_damaged_chunk() {
        let (chunks, bundle) = sample();
        // Flip a byte in the payload of the second (raw) chunk.
        let at = 16
            + 32
            + {
                let z = zstd::bulk::compress(&chunks[0], 3).unwrap();
                z.len()
            }
            + 32
            + 10;
        let mut bad = bundle.clone();
        bad[at] ^= 1;
        let e = verify_bundle(&bad).err().unwrap();
        assert_eq!(e.chunk, Some((1, hash::fingerprint(&chunks[1]))));
        assert!(e.reason.contains("fingerprint as"), "{}", e.reason);
        let e = verify_bundle(&bundle[..bundle.len() - 1]).err().unwrap();
        assert_eq!(e.chunk, None);
    }
}
