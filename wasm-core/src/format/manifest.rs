//! Version manifests (JSON): what was backed up and each file's recipe.

use serde::{de::Error as _, Deserialize, Deserializer, Serialize};

/// Most entries in one manifest.
pub const MAX_ENTRIES: usize = 1_000_000;
/// Longest path, in bytes.
pub const MAX_PATH_BYTES: usize = 4096;
/// Longest source label, in bytes.
pub const MAX_SOURCE_BYTES: usize = 256;
/// Longest name of the picked folder, in bytes.
pub const MAX_FOLDER_BYTES: usize = 256;
/// Longest `detail` of a skipped file, in bytes.
pub const MAX_DETAIL_BYTES: usize = 1024;

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
    #[serde(default, deserialize_with = "fp_hex_list")]
    pub recipe: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    pub source: String,
    /// The picked folder's own name (the source label may differ from it, and paths are
    /// relative to it). Absent in manifests written before the field existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub folder: Option<String>,
    pub time: i64,
    pub entries: Vec<Entry>,
    /// Picked files the version does not hold, and why: a version with any is incomplete.
    /// Absent (not written) when every picked file is in `entries`.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "skipped_list"
    )]
    pub skipped: Vec<Skipped>,
}

/// Why a picked file is missing from a version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SkipReason {
    /// It changed while the backup read it, and a later read failed too.
    Changed,
    /// It was deleted after it was picked.
    Deleted,
    /// It could not be read (permissions, an I/O error, or the browser would not say why).
    Unreadable,
}

/// A picked file left out of a version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Skipped {
    /// Same rules as an entry's path.
    pub path: String,
    pub reason: SkipReason,
    /// The error as the client saw it, for people (at most MAX_DETAIL_BYTES).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
}

/// Refuses a `skipped` list that could not have come from a pick: more items than a
/// manifest may have entries, a path an entry could not have, an over-long detail.
fn skipped_list<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Skipped>, D::Error> {
    let list = Vec::<Skipped>::deserialize(d)?;
    if list.len() > MAX_ENTRIES {
        return Err(D::Error::custom(format!(
            "more than {MAX_ENTRIES} skipped files"
        )));
    }
    for s in &list {
        validate_path(&s.path)
            .map_err(|why| D::Error::custom(format!("skipped {:?}: {why}", s.path)))?;
        if s.detail.len() > MAX_DETAIL_BYTES {
            return Err(D::Error::custom(format!(
                "skipped {:?}: detail longer than {MAX_DETAIL_BYTES} bytes",
                s.path
            )));
        }
    }
    Ok(list)
}

