//! The repository store: containers on disk, index in SQLite, recovery.
//!
//! Write rule: chunk bytes are appended to container files and fsynced, then the index
//! rows are committed in one SQLite transaction, then the client is answered. The index
//! is the authority on what is committed; startup recovery makes the files agree with it.

pub mod auth;
mod error;
pub mod quarantine;
pub mod recover;
pub mod verify;
mod wal;

pub use auth::{add_token, create_repo, new_token, repo_id, token_access, valid_repo_name, Scope};
pub use error::{StoreError, StoreResult};

use std::{
    collections::{HashMap, HashSet},
    fs::{self, File, OpenOptions},
    hash::{BuildHasherDefault, Hasher},
    os::unix::fs::FileExt,
    path::{Path, PathBuf},
    sync::{Mutex, MutexGuard, RwLock},
    time::{SystemTime, UNIX_EPOCH},
};

use axum::http::StatusCode;
use rusqlite::{params, Connection, OptionalExtension};
use serde_json::{json, Value};
use wasm_core::{
    format::{
        bundle::{BundleEntry, Codec},
        container::{
            slot_offset, ContainerHeader, ContainerKind, TableEntry, NEWEST_VERSION_OFFSET,
            TARGET_DATA_BYTES,
        },
        manifest::{Manifest, VersionStats},
    },
    hash::{fingerprint, to_hex, Fingerprint},
};

use crate::{
    db::{self, ReadPool},
    error::{ApiError, ApiResult},
};

pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

// ---------------------------------------------------------------- paths and fsync

pub fn containers_dir(data_dir: &Path, repo_id: i64) -> PathBuf {
    data_dir
        .join("repos")
        .join(repo_id.to_string())
        .join("containers")
}

pub fn container_path(data_dir: &Path, repo_id: i64, id: u64) -> PathBuf {
    containers_dir(data_dir, repo_id).join(format!("{id:010}.dct"))
}

fn fsync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Where a stored chunk lives.
#[derive(Debug, Clone, Copy)]
pub struct ChunkLoc {
    pub container_id: u64,
    pub offset: u64,
    pub stored_len: u32,
    pub raw_len: u32,
    pub codec: u8,
}

pub fn chunk_loc(
    conn: &Connection,
    repo_id: i64,
    fp: &Fingerprint,
) -> rusqlite::Result<Option<ChunkLoc>> {
    conn.prepare_cached(
        "SELECT container_id, offset, stored_len, raw_len, codec FROM chunks WHERE repo_id = ?1 AND fp = ?2",
    )?
    .query_row(params![repo_id, &fp[..]], |r| {
        Ok(ChunkLoc {
            container_id: r.get::<_, i64>(0)? as u64,
            offset: r.get::<_, i64>(1)? as u64,
            stored_len: r.get(2)?,
            raw_len: r.get(3)?,
            codec: r.get(4)?,
        })
    })
    .optional()
}

/// What the index says of a requested chunk.
pub enum Lookup {
    Stored(ChunkLoc),
    /// Its only copy was found damaged and is quarantined until uploaded again.
    Damaged,
    Missing,
}

/// Decodes stored bytes to raw bytes (codec 0 or 1).
pub fn decode_stored(codec: u8, raw_len: u32, stored: Vec<u8>) -> Result<Vec<u8>, String> {
    match codec {
        0 => Ok(stored),
        1 => {
            let raw = zstd::bulk::decompress(&stored, raw_len as usize)
                .map_err(|e| format!("zstd: {e}"))?;
            if raw.len() != raw_len as usize {
                return Err(format!("decoded {} bytes, expected {raw_len}", raw.len()));
            }
            Ok(raw)
        }
        c => Err(format!("codec {c} cannot be decoded by this server")),
    }
}

/// Bundles of at least this many raw bytes are verified by two threads side by side. The
/// last bundle of a backup is what its commit waits for, and the client's workers are idle
/// by then: typescript 5.6.3's last 2.8 MB bundle (~10 MB raw) took ~70 ms to verify.
const PARALLEL_VERIFY_RAW: u64 = 1 << 20;

