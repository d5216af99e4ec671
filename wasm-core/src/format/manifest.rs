//! Version manifests (JSON): what was backed up and each file's recipe.

use serde::{Deserialize, Serialize};

/// Most entries in one manifest.
pub const MAX_ENTRIES: usize = 1_000_000;
/// Longest path, in bytes.
pub const MAX_PATH_BYTES: usize = 4096;
/// Longest source label, in bytes.
pub const MAX_SOURCE_BYTES: usize = 256;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EntryKind {
    File,
    Dir,
    Symlink,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub path: String,
    pub kind: EntryKind,
    pub size: u64,
    pub mtime: i64,
    #[serde(default)]
    pub mode: Option<u32>,
    /// Ordered chunk fingerprints, lower-case hex.
    #[serde(default)]
    pub recipe: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    pub source: String,
    pub time: i64,
    pub entries: Vec<Entry>,
}

/// Per-version statistics computed by the server at commit.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct VersionStats {
    pub files: u64,
    pub dirs: u64,
    pub symlinks: u64,
    pub logical_bytes: u64,
    pub chunk_refs: u64,
    pub unique_chunks: u64,
    pub new_chunks: u64,
    pub new_raw_bytes: u64,
    pub new_stored_bytes: u64,
    pub dedup_ratio: Option<f64>,
}

/// Checks a manifest path: relative, `/`-separated, no empty/`.`/`..` components.
pub fn validate_path(path: &str) -> Result<(), &'static str> {
    if path.is_empty() {
        return Err("empty path");
    }
    if path.len() > MAX_PATH_BYTES {
        return Err("path longer than 4096 bytes");
    }
    if path.contains('\0') {
        return Err("NUL in path");
    }
    for comp in path.split('/') {
        match comp {
            "" => return Err("empty path component (leading, trailing or double '/')"),
            "." | ".." => return Err("'.' or '..' path component"),
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_and_json() {
        assert!(validate_path("a/b.txt").is_ok());
        for bad in ["", "/a", "a/", "a//b", "a/../b", ".", "x\0"] {
            assert!(validate_path(bad).is_err(), "{bad:?}");
        }
        let m: Manifest = serde_json::from_str(
            r#"{"source":"s","time":1,"entries":[{"path":"a","kind":"file","size":3,"mtime":-5,"recipe":["00"]},{"path":"d","kind":"dir","size":0,"mtime":0,"mode":493,"extra":1}]}"#,
        )
        .unwrap();
        assert_eq!(m.entries[0].mode, None);
        assert_eq!(m.entries[1].kind, EntryKind::Dir);
        assert!(m.entries[1].recipe.is_empty());
    }
}
