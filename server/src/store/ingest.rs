//! Ingest: verifying an uploaded bundle and storing the chunks not stored yet. Every chunk
//! of a bundle is decoded (through `wasm_core::compress`) and matched against its
//! fingerprint before anything is written, so one bad chunk refuses the bundle whole; the
//! new chunks are then appended to containers and fsynced before their index rows are
//! committed in one transaction (docs/FORMAT.md, "Writing and recovery rules").

use std::{
    cell::Cell,
    collections::{HashMap, HashSet},
};

use wasm_core::{
    compress::{Decompressor, CODEC_ZSTD},
    format::{
        bundle::{BundleEntry, Codec},
        container::{
            slot_offset, ContainerHeader, ContainerKind, TableEntry, DEFAULT_TABLE_CAPACITY,
            TABLE_ENTRY_LEN, TARGET_DATA_BYTES,
        },
    },
    hash::{fingerprint, to_hex, Fingerprint},
};

use super::{
    chunks::ChunkLoc,
    containers::OpenContainer,
    crashpoint,
    index::{chunks::NewChunk, containers::NewContainer, maintenance::WrittenContainer},
    now_ms, quarantine, verify, BadChunk, Store, StoreError, StoreResult, Writer,
};

/// Bundles of at least this many raw bytes are verified by two threads side by side. The
/// last bundle of a backup is what its commit waits for, and the client's workers are idle
/// by then: typescript 5.6.3's last 2.8 MB bundle (~10 MB raw) took ~70 ms to verify.
const PARALLEL_VERIFY_RAW: u64 = 1 << 20;

/// Decodes and verifies every chunk of a parsed bundle; the first failure (in bundle order)
/// refuses it all. An entry that repeats an earlier one (fingerprint, codec, lengths and
/// payload) is checked once: a bundle of one compressible chunk many times over costs one
/// decode, not one per copy.
pub fn verify_entries(entries: &[BundleEntry<'_>]) -> StoreResult<()> {
    // Keyed without the payload (hashing every payload would cost every upload); payloads
    // are compared only between entries of one fingerprint, codec and lengths, and hashed
    // only once a key has two different ones, so that many entries of one key cost linear
    // time, not a comparison of each with all before it.
    enum Seen<'p> {
        One(&'p [u8]),
        Many(HashSet<&'p [u8]>),
    }
    let mut seen: HashMap<(Fingerprint, u8, u32, usize), Seen<'_>> = HashMap::new();
    let distinct: Vec<BundleEntry<'_>> = entries
        .iter()
        .filter(|e| {
            let key = (e.fp, e.codec as u8, e.raw_len, e.payload.len());
            let Some(same) = seen.get_mut(&key) else {
                seen.insert(key, Seen::One(e.payload));
                return true;
            };
            match same {
                Seen::One(p) if *p == e.payload => false,
                Seen::One(p) => {
                    *same = Seen::Many(HashSet::from([*p, e.payload]));
                    true
                }
                Seen::Many(set) => set.insert(e.payload),
            }
        })
        .cloned()
        .collect();
    let entries = &distinct[..];
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
            .unwrap_or_else(|_| Err(StoreError::Internal("bundle verification panicked".into())));
        earlier.and(later)
    })
}