/// Decodes and verifies every chunk of a parsed bundle; the first failure (in bundle order)
/// refuses it all.
pub fn verify_entries(entries: &[BundleEntry<'_>]) -> ApiResult<()> {
    let raw: u64 = entries.iter().map(|e| e.raw_len as u64).sum();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if raw < PARALLEL_VERIFY_RAW || cores < 2 || entries.len() < 2 {
        return verify_run(entries);
    }
    // Split where half the raw bytes lie, so both threads have about the same work.
    let mut acc = 0u64;
    let mid = entries
        .iter()
        .position(|e| {
            acc += e.raw_len as u64;
            acc * 2 >= raw
        })
        .map_or(entries.len() / 2, |i| i.clamp(1, entries.len() - 1));
    let (first, second) = entries.split_at(mid);
    std::thread::scope(|s| {
        let later = s.spawn(|| verify_run(second));
        let earlier = verify_run(first);
        let later = later
            .join()
            .unwrap_or_else(|_| Err(ApiError::internal("bundle verification panicked")));
        earlier.and(later)
    })
}

fn verify_run(entries: &[BundleEntry<'_>]) -> ApiResult<()> {
    let mut dec = zstd::bulk::Decompressor::new().map_err(ApiError::internal)?;
    for e in entries {
        let fp_hex = to_hex(&e.fp);
        let digest = match e.codec {
            Codec::Raw => fingerprint(e.payload),
            Codec::Zstd => {
                let raw = dec
                    .decompress(e.payload, e.raw_len as usize)
                    .map_err(|err| {
                        ApiError::new(
                            StatusCode::UNPROCESSABLE_ENTITY,
                            "decode_failed",
                            format!("chunk {fp_hex}: zstd frame does not decode: {err}"),
                        )
                        .with("fingerprint", fp_hex.clone())
                    })?;
                if raw.len() != e.raw_len as usize {
                    return Err(ApiError::new(
                        StatusCode::UNPROCESSABLE_ENTITY,
                        "decode_failed",
                        format!(
                            "chunk {fp_hex}: decoded to {} bytes, declared {}",
                            raw.len(),
                            e.raw_len
                        ),
                    )
                    .with("fingerprint", fp_hex));
                }
                fingerprint(&raw)
            }
            Codec::Delta => {
                return Err(ApiError::new(
                    StatusCode::BAD_REQUEST,
                    "unsupported_codec",
                    "codec 2 (delta) is reserved and not accepted yet",
                )
                .with("fingerprint", fp_hex))
            }
        };
        if digest != e.fp {
            return Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "fingerprint_mismatch",
                format!(
                    "chunk {fp_hex}: fingerprint of its bytes is {}; bundle refused, nothing stored",
                    to_hex(&digest)
                ),
            )
            .with("fingerprint", fp_hex));
        }
    }
    Ok(())
}

// ---------------------------------------------------------------- the store

struct OpenContainer {
    id: u64,
    file: File,
    kind: ContainerKind,
    capacity: u32,
    data_offset: u64,
    /// Committed end of data and committed slot count.
    data_end: u64,
    slots: u32,
    created_ms: u64,
    /// Not yet in the `containers` table.
    created: bool,
}

impl OpenContainer {
    fn has_room(&self, stored_len: u64) -> bool {
        self.slots < self.capacity
            && (self.slots == 0
                || self.data_end - self.data_offset + stored_len <= TARGET_DATA_BYTES)
    }
}

struct Writer {
    conn: Connection,
    next_container_id: u64,
    open: HashMap<i64, OpenContainer>,
}

/// Fingerprints are uniformly distributed already: hash by their first 8 bytes.
#[derive(Default)]
pub struct FpHasher(u64);

impl Hasher for FpHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut b = [0u8; 8];
        let n = bytes.len().min(8);
        b[..n].copy_from_slice(&bytes[..n]);
        self.0 ^= u64::from_le_bytes(b);
    }
    fn write_usize(&mut self, _: usize) {}
    fn finish(&self) -> u64 {
        self.0
    }
}

pub type FpSet = HashSet<Fingerprint, BuildHasherDefault<FpHasher>>;
/// Committed fingerprint -> raw length of the chunk.
type FpLengths = HashMap<Fingerprint, u32, BuildHasherDefault<FpHasher>>;

/// Repositories with more chunks than this are not cached in memory (about 40 bytes per
/// chunk); `chunks/missing` and `chunks/lengths` then ask SQLite for each fingerprint.
const MAX_CACHED_CHUNKS: i64 = 16_000_000;

pub struct Store {
    pub data_dir: PathBuf,
    pub readers: ReadPool,
    writer: Mutex<Writer>,
    /// Exact in-memory copy of each repository's committed fingerprints with their raw
    /// lengths (loaded on first use, extended after each commit), for fast
    /// `chunks/missing` and `chunks/lengths` answers. Each set is tagged with the
    /// quarantine epoch it was loaded at: a chunk quarantined since (by this process or by
    /// `check`) makes it stale.
    fp_cache: RwLock<HashMap<i64, (i64, FpLengths)>>,
    wal: wal::WalGuard,
}

#[derive(Debug, serde::Serialize)]
pub struct IngestResult {
    pub chunks: u64,
    pub stored: u64,
    pub duplicates: u64,
    pub stored_bytes: u64,
    pub raw_bytes: u64,
}

