//! Version locations (`application/x-ditto-locations`, docs/FORMAT.md "Version locations"):
//! where each distinct chunk of one version is stored, what a restore or a search plans from.
//! The server encodes them ([`encode_locations`]) and the page reads them
//! ([`decode_locations`], through `bindings::locations`).

use super::{u32_at, u64_at};
use crate::hash::{Fingerprint, FINGERPRINT_LEN};

pub const LOCATIONS_MAGIC: [u8; 4] = *b"DLOC";
/// The format written; format 1 (older servers) is read too, with no chain keys.
pub const LOCATIONS_FORMAT: u32 = 2;
pub const LOCATIONS_HEADER_LEN: usize = 16;
pub const LOCATION_RECORD_LEN: usize = 48;
/// Bytes of a fingerprint a record carries as its chain key.
pub const CHAIN_KEY_LEN: usize = 3;

/// One record: a chunk and where it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Location {
    pub fp: Fingerprint,
    pub container: u64,
    /// Offset of the stored bytes in the container file.
    pub offset: u64,
    pub stored_len: u32,
    pub raw_len: u32,
    pub codec: u8,
    /// The chain key as a number ([`chain_key_number`]); 0 in format 1, which has none
    /// ([`Locations::has_chain_keys`]).
    pub chain_key: u32,
}

/// A chain key as a number: the first [`CHAIN_KEY_LEN`] bytes of the fingerprint that names
/// it, little-endian, as a record carries them (also the `chain_key` of `GET containers`).
pub fn chain_key_number(key: &Fingerprint) -> u32 {
    le_number(&key[..CHAIN_KEY_LEN])
}

fn le_number(b: &[u8]) -> u32 {
    b.iter().rev().fold(0, |n, &b| (n << 8) | u32::from(b))
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LocationsError {
    BadMagic,
    UnknownFormat(u32),
    /// The length is not the header and `n` records.
    BadLength {
        len: usize,
        records: u32,
    },
}

impl std::fmt::Display for LocationsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LocationsError::BadMagic => write!(f, "not version locations (bad magic)"),
            LocationsError::UnknownFormat(v) => write!(
                f,
                "version locations in format {v}, formats 1 and {LOCATIONS_FORMAT} are read"
            ),
            LocationsError::BadLength { len, records } => {
                write!(f, "version locations of {len} bytes for {records} records")
            }
        }
    }
}

impl std::error::Error for LocationsError {}

/// Encodes `records` (each chunk once, in the order a restore meets them) and the count of
/// the version's chunks that are not stored, in the current format.
pub fn encode_locations(
    records: impl ExactSizeIterator<Item = Location>,
    not_stored: u32,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(LOCATIONS_HEADER_LEN + records.len() * LOCATION_RECORD_LEN);
    out.extend_from_slice(&LOCATIONS_MAGIC);
    out.extend_from_slice(&LOCATIONS_FORMAT.to_le_bytes());
    out.extend_from_slice(&(records.len() as u32).to_le_bytes());
    out.extend_from_slice(&not_stored.to_le_bytes());
    for l in records {
        out.extend_from_slice(&l.fp);
        out.extend_from_slice(&l.container.to_le_bytes());
        out.extend_from_slice(&l.offset.to_le_bytes());
        out.extend_from_slice(&l.stored_len.to_le_bytes());
        out.extend_from_slice(&l.raw_len.to_le_bytes());
        out.push(l.codec);
        out.extend_from_slice(&l.chain_key.to_le_bytes()[..CHAIN_KEY_LEN]);
    }
    out
}

/// Version locations checked and read in place.
#[derive(Debug, Clone, Copy)]
pub struct Locations<'a> {
    bytes: &'a [u8],
    format: u32,
    pub not_stored: u32,
}

/// Checks the header and the length; the records are read by [`Locations::get`].
pub fn decode_locations(bytes: &[u8]) -> Result<Locations<'_>, LocationsError> {
    if bytes.len() < LOCATIONS_HEADER_LEN || bytes[..4] != LOCATIONS_MAGIC {
        return Err(LocationsError::BadMagic);
    }
    let format = u32_at(bytes, 4);
    if format != 1 && format != LOCATIONS_FORMAT {
        return Err(LocationsError::UnknownFormat(format));
    }
    let records = u32_at(bytes, 8);
    if (bytes.len() - LOCATIONS_HEADER_LEN) as u64
        != u64::from(records) * LOCATION_RECORD_LEN as u64
    {
        return Err(LocationsError::BadLength {
            len: bytes.len(),
            records,
        });
    }
    Ok(Locations {
        bytes,
        format,
        not_stored: u32_at(bytes, 12),
    })
}

