//! Context-aware chunking (PRUNE, Min/Yoon/Won 2011, §4.3): files whose content is
//! already compressed or encoded (archives, images, audio, video) are "immutable": an edit
//! rewrites them wholesale, so content-defined boundaries find nothing to share and only
//! cost time. They get fixed-size chunks; everything else gets CDC.
//!
//! The paper classifies by extension only; we also look at the first bytes (magic
//! numbers), which catches renamed files and extension-less downloads. Both lists and the
//! fixed size are configurable.

use super::{fixed::Fixed, make_chunker_or_default, DynChunker};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileClass {
    /// Compressed / encoded content: fixed-size chunks.
    Immutable,
    /// Everything else: content-defined chunks.
    Mutable,
}

/// Signatures at the start of a file (offset, bytes).
const MAGIC: &[(usize, &[u8])] = &[
    (0, b"PK\x03\x04"),         // zip, jar, docx/xlsx/odt, apk
    (0, b"\x1f\x8b"),           // gzip, tgz
    (0, b"\xff\xd8\xff"),       // jpeg
    (0, b"\x89PNG\r\n\x1a\n"),  // png
    (4, b"ftyp"),               // mp4, m4a, mov, heic
    (0, b"GIF8"),               // gif
    (0, b"7z\xbc\xaf\x27\x1c"), // 7z
    (0, b"Rar!\x1a\x07"),       // rar
    (0, b"BZh"),                // bzip2
    (0, b"\xfd7zXZ\x00"),       // xz
    (0, b"\x28\xb5\x2f\xfd"),   // zstd
    (0, b"\x1a\x45\xdf\xa3"),   // mkv, webm
    (0, b"OggS"),               // ogg, opus
    (0, b"ID3"),                // mp3 with ID3 tag
    (0, b"fLaC"),               // flac
    (0, b"wOF2"),               // woff2 font
];

const EXTENSIONS: &[&str] = &[
    "zip", "gz", "tgz", "bz2", "xz", "zst", "7z", "rar", "lzh", "jar", "apk", "jpg", "jpeg", "png",
    "gif", "webp", "heic", "avif", "mp3", "mp4", "m4a", "m4v", "mov", "avi", "wmv", "mkv", "webm",
    "ogg", "opus", "flac", "woff2",
];

/// The policy: which files count as immutable, and how each class is chunked.
#[derive(Clone, Debug)]
pub struct Policy {
    pub immutable_extensions: Vec<String>,
    pub use_magic: bool,
    /// Chunk size for immutable files.
    pub fixed_size: usize,
    /// CDC kind for mutable files (as accepted by `make_chunker_or_default`).
    pub cdc_kind: String,
    /// Off: everything is chunked with CDC.
    pub enabled: bool,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            immutable_extensions: EXTENSIONS.iter().map(|s| s.to_string()).collect(),
            use_magic: true,
            fixed_size: 64 * 1024,
            cdc_kind: "default".into(),
            enabled: true,
        }
    }
}

impl Policy {
    /// Classifies by the file name's extension (case-insensitive) and, if enabled, by the
    /// first bytes of the file (`head`, 16 bytes or more is plenty; may be empty).
    pub fn classify(&self, name: &str, head: &[u8]) -> FileClass {
        if !self.enabled {
            return FileClass::Mutable;
        }
        let ext = name.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase());
        if let Some(e) = ext {
            if !name.ends_with('.') && self.immutable_extensions.contains(&e) {
                return FileClass::Immutable;
            }
        }
        if self.use_magic
            && MAGIC
                .iter()
                .any(|(off, m)| head.len() >= off + m.len() && &head[*off..off + m.len()] == *m)
        {
            return FileClass::Immutable;
        }
        FileClass::Mutable
    }

    /// The chunker for a file.
    pub fn chunker_for(&self, name: &str, head: &[u8]) -> Result<DynChunker, String> {
        match self.classify(name, head) {
            FileClass::Immutable => Ok(Box::new(Fixed::new(self.fixed_size)?)),
            FileClass::Mutable => make_chunker_or_default(&self.cdc_kind, None, None, None, None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chunk::chunk_all;

    #[test]
    fn classification_by_extension_and_magic() {
        let p = Policy::default();
        assert_eq!(p.classify("photo.JPG", b""), FileClass::Immutable);
        assert_eq!(p.classify("backup.tar.gz", b""), FileClass::Immutable);
        assert_eq!(
            p.classify("src/main.ts", b"export const x = 1;"),
            FileClass::Mutable
        );
        assert_eq!(p.classify("README", b"# hello"), FileClass::Mutable);
        assert_eq!(
            p.classify("noext", b"\x89PNG\r\n\x1a\n...."),
            FileClass::Immutable
        );
        assert_eq!(
            p.classify("clip.bin", b"\0\0\0\x20ftypisom"),
            FileClass::Immutable
        );
        assert_eq!(p.classify("a.dat", b"PK\x03\x04rest"), FileClass::Immutable);
        assert_eq!(
            p.classify("gz", b"\x1f"),
            FileClass::Mutable,
            "truncated magic"
        );
        assert_eq!(p.classify("trailing.", b""), FileClass::Mutable);
        let off = Policy {
            enabled: false,
            ..Policy::default()
        };
        assert_eq!(
            off.classify("photo.jpg", b"\xff\xd8\xff"),
            FileClass::Mutable
        );
        let no_magic = Policy {
            use_magic: false,
            ..Policy::default()
        };
        assert_eq!(
            no_magic.classify("x.bin", b"\xff\xd8\xff"),
            FileClass::Mutable
        );
    }

    #[test]
    fn immutable_files_get_fixed_chunks() {
        let img = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/testdata/SekienAkashita.jpg"
        ))
        .unwrap();
        let p = Policy {
            fixed_size: 16384,
            ..Policy::default()
        };
        let chunks = chunk_all(
            &p.chunker_for("SekienAkashita.jpg", &img[..16]).unwrap(),
            &img,
        );
        assert!(chunks[..chunks.len() - 1].iter().all(|c| c.1 == 16384));
        let cdc = chunk_all(&p.chunker_for("notes.txt", b"hello").unwrap(), &img);
        assert_ne!(chunks, cdc);
    }
}