struct Touched {
    oc: OpenContainer,
    start_end: u64,
    start_slots: u32,
    data: Vec<u8>,
    table: Vec<u8>,
    rows: Vec<(Fingerprint, u32, u64, u32, u32, u8)>, // fp, slot, offset, stored, raw, codec
}

impl Store {
    /// Opens the store and runs crash recovery.
    pub fn open(data_dir: &Path) -> Result<Store, String> {
        fs::create_dir_all(data_dir.join("repos"))
            .map_err(|e| format!("cannot create {}: {e}", data_dir.display()))?;
        let conn = db::open_rw(data_dir).map_err(|e| format!("database: {e}"))?;
        let mut report = recover::recover(&conn, data_dir).map_err(|e| format!("recovery: {e}"))?;
        let damaged = quarantine::recount_unknown(&conn).map_err(|e| format!("database: {e}"))?;
        if damaged > 0 {
            report.push(format!(
                "{damaged} version(s) reference chunks that are not stored: listed as damaged"
            ));
        }
        if !report.is_empty() {
            eprintln!("recovery: {}", report.join("; "));
        }
        let max_id: i64 = conn
            .query_row("SELECT COALESCE(MAX(id), 0) FROM containers", [], |r| {
                r.get(0)
            })
            .map_err(|e| format!("database: {e}"))?;
        Ok(Store {
            data_dir: data_dir.to_path_buf(),
            readers: ReadPool::new(data_dir),
            fp_cache: RwLock::new(HashMap::new()),
            wal: wal::WalGuard::new(db::db_path(data_dir)),
            writer: Mutex::new(Writer {
                conn,
                next_container_id: max_id as u64 + 1,
                open: HashMap::new(),
            }),
        })
    }