impl Locations<'_> {
    /// Whether the records carry chain keys (format 2 on).
    pub fn has_chain_keys(&self) -> bool {
        self.format >= 2
    }

    pub fn len(&self) -> usize {
        (self.bytes.len() - LOCATIONS_HEADER_LEN) / LOCATION_RECORD_LEN
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Record `k` (below [`Locations::len`]).
    pub fn get(&self, k: usize) -> Location {
        let r =
            &self.bytes[LOCATIONS_HEADER_LEN + k * LOCATION_RECORD_LEN..][..LOCATION_RECORD_LEN];
        Location {
            fp: r[..FINGERPRINT_LEN].try_into().unwrap(),
            container: u64_at(r, 20),
            offset: u64_at(r, 28),
            stored_len: u32_at(r, 36),
            raw_len: u32_at(r, 40),
            codec: r[44],
            chain_key: le_number(&r[45..45 + CHAIN_KEY_LEN]),
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = Location> + '_ {
        (0..self.len()).map(|k| self.get(k))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::fingerprint;

    fn loc(fp: Fingerprint, container: u64, offset: u64, codec: u8) -> Location {
        Location {
            fp,
            container,
            offset,
            stored_len: 3000,
            raw_len: 8192,
            codec,
            chain_key: chain_key_number(&fp),
        }
    }

    #[test]
    fn round_trip_with_chain_keys() {
        let a = fingerprint(b"a");
        let b = fingerprint(b"b");
        // b decodes through a: its key is a's.
        let recs = [
            loc(a, 7, 86_016, 1),
            Location {
                chain_key: chain_key_number(&a),
                ..loc(b, (1 << 33) + 5, (1 << 40) + 3, 2)
            },
        ];
        let bytes = encode_locations(recs.iter().copied(), 2);
        assert_eq!(bytes.len(), LOCATIONS_HEADER_LEN + 2 * LOCATION_RECORD_LEN);
        let read = decode_locations(&bytes).unwrap();
        assert!(read.has_chain_keys());
        assert_eq!((read.not_stored, read.len()), (2, 2));
        assert_eq!(read.iter().collect::<Vec<_>>(), recs);
        assert_eq!(
            bytes[LOCATIONS_HEADER_LEN + 2 * LOCATION_RECORD_LEN - 3..],
            a[..3]
        );
        // The key is the fingerprint's first bytes, little-endian, as docs/FORMAT.md says.
        assert_eq!(
            chain_key_number(&a),
            u32::from(a[0]) | u32::from(a[1]) << 8 | u32::from(a[2]) << 16
        );
    }

    #[test]
    fn reads_format_1_without_keys() {
        let a = fingerprint(b"a");
        let mut bytes = encode_locations([loc(a, 1, 0, 0)].into_iter(), 0);
        bytes[4] = 1;
        bytes[LOCATIONS_HEADER_LEN + 45..].fill(0);
        let read = decode_locations(&bytes).unwrap();
        assert!(!read.has_chain_keys());
        assert_eq!(
            read.get(0),
            Location {
                chain_key: 0,
                ..loc(a, 1, 0, 0)
            }
        );
    }

    #[test]
    fn refuses_what_is_not_the_format() {
        let a = fingerprint(b"a");
        let good = encode_locations([loc(a, 1, 0, 0)].into_iter(), 0);
        assert_eq!(
            decode_locations(&good[..good.len() - 1]).unwrap_err(),
            LocationsError::BadLength {
                len: good.len() - 1,
                records: 1
            }
        );
        let mut magic = good.clone();
        magic[0] = 0;
        assert_eq!(
            decode_locations(&magic).unwrap_err(),
            LocationsError::BadMagic
        );
        let mut format = good.clone();
        format[4] = 3;
        assert_eq!(
            decode_locations(&format).unwrap_err(),
            LocationsError::UnknownFormat(3)
        );
        assert_eq!(
            decode_locations(&[0; 3]).unwrap_err(),
            LocationsError::BadMagic
        );
        // A count whose records would overflow a 32-bit length.
        let mut huge = good[..LOCATIONS_HEADER_LEN].to_vec();
        huge[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(
            decode_locations(&huge),
            Err(LocationsError::BadLength { .. })
        ));
    }
}