/// A list of fingerprints as hex strings (`deserialize_with`), each refused as it is read
/// unless it is 40 characters long (whether they are hex digits is the caller's to check):
/// a list read whole first holds a 24-byte `String` for every element, so a body of `"",`
/// grew eightfold in memory before any check.
pub fn fp_hex_list<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    struct Fps;
    impl<'de> serde::de::Visitor<'de> for Fps {
        type Value = Vec<String>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a list of fingerprints (40 hex digits each)")
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut seq: A,
        ) -> Result<Vec<String>, A::Error> {
            let mut out = Vec::new();
            while let Some(s) = seq.next_element::<std::borrow::Cow<'de, str>>()? {
                if s.len() != 40 {
                    return Err(A::Error::custom(format!(
                        "fingerprint {} is {:?}: not 40 hex digits",
                        out.len() + 1,
                        s.chars().take(48).collect::<String>()
                    )));
                }
                out.push(s.into_owned());
            }
            Ok(out)
        }
    }
    d.deserialize_seq(Fps)
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
    /// Picked files left out (the manifest's `skipped`); 0 in stats stored before it existed.
    #[serde(default)]
    pub skipped_files: u64,
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
    fn a_recipe_element_that_is_no_fingerprint_stops_the_parse_where_it_is() {
        // The error is the element's, not the truncated body's after it: nothing past the
        // first bad element is read.
        let e = serde_json::from_str::<Entry>(
            r#"{"path":"a","kind":"file","size":1,"mtime":0,"recipe":["", "#,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("fingerprint 1") && e.contains("not 40 hex digits"),
            "{e}"
        );
        let ok = serde_json::from_str::<Entry>(
            r#"{"path":"a","kind":"file","size":1,"mtime":0,"recipe":["000000000000000000000000000000000000000a"]}"#,
        )
        .unwrap();
        assert_eq!(ok.recipe.len(), 1);
    }

    #[test]
    fn paths_and_json() {
        assert!(validate_path("a/b.txt").is_ok());
        for bad in ["", "/a", "a/", "a//b", "a/../b", ".", "x\0"] {
            assert!(validate_path(bad).is_err(), "{bad:?}");
        }
        let m: Manifest = serde_json::from_str(
            r#"{"source":"s","time":1,"entries":[{"path":"a","kind":"file","size":3,"mtime":-5,"recipe":["000000000000000000000000000000000000000a"]},{"path":"d","kind":"dir","size":0,"mtime":0,"mode":493,"extra":1}]}"#,
        )
        .unwrap();
        assert_eq!(m.entries[0].mode, None);
        assert_eq!(m.entries[1].kind, EntryKind::Dir);
        assert!(m.entries[1].recipe.is_empty());
        assert!(m.skipped.is_empty());
        // A complete version serialises without the field; an incomplete one round-trips it.
        assert!(!serde_json::to_string(&m).unwrap().contains("skipped"));
        let inc: Manifest = serde_json::from_str(
            r#"{"source":"s","time":1,"entries":[],"skipped":[{"path":"a/b","reason":"changed","detail":"NotReadableError"},{"path":"c","reason":"deleted"}]}"#,
        )
        .unwrap();
        assert_eq!(inc.skipped[0].reason, SkipReason::Changed);
        assert_eq!(inc.skipped[1].detail, "");
        let again: Manifest = serde_json::from_str(&serde_json::to_string(&inc).unwrap()).unwrap();
        assert_eq!(again, inc);
        // The folder name round-trips; a manifest without it reads as None and writes without it.
        assert_eq!(m.folder, None);
        assert!(!serde_json::to_string(&m).unwrap().contains("folder"));
        let named: Manifest =
            serde_json::from_str(r#"{"source":"s","folder":"Photos 2024","time":1,"entries":[]}"#)
                .unwrap();
        assert_eq!(named.folder.as_deref(), Some("Photos 2024"));
        assert!(serde_json::to_string(&named)
            .unwrap()
            .contains(r#""folder":"Photos 2024""#));
        // Old stats (no skipped_files) still parse.
        let st: VersionStats = serde_json::from_str(r#"{"files":1,"dirs":0,"symlinks":0,"logical_bytes":3,"chunk_refs":1,"unique_chunks":1,"new_chunks":1,"new_raw_bytes":3,"new_stored_bytes":3,"dedup_ratio":1.0}"#).unwrap();
        assert_eq!((st.files, st.skipped_files), (1, 0));
    }

    #[test]
    fn bad_skipped_lists_are_refused() {
        let long = "x".repeat(MAX_DETAIL_BYTES + 1);
        for bad in [
            r#"[{"path":"/abs","reason":"changed"}]"#.to_string(),
            r#"[{"path":"a/../b","reason":"deleted"}]"#.to_string(),
            r#"[{"path":"a","reason":"lost"}]"#.to_string(),
            r#"[{"path":"a"}]"#.to_string(),
            format!(r#"[{{"path":"a","reason":"unreadable","detail":"{long}"}}]"#),
        ] {
            let json = format!(r#"{{"source":"s","time":1,"entries":[],"skipped":{bad}}}"#);
            assert!(serde_json::from_str::<Manifest>(&json).is_err(), "{bad}");
        }
    }
}