    fn writer(&self) -> MutexGuard<'_, Writer> {
        self.writer.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The writer, for a write: refused if the write-ahead log is gone (`wal.rs`).
    fn writer_for_write(&self) -> StoreResult<MutexGuard<'_, Writer>> {
        let w = self.writer();
        self.wal.check(&w.conn)?;
        Ok(w)
    }

    /// Quarantines damaged copies found by a read (`quarantine.rs`); returns the
    /// fingerprints quarantined now.
    pub fn quarantine_found(
        &self,
        repo_id: i64,
        found: &[quarantine::Found],
    ) -> StoreResult<Vec<Fingerprint>> {
        if found.is_empty() {
            return Ok(Vec::new());
        }
        for f in found {
            eprintln!(
                "damaged chunk {} in container {} of repository {repo_id}: {}; quarantined",
                to_hex(&f.fp),
                f.container_id,
                f.reason
            );
        }
        let mut w = self.writer_for_write()?;
        let tx = w.conn.unchecked_transaction()?;
        let moved = quarantine::quarantine(&tx, repo_id, found)?;
        tx.commit()?;
        // The open container may be the damaged one: reloaded (and checked) on next use.
        w.open.remove(&repo_id);
        Ok(moved)
    }

    /// Where a chunk is, or why it cannot be served.
    pub fn lookup(&self, conn: &Connection, repo_id: i64, fp: &Fingerprint) -> StoreResult<Lookup> {
        Ok(match chunk_loc(conn, repo_id, fp)? {
            Some(loc) => Lookup::Stored(loc),
            None if quarantine::is_quarantined(conn, repo_id, fp)? => Lookup::Damaged,
            None => Lookup::Missing,
        })
    }

    /// Reads a stored chunk and verifies it against its fingerprint: `(0, raw bytes)` when
    /// `decode` (or the codec needs the server to decode), else `(codec, stored bytes)`. A
    /// damaged copy is quarantined and answered `Err(Damaged)`, never returned.
    pub fn read_verified(
        &self,
        repo_id: i64,
        fp: &Fingerprint,
        loc: &ChunkLoc,
        file: Option<&File>,
        decode: bool,
    ) -> StoreResult<(u8, Vec<u8>)> {
        let stored = match file {
            Some(f) => verify::read_at(f, loc.offset, loc.stored_len),
            None => match File::open(container_path(&self.data_dir, repo_id, loc.container_id)) {
                Ok(f) => verify::read_at(&f, loc.offset, loc.stored_len),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(e),
            },
        }?;
        let res = match stored {
            None => Err("its container file is missing or shorter than committed".to_string()),
            Some(stored) if decode || loc.codec > 1 => {
                verify::decode_verified(fp, loc.codec, loc.raw_len, stored).map(|raw| (0, raw))
            }
            Some(stored) => verify::verify_stored(fp, loc.codec, loc.raw_len, &stored)
                .map(|_| (loc.codec, stored)),
        };
        res.map_err(|reason| {
            let found = quarantine::Found {
                fp: *fp,
                container_id: loc.container_id,
                offset: loc.offset,
                reason,
            };
            if let Err(e) = self.quarantine_found(repo_id, &[found]) {
                eprintln!("could not quarantine chunk {}: {e}", to_hex(fp));
            }
            StoreError::Damaged(vec![*fp])
        })
    }

    /// Verifies the stored chunks of the containers in `subset` and quarantines the damaged
    /// ones (the verify endpoint).
    pub fn verify(&self, repo_id: i64, subset: verify::Subset) -> StoreResult<verify::Verified> {
        let v = {
            let conn = self.readers.get()?;
            verify::verify_repo(&self.data_dir, &conn, repo_id, subset)?
        };
        self.quarantine_found(repo_id, &v.damaged)?;
        Ok(v)
    }

    /// Runs `f` with the writer connection (repo and token management).
    pub fn with_writer<T>(
        &self,
        f: impl FnOnce(&Connection) -> rusqlite::Result<T>,
    ) -> rusqlite::Result<T> {
        f(&self.writer().conn)
    }

    /// Folds the write-ahead log into the database file and empties it (at a clean stop:
    /// otherwise up to ~4 MiB of already-committed pages stay in `ditto.sqlite3-wal`).
    /// Committed data is durable either way; this only compacts.
    pub fn checkpoint(&self) -> rusqlite::Result<()> {
        let w = self.writer();
        // Readers still inside a transaction would make TRUNCATE wait: not for long.
        w.conn.busy_timeout(std::time::Duration::from_secs(1))?;
        w.conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
    }

    /// Stores the chunks not yet stored; `entries` must already be verified.
    pub fn ingest(&self, repo_id: i64, entries: &[BundleEntry<'_>]) -> ApiResult<IngestResult> {
        let mut w = self.writer_for_write()?;
        let mut seen = HashSet::with_capacity(entries.len());
        let mut new: Vec<&BundleEntry<'_>> = Vec::new();
        let mut dups: Vec<(&BundleEntry<'_>, ChunkLoc)> = Vec::new();
        for e in entries {
            if seen.insert(e.fp) {
                match chunk_loc(&w.conn, repo_id, &e.fp)? {
                    None => new.push(e),
                    Some(loc) => dups.push((e, loc)),
                }
            }
        }
        // A chunk sent again although stored is checked against its stored copy: if that
        // copy is damaged, it is quarantined and these good bytes replace it.
        let mut bad = Vec::new();
        for (e, loc) in &dups {
            let stored = File::open(container_path(&self.data_dir, repo_id, loc.container_id))
                .and_then(|f| verify::read_at(&f, loc.offset, loc.stored_len));
            let res = match stored {
                Ok(Some(b)) => verify::verify_stored(&e.fp, loc.codec, loc.raw_len, &b),
                Ok(None) => Err("its container file is shorter than committed".into()),
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                    Err("its container file is missing".into())
                }
                Err(err) => return Err(err.into()),
            };
            if let Err(reason) = res {
                eprintln!(
                    "damaged chunk {} in container {} of repository {repo_id}: {reason}; replaced by an upload",
                    to_hex(&e.fp),
                    loc.container_id
                );
                bad.push(quarantine::Found {
                    fp: e.fp,
                    container_id: loc.container_id,
                    offset: loc.offset,
                    reason,
                });
                new.push(e);
            }
        }
        if !bad.is_empty() {
            let tx = w.conn.unchecked_transaction()?;
            quarantine::quarantine(&tx, repo_id, &bad)?;
            tx.commit()?;
            w.open.remove(&repo_id);
        }
        let healing = quarantine::healing(&w.conn, repo_id, new.iter().map(|e| e.fp))?;
        let result = IngestResult {
            chunks: entries.len() as u64,
            stored: new.len() as u64,
            duplicates: (entries.len() - new.len()) as u64,
            stored_bytes: new.iter().map(|e| e.payload.len() as u64).sum(),
            raw_bytes: new.iter().map(|e| e.raw_len as u64).sum(),
        };
        if new.is_empty() {
            return Ok(result);
        }
        let w = &mut *w;
        let outcome = self.append(w, repo_id, &new, &healing);
        match outcome {
            Ok(last) => {
                if let Some(oc) = last {
                    w.open.insert(repo_id, oc);
                }
                let mut cache = self.fp_cache.write().unwrap_or_else(|p| p.into_inner());
                if let Some((_, set)) = cache.get_mut(&repo_id) {
                    set.extend(new.iter().map(|e| (e.fp, e.raw_len)));
                }
                Ok(result)
            }
            Err((err, created)) => {
                // Nothing was committed: forget the open container (it is reloaded from the
                // index next time) and remove the files created for this bundle.
                w.open.remove(&repo_id);
                for id in created {
                    let _ = fs::remove_file(container_path(&self.data_dir, repo_id, id));
                }
                Err(err)
            }
        }
    }

    #[allow(clippy::type_complexity)]
    fn append(
        &self,
        w: &mut Writer,
        repo_id: i64,
        new: &[&BundleEntry<'_>],
        healing: &[Fingerprint],
    ) -> Result<Option<OpenContainer>, (ApiError, Vec<u64>)> {
        let mut created_ids = Vec::new();
        let mut touched: Vec<Touched> = Vec::new();
        let mut cur: Option<Touched> = match w.open.remove(&repo_id) {
            Some(oc) => Some(oc),
            None => self
                .reopen_last(&w.conn, repo_id)
                .map_err(|e| (e, vec![]))?,
        }
        .map(|oc| Touched {
            start_end: oc.data_end,
            start_slots: oc.slots,
            oc,
            data: Vec::new(),
            table: Vec::new(),
            rows: Vec::new(),
        });
        for e in new {
            let len = e.payload.len() as u64;
            let room = cur.as_ref().is_some_and(|t| t.oc.has_room(len));
            if !room {
                if let Some(t) = cur.take() {
                    touched.push(t);
                }
                let id = w.next_container_id;
                w.next_container_id += 1;
                created_ids.push(id);
                let oc = self
                    .create_container(repo_id, id)
                    .map_err(|e| (ApiError::from(e), created_ids.clone()))?;
                cur = Some(Touched {
                    start_end: oc.data_end,
                    start_slots: oc.slots,
                    oc,
                    data: Vec::new(),
                    table: Vec::new(),
                    rows: Vec::new(),
                });
            }
            let t = cur.as_mut().unwrap();
            let slot = t.oc.slots;
            let offset = t.oc.data_end;
            let entry = TableEntry {
                fp: e.fp,
                codec: e.codec as u8,
                offset,
                stored_len: e.payload.len() as u32,
                raw_len: e.raw_len,
            };
            t.table.extend_from_slice(&entry.encode());
            t.data.extend_from_slice(e.payload);
            t.rows
                .push((e.fp, slot, offset, entry.stored_len, e.raw_len, entry.codec));
            t.oc.slots += 1;
            t.oc.data_end += len;
        }
        if let Some(t) = cur.take() {
            touched.push(t);
        }
        let fail = |e: ApiError| (e, created_ids.clone());
        // 1. data and table slots, then fsync every touched file.
        for t in &touched {
            t.oc.file
                .write_all_at(&t.data, t.start_end)
                .and_then(|_| t.oc.file.write_all_at(&t.table, slot_offset(t.start_slots)))
                .and_then(|_| t.oc.file.sync_data())
                .map_err(|e| fail(e.into()))?;
        }
        // 2. index rows in one transaction.
        let commit = || -> rusqlite::Result<()> {
            let tx = w.conn.unchecked_transaction()?;
            for t in &touched {
                if t.oc.created {
                    tx.prepare_cached(
                        "INSERT INTO containers(id, repo_id, kind, data_offset, data_end, chunk_count, newest_version, created_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, 0, ?7)",
                    )?
                    .execute(params![
                        t.oc.id as i64,
                        repo_id,
                        t.oc.kind as u8,
                        t.oc.data_offset as i64,
                        t.oc.data_end as i64,
                        t.oc.slots,
                        t.oc.created_ms as i64
                    ])?;
                } else {
                    tx.prepare_cached(
                        "UPDATE containers SET data_end = ?1, chunk_count = ?2 WHERE id = ?3",
                    )?
                    .execute(params![
                        t.oc.data_end as i64,
                        t.oc.slots,
                        t.oc.id as i64
                    ])?;
                }
                let mut ins = tx.prepare_cached(
                    "INSERT INTO chunks(repo_id, fp, container_id, slot, offset, stored_len, raw_len, codec) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                )?;
                for (fp, slot, offset, stored, raw, codec) in &t.rows {
                    ins.execute(params![
                        repo_id,
                        &fp[..],
                        t.oc.id as i64,
                        slot,
                        *offset as i64,
                        stored,
                        raw,
                        codec
                    ])?;
                }
            }
            let fps: Vec<Fingerprint> = new.iter().map(|e| e.fp).collect();
            quarantine::stored(&tx, repo_id, &fps, healing)?;
            tx.commit()
        };
        commit().map_err(|e| fail(e.into()))?;
        // 3. committed: the last container stays open for the next bundle.
        Ok(touched.pop().map(|t| {
            let mut oc = t.oc;
            oc.created = false;
            oc
        }))
    }

    /// The distinct fingerprints of `fps` (request order) that are not committed.
    pub fn missing(&self, repo_id: i64, fps: Vec<Fingerprint>) -> ApiResult<Vec<Fingerprint>> {
        let mut seen: FpSet = FpSet::with_capacity_and_hasher(fps.len(), Default::default());
        let unique: Vec<Fingerprint> = fps.into_iter().filter(|fp| seen.insert(*fp)).collect();
        if let Some(out) = self.with_cache(repo_id, |set| {
            unique
                .iter()
                .filter(|fp| !set.contains_key(*fp))
                .copied()
                .collect()
        })? {
            return Ok(out);
        }
        let conn = self.readers.get()?;
        let mut st = conn.prepare_cached("SELECT 1 FROM chunks WHERE repo_id = ?1 AND fp = ?2")?;
        let mut out = Vec::new();
        for fp in unique {
            if !st.exists(params![repo_id, &fp[..]])? {
                out.push(fp);
            }
        }
        Ok(out)
    }

    /// The raw length of each of `fps` (request order), 0 where not committed.
    pub fn raw_lengths(&self, repo_id: i64, fps: &[Fingerprint]) -> ApiResult<Vec<u32>> {
        if let Some(out) = self.with_cache(repo_id, |set| {
            fps.iter()
                .map(|fp| set.get(fp).copied().unwrap_or(0))
                .collect()
        })? {
            return Ok(out);
        }
        let conn = self.readers.get()?;
        let mut st =
            conn.prepare_cached("SELECT raw_len FROM chunks WHERE repo_id = ?1 AND fp = ?2")?;
        let mut out = Vec::with_capacity(fps.len());
        for fp in fps {
            let n: Option<u32> = st
                .query_row(params![repo_id, &fp[..]], |r| r.get(0))
                .optional()?;
            out.push(n.unwrap_or(0));
        }
        Ok(out)
    }

    /// Answers `f` from the repository's in-memory fingerprint set, loading it (again, if a
    /// chunk was quarantined since it was loaded) unless the repository is too large: then
    /// `None`, and the caller asks SQLite.
    fn with_cache<T>(&self, repo_id: i64, f: impl Fn(&FpLengths) -> T) -> ApiResult<Option<T>> {
        let epoch = quarantine::epoch(&*self.readers.get()?)?;
        for _ in 0..2 {
            {
                let cache = self.fp_cache.read().unwrap_or_else(|p| p.into_inner());
                if let Some((at, set)) = cache.get(&repo_id) {
                    if *at >= epoch {
                        return Ok(Some(f(set)));
                    }
                }
            }
            if !self.load_fp_cache(repo_id, epoch)? {
                return Ok(None);
            }
        }
        Ok(None)
    }

    /// Loads a repository's fingerprints into memory unless it is too large. Holds the
    /// writer lock so that no commit slips between the scan and the cache insertion, and
    /// reads the quarantine epoch in the same snapshot as the fingerprints.
    fn load_fp_cache(&self, repo_id: i64, min_epoch: i64) -> ApiResult<bool> {
        let w = self.writer();
        if self
            .fp_cache
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&repo_id)
            .is_some_and(|(at, _)| *at >= min_epoch)
        {
            return Ok(true);
        }
        let tx = w.conn.unchecked_transaction()?;
        let epoch = quarantine::epoch(&tx)?;
        let n: i64 = tx.query_row(
            "SELECT COUNT(*) FROM chunks WHERE repo_id = ?1",
            [repo_id],
            |r| r.get(0),
        )?;
        if n > MAX_CACHED_CHUNKS {
            return Ok(false);
        }
        let mut set = FpLengths::with_capacity_and_hasher(n as usize, Default::default());
        {
            let mut st = tx.prepare("SELECT fp, raw_len FROM chunks WHERE repo_id = ?1")?;
            let mut rows = st.query([repo_id])?;
            while let Some(r) = rows.next()? {
                let fp: Vec<u8> = r.get(0)?;
                if let Ok(fp) = <Fingerprint>::try_from(fp.as_slice()) {
                    set.insert(fp, r.get(1)?);
                }
            }
        }
        tx.commit()?;
        self.fp_cache
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(repo_id, (epoch, set));
        Ok(true)
    }

    /// The repository's newest container, to append to if it has room. A sealed one gets no
    /// more chunks; one that fails the checks recovery makes is sealed and its chunks are
    /// quarantined (`recover.rs`), so that uploads go on into a new container.
    fn reopen_last(&self, conn: &Connection, repo_id: i64) -> ApiResult<Option<OpenContainer>> {
        let row = conn
            .prepare_cached(&format!(
                "SELECT {}, sealed FROM containers WHERE repo_id = ?1 AND kind = 0 ORDER BY id DESC LIMIT 1",
                recover::INDEX_COLUMNS
            ))?
            .query_row([repo_id], |r| Ok((recover::index_row(r)?, r.get::<_, bool>(9)?)))
            .optional()?;
        let Some((c, sealed)) = row else {
            return Ok(None);
        };
        if sealed || c.damage.is_some() {
            return Ok(None);
        }
        let path = container_path(&self.data_dir, repo_id, c.id as u64);
        let (file, h) = match recover::open_for_append(&path, &c) {
            Ok(v) => v,
            Err(reason) => {
                let n = recover::condemn(conn, &c, None, &reason)?;
                eprintln!(
                    "container {} of repository {repo_id} is damaged: {reason}; sealed, {n} chunk(s) quarantined",
                    c.id
                );
                return Ok(None);
            }
        };
        let oc = OpenContainer {
            id: c.id as u64,
            file,
            kind: h.kind,
            capacity: h.table_capacity,
            data_offset: c.data_offset as u64,
            data_end: c.data_end as u64,
            slots: c.count,
            created_ms: c.created_ms as u64,
            created: false,
        };
        Ok(
            if oc.slots < oc.capacity && oc.data_end - oc.data_offset < TARGET_DATA_BYTES {
                Some(oc)
            } else {
                None
            },
        )
    }

    fn create_container(&self, repo_id: i64, id: u64) -> std::io::Result<OpenContainer> {
        let dir = containers_dir(&self.data_dir, repo_id);
        if !dir.exists() {
            fs::create_dir_all(&dir)?;
            fsync_dir(dir.parent().unwrap())?;
            fsync_dir(dir.parent().unwrap().parent().unwrap())?;
        }
        let created_ms = now_ms();
        let header = ContainerHeader::new(id, ContainerKind::Active, created_ms);
        let path = container_path(&self.data_dir, repo_id, id);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)?;
        file.write_all_at(&header.encode(), 0)?;
        file.set_len(header.data_offset)?;
        file.sync_all()?;
        fsync_dir(&dir)?;
        Ok(OpenContainer {
            id,
            file,
            kind: header.kind,
            capacity: header.table_capacity,
            data_offset: header.data_offset,
            data_end: header.data_offset,
            slots: 0,
            created_ms,
            created: true,
        })
    }

    /// Commits a version whose manifest was parsed and validated; recipes as binary fps.
    /// `token_id` names the token that commits (docs/API.md: a backup token reads only the
    /// versions it committed).
    pub fn commit_version(
        &self,
        repo_id: i64,
        manifest: &Manifest,
        recipes: &[Vec<Fingerprint>],
        token_id: &str,
    ) -> ApiResult<Value> {
        let mut stats = VersionStats::default();
        for e in &manifest.entries {
            match e.kind {
                wasm_core::format::manifest::EntryKind::File => {
                    stats.files += 1;
                    stats.logical_bytes = stats.logical_bytes.saturating_add(e.size);
                }
                wasm_core::format::manifest::EntryKind::Dir => stats.dirs += 1,
                wasm_core::format::manifest::EntryKind::Symlink => stats.symlinks += 1,
            }
        }
        stats.skipped_files = manifest.skipped.len() as u64;
        let json = serde_json::to_vec(manifest).map_err(ApiError::internal)?;
        let blob = zstd::bulk::compress(&json, 3).map_err(ApiError::internal)?;

        let w = self.writer_for_write()?;
        let tx = w.conn.unchecked_transaction()?;
        // Distinct fps in first-reference order, with what the index knows of them.
        let mut info: HashMap<Fingerprint, Option<(u32, u32, i64, bool)>> = HashMap::new();
        let mut order: Vec<Fingerprint> = Vec::new();
        {
            let mut st = tx.prepare_cached(
                "SELECT stored_len, raw_len, container_id, first_version IS NULL FROM chunks WHERE repo_id = ?1 AND fp = ?2",
            )?;
            for fp in recipes.iter().flatten() {
                stats.chunk_refs += 1;
                if info.contains_key(fp) {
                    continue;
                }
                let row = st
                    .query_row(params![repo_id, &fp[..]], |r| {
                        Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
                    })
                    .optional()?;
                info.insert(*fp, row);
                order.push(*fp);
            }
        }
        let missing: Vec<String> = order
            .iter()
            .filter(|fp| info[*fp].is_none())
            .map(to_hex)
            .collect();
        if !missing.is_empty() {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "missing_chunks",
                format!(
                    "{} referenced chunk(s) are not stored; upload them first",
                    missing.len()
                ),
            )
            .with("missing", missing));
        }
        for (e, recipe) in manifest.entries.iter().zip(recipes) {
            let sum: u64 = recipe.iter().map(|fp| info[fp].unwrap().1 as u64).sum();
            if sum != e.size {
                return Err(ApiError::new(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "size_mismatch",
                    format!(
                        "{}: size {} but its chunks add up to {sum} bytes",
                        e.path, e.size
                    ),
                )
                .with("path", e.path.clone()));
            }
        }
        stats.unique_chunks = order.len() as u64;
        let mut containers: HashSet<i64> = HashSet::new();
        for fp in &order {
            let (stored, raw, cid, first) = info[fp].unwrap();
            containers.insert(cid);
            if first {
                stats.new_chunks += 1;
                stats.new_raw_bytes += raw as u64;
                stats.new_stored_bytes += stored as u64;
            }
        }
        stats.dedup_ratio = ratio(stats.logical_bytes, stats.new_stored_bytes);
        let committed = now_ms();
        let stats_json = serde_json::to_string(&stats).map_err(ApiError::internal)?;
        tx.execute(
            "INSERT INTO versions(repo_id, source, time, committed_ms, stats, manifest, token_id) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![repo_id, manifest.source, manifest.time, committed as i64, stats_json, blob, token_id],
        )?;
        let vid = tx.last_insert_rowid();
        {
            let mut st = tx.prepare_cached(
                "UPDATE chunks SET first_version = ?1 WHERE repo_id = ?2 AND fp = ?3 AND first_version IS NULL",
            )?;
            for fp in &order {
                if info[fp].unwrap().3 {
                    st.execute(params![vid, repo_id, &fp[..]])?;
                }
            }
            let mut st =
                tx.prepare_cached("UPDATE containers SET newest_version = ?1 WHERE id = ?2")?;
            for cid in &containers {
                st.execute(params![vid, cid])?;
            }
        }
        tx.commit()?;
        drop(w);
        // The header copy of "newest version" is a hint; the index is authoritative.
        for cid in containers {
            let path = container_path(&self.data_dir, repo_id, cid as u64);
            if let Ok(f) = OpenOptions::new().write(true).open(path) {
                let _ = f.write_all_at(&vid.to_le_bytes(), NEWEST_VERSION_OFFSET as u64);
            }
        }
        Ok(json!({
            "id": vid,
            "source": manifest.source,
            "time": manifest.time,
            "committed_at": committed,
            "stats": stats,
        }))
    }

    pub fn delete_version(&self, repo_id: i64, id: i64) -> ApiResult<bool> {
        let w = self.writer_for_write()?;
        let n = w.conn.execute(
            "DELETE FROM versions WHERE id = ?1 AND repo_id = ?2",
            params![id, repo_id],
        )?;
        Ok(n > 0)
    }
}