fn verify_run(entries: &[BundleEntry<'_>]) -> StoreResult<()> {
    let mut dec = Decompressor::new()?;
    for e in entries {
        let bad = |why, message| StoreError::BadChunk {
            fp: e.fp,
            why,
            message,
        };
        let digest = match e.codec {
            Codec::Raw => fingerprint(e.payload),
            Codec::Zstd => {
                let raw = dec
                    .decompress(CODEC_ZSTD, e.payload, e.raw_len as usize)
                    .map_err(|err| {
                        bad(
                            BadChunk::DecodeFailed,
                            format!(
                                "chunk {}: does not decode to its {} bytes: {err}",
                                to_hex(&e.fp),
                                e.raw_len
                            ),
                        )
                    })?;
                fingerprint(raw)
            }
            Codec::Delta => {
                return Err(bad(
                    BadChunk::UnsupportedCodec,
                    "codec 2 (delta) is reserved and not accepted yet".into(),
                ))
            }
        };
        if digest != e.fp {
            return Err(bad(
                BadChunk::FingerprintMismatch,
                format!(
                    "chunk {}: fingerprint of its bytes is {}; bundle refused, nothing stored",
                    to_hex(&e.fp),
                    to_hex(&digest)
                ),
            ));
        }
    }
    Ok(())
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
    rows: Vec<NewChunk>,
}

impl Store {
    /// Stores the chunks not yet stored; `entries` must already be verified.
    pub fn ingest(&self, repo_id: i64, entries: &[BundleEntry<'_>]) -> StoreResult<IngestResult> {
        self.backup_activity();
        let mut w = self.writer_for_write()?;
        let mut seen = HashSet::with_capacity(entries.len());
        let mut new: Vec<&BundleEntry<'_>> = Vec::new();
        let mut dups: Vec<(&BundleEntry<'_>, ChunkLoc)> = Vec::new();
        {
            let firsts: Vec<&BundleEntry<'_>> =
                entries.iter().filter(|e| seen.insert(e.fp)).collect();
            let fps: Vec<Fingerprint> = firsts.iter().map(|e| e.fp).collect();
            // Read outside a write transaction (the writer lock keeps this process's commits
            // out meanwhile; another replica's are caught at the commit), in one read
            // transaction (SQLite locks once, not once per statement).
            let locs = self.snapshot()?.chunk_locations(repo_id, &fps)?;
            for (e, loc) in firsts.into_iter().zip(locs) {
                match loc {
                    None => new.push(e),
                    Some(loc) => dups.push((e, loc)),
                }
            }
        }
        // A chunk sent again although stored is checked against its stored copy: if that
        // copy is damaged, it is quarantined and these good bytes replace it.
        let mut bad = Vec::new();
        for (e, loc) in &dups {
            let res = match self.containers.open(repo_id, loc.container_id)? {
                None => Err("its container file is missing".into()),
                Some(c) => match self.containers.read_at(&c, loc.offset, loc.stored_len)? {
                    Some(b) => self.with_bases(repo_id, loc.codec, |bases| {
                        verify::verify_stored(
                            &e.fp,
                            loc.codec,
                            loc.raw_len,
                            &b,
                            bases,
                            verify::Check::Read,
                        )
                    })?,
                    None => Err("its container file is shorter than committed".into()),
                },
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
            let tx = w.begin(repo_id)?;
            quarantine::quarantine(&*tx, repo_id, &bad)?;
            tx.commit()?;
            w.open.remove(&repo_id);
        }
        let healing = quarantine::healing(&*self.index()?, repo_id, new.iter().map(|e| e.fp))?;
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
        let outcome = if self.containers.appends() {
            self.append(w, repo_id, &new, &healing).map(|last| {
                if let Some(oc) = last {
                    w.open.insert(repo_id, oc);
                }
                HashSet::new()
            })
        } else {
            self.append_whole(w, repo_id, &new, &healing)
        };
        match outcome {
            Ok(already) => {
                let mut result = result;
                // Stored by another server since the lookup: duplicates after all.
                for e in new.iter().filter(|e| already.contains(&e.fp)) {
                    result.stored -= 1;
                    result.duplicates += 1;
                    result.stored_bytes -= e.payload.len() as u64;
                    result.raw_bytes -= e.raw_len as u64;
                }
                self.cache_new_chunks(repo_id, new.iter().map(|e| (e.fp, e.raw_len)));
                Ok(result)
            }
            Err((err, created)) => {
                // The open container is forgotten (reloaded from the index next time). The
                // containers created for this bundle are removed only where the index
                // certainly has no row of them: none after a failed commit ([`uncertain`]).
                // One left behind without a row is recovery's to remove.
                w.open.remove(&repo_id);
                for id in created {
                    let exists = self.index().and_then(|ix| ix.container_exists(id as i64));
                    if matches!(exists, Ok(false)) {
                        let _ = self.containers.delete(repo_id, id);
                    }
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
    ) -> Result<Option<OpenContainer>, (StoreError, Vec<u64>)> {
        let mut created_ids = Vec::new();
        let mut touched: Vec<Touched> = Vec::new();
        let mut cur: Option<Touched> = match w.open.remove(&repo_id) {
            Some(oc) => Some(oc),
            None => self.reopen_last(w, repo_id).map_err(|e| (e, vec![]))?,
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
                let id =
                    w.ix.next_container_id()
                        .map_err(|e| (e, created_ids.clone()))?;
                let oc = self.create_container(repo_id, id).map_err(|e| {
                    let e = StoreError::from(e);
                    if !is_taken(&e) {
                        created_ids.push(id); // whatever of it was written is this upload's
                    }
                    (e, created_ids.clone())
                })?;
                created_ids.push(id);
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
            t.rows.push(NewChunk {
                fp: e.fp,
                slot,
                offset,
                stored_len: entry.stored_len,
                raw_len: e.raw_len,
                codec: entry.codec,
            });
            t.oc.slots += 1;
            t.oc.data_end += len;
        }
        if let Some(t) = cur.take() {
            touched.push(t);
        }
        let fail = |e: StoreError| (e, created_ids.clone());
        let committing = Cell::new(false);
        // 1. data and table slots, then fsync every touched file.
        for t in &touched {
            self.containers
                .append_sync(
                    &t.oc.file,
                    t.start_end,
                    &t.data,
                    slot_offset(t.start_slots),
                    &t.table,
                )
                .map_err(|e| fail(e.into()))?;
        }
        // 2. index rows in one transaction.
        let commit = || -> StoreResult<()> {
            let tx = w.begin(repo_id)?;
            let stored_ms = now_ms() as i64;
            for t in &touched {
                if t.oc.created {
                    tx.insert_container(&NewContainer {
                        id: t.oc.id,
                        repo_id,
                        kind: t.oc.kind as u8,
                        data_offset: t.oc.data_offset,
                        data_end: t.oc.data_end,
                        chunk_count: t.oc.slots,
                        created_ms: t.oc.created_ms,
                    })?;
                } else {
                    tx.extend_container(t.oc.id, t.oc.data_end, t.oc.slots)?;
                }
                tx.insert_chunks(repo_id, t.oc.id, stored_ms, &t.rows)?;
            }
            let fps: Vec<Fingerprint> = new.iter().map(|e| e.fp).collect();
            quarantine::stored(&*tx, repo_id, &fps, healing)?;
            committing.set(true);
            not_committed()?;
            tx.commit()?;
            committed_but_failed()
        };
        commit().map_err(|e| uncertain(fail(e), &committing))?;
        // 3. committed: the last container stays open for the next bundle.
        Ok(touched.pop().map(|t| {
            let mut oc = t.oc;
            oc.created = false;
            oc
        }))
    }
}

impl Store {
    /// Stores the new chunks of a bundle in containers of their own, written whole (a
    /// backend whose containers take no appends: object storage). Other servers may share
    /// the index then: a chunk one of them committed since the lookup keeps its row, and
    /// its copy here becomes dead bytes that compaction reclaims. Returns those chunks.
    #[allow(clippy::type_complexity)]
    fn append_whole(
        &self,
        w: &mut Writer,
        repo_id: i64,
        new: &[&BundleEntry<'_>],
        healing: &[Fingerprint],
    ) -> Result<HashSet<Fingerprint>, (StoreError, Vec<u64>)> {
        let mut created: Vec<u64> = Vec::new();
        let fail = |e: StoreError, created: &[u64]| (e, created.to_vec());
        let mut written: Vec<(ContainerHeader, u64, Vec<NewChunk>)> = Vec::new();
        let mut rest = new;
        while !rest.is_empty() {
            // As many chunks as fill one container (at least one).
            let mut n = 0;
            let mut bytes = 0u64;
            while n < rest.len()
                && (n == 0
                    || (n < DEFAULT_TABLE_CAPACITY as usize
                        && bytes + rest[n].payload.len() as u64 <= TARGET_DATA_BYTES))
            {
                bytes += rest[n].payload.len() as u64;
                n += 1;
            }
            let (part, tail) = rest.split_at(n);
            rest = tail;
            let mut table = Vec::with_capacity(n * TABLE_ENTRY_LEN);
            let mut data = Vec::with_capacity(bytes as usize);
            let mut rows = Vec::with_capacity(n);
            for (slot, e) in part.iter().enumerate() {
                let entry = TableEntry {
                    fp: e.fp,
                    codec: e.codec as u8,
                    offset: data.len() as u64,
                    stored_len: e.payload.len() as u32,
                    raw_len: e.raw_len,
                };
                table.extend_from_slice(&entry.encode());
                rows.push(NewChunk {
                    fp: e.fp,
                    slot: slot as u32,
                    offset: entry.offset,
                    stored_len: entry.stored_len,
                    raw_len: e.raw_len,
                    codec: entry.codec,
                });
                data.extend_from_slice(e.payload);
            }
            let id = w.ix.next_container_id().map_err(|e| fail(e, &created))?;
            let header = self
                .write_new_container(repo_id, id, ContainerKind::Active, 0, &mut table, &data)
                .map_err(|e| {
                    if !is_taken(&e) {
                        created.push(id); // the object may have been put before the failure
                    }
                    fail(e, &created)
                })?;
            created.push(id);
            for r in &mut rows {
                r.offset += header.data_offset;
            }
            let data_end = header.data_offset + data.len() as u64;
            written.push((header, data_end, rows));
        }
        let committing = Cell::new(false);
        let commit = || -> StoreResult<HashSet<Fingerprint>> {
            let tx = w.begin(repo_id)?;
            let stored_ms = now_ms() as i64;
            let fps: Vec<Fingerprint> = new.iter().map(|e| e.fp).collect();
            let now: HashSet<Fingerprint> = fps
                .iter()
                .zip(tx.chunk_locations(repo_id, &fps)?)
                .filter(|(_, loc)| loc.is_some())
                .map(|(fp, _)| *fp)
                .collect();
            for (h, data_end, rows) in &written {
                if !self.still_stored(repo_id, h.id)? {
                    return Err(StoreError::Internal(format!(
                        "container {} was removed before its commit (a server starting meanwhile took it for an orphan); send the bundle again",
                        h.id
                    )));
                }
                tx.insert_written_container(&WrittenContainer {
                    id: h.id as i64,
                    repo_id,
                    kind: h.kind as u8,
                    data_offset: h.data_offset as i64,
                    data_end: *data_end as i64,
                    chunk_count: rows.len() as i64,
                    newest_version: h.newest_version,
                    created_ms: h.created_ms as i64,
                    sealed: true,
                })?;
                let rows: Vec<NewChunk> = rows
                    .iter()
                    .filter(|r| !now.contains(&r.fp))
                    .cloned()
                    .collect();
                tx.insert_chunks(repo_id, h.id, stored_ms, &rows)?;
            }
            let stored: Vec<Fingerprint> = fps.into_iter().filter(|fp| !now.contains(fp)).collect();
            quarantine::stored(&*tx, repo_id, &stored, healing)?;
            committing.set(true);
            not_committed()?;
            tx.commit()?;
            committed_but_failed()?;
            Ok(now)
        };
        commit().map_err(|e| uncertain(fail(e, &created), &committing))
    }
}

/// A failed ingest's error and the containers it created, which the caller deletes where the
/// index has no row of them. A failure of the commit itself is uncertain: the database may
/// have committed and show it only later (a connection lost as it answered, a commit waiting
/// for a standby), so none is named then, and recovery removes one that has no row in the end.
fn uncertain(
    (e, created): (StoreError, Vec<u64>),
    committing: &Cell<bool>,
) -> (StoreError, Vec<u64>) {
    (
        e,
        if committing.get() {
            Vec::new()
        } else {
            created
        },
    )
}

/// The failure point `ingest:uncommitted`: a commit that fails as it is made and does not go
/// through (the transaction is rolled back), which the caller cannot tell from one that did.
fn not_committed() -> StoreResult<()> {
    if crashpoint::fails("ingest:uncommitted") {
        return Err(StoreError::Io(std::io::Error::other(
            "failure point ingest:uncommitted (DITTO_TEST_FAIL_AT)",
        )));
    }
    Ok(())
}

/// The failure point `ingest:commit`: a commit that went through but is reported failed, as a
/// connection lost while the database answered would make it.
fn committed_but_failed() -> StoreResult<()> {
    if crashpoint::fails("ingest:commit") {
        return Err(StoreError::Io(std::io::Error::other(
            "failure point ingest:commit (DITTO_TEST_FAIL_AT)",
        )));
    }
    Ok(())
}

/// Whether creating a container failed because its id's file or object was already there:
/// not this server's (another server with an index of its own on the same storage), so
/// the cleanup of a failed upload leaves it alone.
fn is_taken(e: &StoreError) -> bool {
    matches!(e, StoreError::Io(io) if io.kind() == std::io::ErrorKind::AlreadyExists)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(fp: Fingerprint, payload: &[u8]) -> BundleEntry<'_> {
        BundleEntry {
            fp,
            codec: Codec::Raw,
            raw_len: payload.len() as u32,
            payload,
        }
    }

    #[test]
    fn repeated_entries_are_checked_once_and_a_bad_one_refuses_the_bundle() {
        let good = b"a chunk uploaded three times".to_vec();
        let fp = fingerprint(&good);
        let mut bad = good.clone();
        bad[0] ^= 1;
        let ok = [entry(fp, &good), entry(fp, &good), entry(fp, &good)];
        assert!(verify_entries(&ok).is_ok());
        let refused = [entry(fp, &good), entry(fp, &good), entry(fp, &bad)];
        assert!(matches!(
            verify_entries(&refused),
            Err(StoreError::BadChunk { .. })
        ));
    }

    #[test]
    fn many_payloads_under_one_key_cost_linear_time() {
        // The most entries a bundle holds, one fingerprint and length, payloads that differ
        // only at their end: compared each with all before it, they took tens of seconds;
        // hashed, well under a second. The bound is far above the linear time and far
        // below the quadratic one.
        let n = 65_536usize;
        let payloads: Vec<Vec<u8>> = (0..n)
            .map(|k| {
                let mut p = vec![7u8; 224];
                p[220..].copy_from_slice(&(k as u32).to_le_bytes());
                p
            })
            .collect();
        let fp = fingerprint(&payloads[1]);
        let entries: Vec<BundleEntry<'_>> = payloads.iter().map(|p| entry(fp, p)).collect();
        let t0 = std::time::Instant::now();
        assert!(
            verify_entries(&entries).is_err(),
            "only one payload is the chunk"
        );
        let took = t0.elapsed();
        assert!(took.as_secs_f64() < 3.0, "{took:?}");
    }
}
