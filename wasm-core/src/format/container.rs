//! Container files: header, chunk table, data (`docs/FORMAT.md`).

use super::{u16_at, u32_at, u64_at};
use crate::hash::{Fingerprint, FINGERPRINT_LEN};

pub const CONTAINER_MAGIC: [u8; 8] = *b"DITTOCT1";
pub const CONTAINER_VERSION: u16 = 1;
pub const HEADER_LEN: usize = 64;
pub const TABLE_ENTRY_LEN: usize = 40;
/// Table slots in containers written by this version.
pub const DEFAULT_TABLE_CAPACITY: u32 = 2048;
/// Target size of a container's data region.
pub const TARGET_DATA_BYTES: u64 = 4 << 20;
/// Byte offset of the "newest version" field, rewritten in place.
pub const NEWEST_VERSION_OFFSET: usize = 24;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum ContainerKind {
    Active = 0,
    Archival = 1,
}

impl ContainerKind {
    pub fn from_u8(v: u8) -> Option<Self> {
        match v {
            0 => Some(ContainerKind::Active),
            1 => Some(ContainerKind::Archival),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            ContainerKind::Active => "active",
            ContainerKind::Archival => "archival",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContainerHeader {
    pub kind: ContainerKind,
    pub table_capacity: u32,
    pub id: u64,
    pub newest_version: i64,
    pub data_offset: u64,
    pub created_ms: u64,
}

/// Where the data region starts for a table of `capacity` slots: rounded up to 4096.
pub fn data_offset_for(capacity: u32) -> u64 {
    let table_end = HEADER_LEN as u64 + capacity as u64 * TABLE_ENTRY_LEN as u64;
    table_end.div_ceil(4096) * 4096
}

/// Byte offset of table slot `slot`.
pub fn slot_offset(slot: u32) -> u64 {
    HEADER_LEN as u64 + slot as u64 * TABLE_ENTRY_LEN as u64
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ContainerError {
    Truncated,
    BadMagic,
    BadVersion(u16),
    BadKind(u8),
    BadLayout,
    BadCodec(u8),
}

impl std::fmt::Display for ContainerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ContainerError::Truncated => write!(f, "container is truncated"),
            ContainerError::BadMagic => write!(f, "not a container (bad magic)"),
            ContainerError::BadVersion(v) => write!(f, "unsupported container version {v}"),
            ContainerError::BadKind(k) => write!(f, "unknown container kind {k}"),
            ContainerError::BadLayout => write!(f, "inconsistent container layout"),
            ContainerError::BadCodec(c) => write!(f, "unknown codec {c} in chunk table"),
        }
    }
}

impl std::error::Error for ContainerError {}

impl ContainerHeader {
    pub fn new(id: u64, kind: ContainerKind, created_ms: u64) -> Self {
        ContainerHeader {
            kind,
            table_capacity: DEFAULT_TABLE_CAPACITY,
            id,
            newest_version: 0,
            data_offset: data_offset_for(DEFAULT_TABLE_CAPACITY),
            created_ms,
        }
    }

    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut h = [0u8; HEADER_LEN];
        h[0..8].copy_from_slice(&CONTAINER_MAGIC);
        h[8..10].copy_from_slice(&CONTAINER_VERSION.to_le_bytes());
        h[10] = self.kind as u8;
        h[12..16].copy_from_slice(&self.table_capacity.to_le_bytes());
        h[16..24].copy_from_slice(&self.id.to_le_bytes());
        h[24..32].copy_from_slice(&self.newest_version.to_le_bytes());
        h[32..40].copy_from_slice(&self.data_offset.to_le_bytes());
        h[40..48].copy_from_slice(&self.created_ms.to_le_bytes());
        h
    }

    pub fn decode(b: &[u8]) -> Result<Self, ContainerError> {
        if b.len() < HEADER_LEN {
            return Err(ContainerError::Truncated);
        }
        if b[0..8] != CONTAINER_MAGIC {
            return Err(ContainerError::BadMagic);
        }
        let version = u16_at(b, 8);
        if version != CONTAINER_VERSION {
            return Err(ContainerError::BadVersion(version));
        }
        let kind = ContainerKind::from_u8(b[10]).ok_or(ContainerError::BadKind(b[10]))?;
        let table_capacity = u32_at(b, 12);
        let data_offset = u64_at(b, 32);
        if data_offset < slot_offset(table_capacity) {
            return Err(ContainerError::BadLayout);
        }
        Ok(ContainerHeader {
            kind,
            table_capacity,
            id: u64_at(b, 16),
            newest_version: u64_at(b, 24) as i64,
            data_offset,
            created_ms: u64_at(b, 40),
        })
    }
}

/// One slot of the chunk table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableEntry {
    pub fp: Fingerprint,
    pub codec: u8,
    pub offset: u64,
    pub stored_len: u32,
    pub raw_len: u32,
}

const SLOT_IN_USE: u8 = 1;

impl TableEntry {
    pub fn encode(&self) -> [u8; TABLE_ENTRY_LEN] {
        let mut e = [0u8; TABLE_ENTRY_LEN];
        e[0..20].copy_from_slice(&self.fp);
        e[20] = self.codec;
        e[21] = SLOT_IN_USE;
        e[24..32].copy_from_slice(&self.offset.to_le_bytes());
        e[32..36].copy_from_slice(&self.stored_len.to_le_bytes());
        e[36..40].copy_from_slice(&self.raw_len.to_le_bytes());
        e
    }

    /// `Ok(None)` for an empty slot.
    pub fn decode(b: &[u8]) -> Result<Option<Self>, ContainerError> {
        if b.len() < TABLE_ENTRY_LEN {
            return Err(ContainerError::Truncated);
        }
        if b[21] & SLOT_IN_USE == 0 {
            return if b[..TABLE_ENTRY_LEN].iter().all(|&x| x == 0) {
                Ok(None)
            } else {
                Err(ContainerError::BadLayout)
            };
        }
        if b[20] > 2 {
            return Err(ContainerError::BadCodec(b[20]));
        }
        let mut fp = [0u8; FINGERPRINT_LEN];
        fp.copy_from_slice(&b[0..20]);
        Ok(Some(TableEntry {
            fp,
            codec: b[20],
            offset: u64_at(b, 24),
            stored_len: u32_at(b, 32),
            raw_len: u32_at(b, 36),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_and_slot_round_trip() {
        let mut h = ContainerHeader::new(42, ContainerKind::Active, 1234);
        h.newest_version = 7;
        assert_eq!(h.data_offset, 86016);
        let enc = h.encode();
        assert_eq!(ContainerHeader::decode(&enc), Ok(h));
        let mut bad = enc;
        bad[10] = 5;
        assert_eq!(
            ContainerHeader::decode(&bad),
            Err(ContainerError::BadKind(5))
        );
        let e = TableEntry {
            fp: [9; 20],
            codec: 1,
            offset: 86016,
            stored_len: 10,
            raw_len: 20,
        };
        assert_eq!(TableEntry::decode(&e.encode()), Ok(Some(e)));
        assert_eq!(TableEntry::decode(&[0u8; 40]), Ok(None));
        assert_eq!(slot_offset(1), 104);
    }
}