pub fn ratio(logical: u64, stored: u64) -> Option<f64> {
    if stored == 0 {
        None
    } else {
        Some(((logical as f64 / stored as f64) * 1000.0).round() / 1000.0)
    }
}

/// Repository totals and the per-version series (`GET .../stats`, `ditto-server stats`).
pub fn repo_stats(conn: &Connection, repo_id: i64, name: &str) -> rusqlite::Result<Value> {
    let (chunks, raw, stored): (i64, i64, i64) = conn.query_row(
        "SELECT COUNT(*), COALESCE(SUM(raw_len), 0), COALESCE(SUM(stored_len), 0) FROM chunks WHERE repo_id = ?1",
        [repo_id],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
    )?;
    let (containers, cbytes): (i64, i64) = conn.query_row(
        "SELECT COUNT(*), COALESCE(SUM(data_end), 0) FROM containers WHERE repo_id = ?1",
        [repo_id],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    let mut series = Vec::new();
    let mut logical_total: u64 = 0;
    let mut st = conn.prepare(
        "SELECT id, source, time, committed_ms, stats FROM versions WHERE repo_id = ?1 ORDER BY id",
    )?;
    let rows = st.query_map([repo_id], |r| {
        Ok((
            r.get::<_, i64>(0)?,
            r.get::<_, String>(1)?,
            r.get::<_, i64>(2)?,
            r.get::<_, i64>(3)?,
            r.get::<_, String>(4)?,
        ))
    })?;
    for row in rows {
        let (id, source, time, committed, stats) = row?;
        let s: VersionStats = serde_json::from_str(&stats).unwrap_or_default();
        logical_total += s.logical_bytes;
        series.push(json!({
            "id": id, "source": source, "time": time, "committed_at": committed,
            "logical_bytes": s.logical_bytes, "files": s.files,
            "new_stored_bytes": s.new_stored_bytes, "dedup_ratio": s.dedup_ratio,
        }));
    }
    Ok(json!({
        "repo": name,
        "chunks": chunks,
        "raw_bytes": raw,
        "stored_bytes": stored,
        "containers": containers,
        "container_bytes": cbytes,
        "versions": series.len(),
        "logical_bytes": logical_total,
        "dedup_ratio": ratio(logical_total, stored as u64),
        "series": series,
    }))
}
