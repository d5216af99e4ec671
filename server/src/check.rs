//! `ditto-server check REPO [--read-data-subset S]`: re-reads the repository's containers and
//! verifies them against the index. Chunks found damaged are quarantined (the server then
//! asks for them again); versions that reference chunks not stored are named.

use std::{collections::HashMap, path::Path};

use wasm_core::{
    format::{
        container::{slot_offset, TableEntry, TABLE_ENTRY_LEN},
        manifest::{EntryKind, Manifest},
        parse_fp_hex,
    },
    hash::{to_hex, Fingerprint},
};

use crate::store::{
    self,
    backend::container_name,
    index::{self, chunks::ChunkRow, Index},
    quarantine::{self, Found},
    recover::{self, IndexContainer},
    verify::{self, Subset},
};

#[derive(Default)]
pub struct Report {
    pub errors: Vec<String>,
    pub warnings: Vec<String>,
    pub containers: u64,
    /// Containers whose chunk data was read (all of them unless a subset was asked for).
    pub containers_read: u64,
    pub chunks: u64,
    pub bytes: u64,
    pub versions: u64,
    pub damaged_versions: Vec<i64>,
    /// Bytes of table slots no index row names (moved or swept chunks awaiting compaction).
    pub dead_bytes: u64,
}

struct Row {
    fp: Fingerprint,
    slot: u32,
    offset: u64,
    stored_len: u32,
    raw_len: u32,
    codec: u8,
    /// A quarantined copy: part of the container's layout, known damaged, not read.
    quarantined: bool,
}

/// Whether container `id` still has an index row, read outside the check's snapshot.
fn still_indexed(ix: &dyn Index, id: i64) -> bool {
    ix.read()
        .and_then(|r| r.container_exists(id))
        .unwrap_or(true)
}

pub fn check(
    data_dir: &Path,
    database_url: Option<&str>,
    repo: &str,
    subset: Subset,
) -> Result<Report, String> {
    // Read-write: the schema may need its migrations, and damage found is quarantined.
    let (ix, writer) = index::open(data_dir, database_url).map_err(|e| format!("database: {e}"))?;
    let backend = store::backend::from_env(data_dir)?;
    let q = |e: store::StoreError| e.to_string();
    let salt = verify::salt();
    let mut rep = Report::default();
    let mut found: Vec<Found> = Vec::new();
    // One read snapshot for the containers and the index.
    let snap = ix.snapshot().map_err(q)?;
    let repo_id = store::repo_id(&*snap, repo)
        .map_err(q)?
        .ok_or_else(|| format!("no repository named {repo:?}"))?;

    let mut by_container: HashMap<i64, Vec<Row>> = HashMap::new();
    let mut raw_len_of: HashMap<Fingerprint, u32> = HashMap::new();
    for quarantined in [false, true] {
        let mut add = |r: ChunkRow| {
            if !quarantined {
                raw_len_of.insert(r.fp, r.raw_len);
            }
            by_container.entry(r.container_id).or_default().push(Row {
                fp: r.fp,
                slot: r.slot,
                offset: r.offset,
                stored_len: r.stored_len,
                raw_len: r.raw_len,
                codec: r.codec,
                quarantined,
            });
            Ok(())
        };
        if quarantined {
            snap.quarantined_rows(repo_id, &mut add)
        } else {
            snap.chunk_rows(repo_id, &mut add)
        }
        .map_err(q)?;
    }
    let containers: Vec<IndexContainer> = snap.repo_containers(repo_id).map_err(q)?;
    // Verified delta bases kept across chunks: a base shared by many deltas (a trained
    // dictionary) is read and hashed once, not once per delta.
    let base_cache = verify::BaseCache::default();
    // Bases are located outside the snapshot: a server running beside the check may move a
    // base (the mover, the delta pass) and delete its old container, and a base located in
    // the snapshot would then read as missing and quarantine a good delta.
    let live = ix.read().map_err(q)?;
    for c in containers {
        let id = c.id;
        rep.containers += 1;
        let mut rows = by_container.remove(&id).unwrap_or_default();
        rows.sort_by_key(|r| r.slot);
        let read_data = subset.includes(id as u64, salt);
        if let Some(damage) = &c.damage {
            // Set aside by recovery: its chunks were quarantined when it was.
            let open = rows
                .iter()
                .filter(|r| r.quarantined && !raw_len_of.contains_key(&r.fp))
                .count();
            if open > 0 {
                rep.errors.push(format!(
                    "container {id} is damaged ({damage}): {open} of its chunks are quarantined and not uploaded again yet"
                ));
            } else {
                rep.warnings.push(format!(
                    "container {id} is damaged ({damage}); every chunk it held is stored again elsewhere"
                ));
            }
            continue;
        }
        let bytes = match backend.read_all(c.repo_id, id as u64) {
            Ok(Some(b)) => b,
            // A running server's mover or prune deleted it after this snapshot was read:
            // its chunks are elsewhere now (or were garbage).
            Ok(None) if !still_indexed(&*ix, id) => {
                rep.containers -= 1;
                continue;
            }
            Ok(None) => {
                rep.errors.push(format!(
                    "container {id}: cannot read {}: it does not exist",
                    container_name(c.repo_id, id as u64)
                ));
                continue;
            }
            Err(e) => {
                rep.errors.push(format!(
                    "container {id}: cannot read {}: {e}",
                    container_name(c.repo_id, id as u64)
                ));
                continue;
            }
        };
        let (data_offset, data_end) = (c.data_offset as u64, c.data_end as u64);
        let header = match recover::validate_header(&bytes[..bytes.len().min(64)], &c) {
            Ok(h) => h,
            Err(e) => {
                rep.errors.push(format!(
                    "container {id}: damaged header: {e} (the server sets it aside and quarantines its chunks when it starts)"
                ));
                continue;
            }
        };
        if (bytes.len() as u64) < data_end {
            rep.errors.push(format!(
                "container {id}: file has {} bytes, index says {data_end} are committed",
                bytes.len()
            ));
            continue;
        }
        if bytes.len() as u64 > data_end {
            rep.warnings.push(format!(
                "container {id}: {} uncommitted bytes at the tail (cut at next start)",
                bytes.len() as u64 - data_end
            ));
        }
        if read_data {
            rep.containers_read += 1;
        }
        // The table, slot by slot: every committed slot is in use and the slots' data runs
        // back to back from the data offset. A slot no index row names is dead (its chunk
        // was moved or swept; compaction frees it, docs/STORAGE.md).
        let mut rows = rows.into_iter().peekable();
        let mut expect_offset = data_offset;
        for slot in 0..c.count {
            let so = slot_offset(slot) as usize;
            let entry = match bytes
                .get(so..so.saturating_add(TABLE_ENTRY_LEN))
                .map(TableEntry::decode)
            {
                Some(Ok(Some(t))) => t,
                other => {
                    rep.errors.push(format!(
                        "container {id}: committed table slot {slot} is not a chunk: {other:?}"
                    ));
                    break;
                }
            };
            if entry.offset != expect_offset {
                rep.errors.push(format!(
                    "container {id}: slot {slot} at offset {} breaks the layout (expected {expect_offset})",
                    entry.offset
                ));
            }
            expect_offset = entry.offset.saturating_add(entry.stored_len as u64);
            let mut indexed = false;
            while let Some(row) = rows.next_if(|r| r.slot == slot) {
                indexed = true;
                let fp_hex = to_hex(&row.fp);
                if !(entry.fp == row.fp
                    && entry.offset == row.offset
                    && entry.stored_len == row.stored_len
                    && entry.raw_len == row.raw_len
                    && entry.codec == row.codec)
                {
                    rep.errors.push(format!(
                        "container {id}: table slot {slot} does not match the index row of {fp_hex}: {entry:?}"
                    ));
                    continue;
                }
                if row.quarantined || !read_data {
                    continue;
                }
                rep.chunks += 1;
                rep.bytes += row.stored_len as u64;
                let Some(stored) = bytes.get(row.offset as usize..expect_offset as usize) else {
                    rep.errors.push(format!(
                        "container {id}: chunk {fp_hex} lies outside the file"
                    ));
                    continue;
                };
                let bases = verify::Bases {
                    backend: &*backend,
                    ix: Some(&*live),
                    repo_id,
                    cache: Some(&base_cache),
                    relocate: None,
                    trouble: Default::default(),
                };
                if let Err(reason) = verify::verify_stored(
                    &row.fp,
                    row.codec,
                    row.raw_len,
                    stored,
                    &bases,
                    verify::Check::Fingerprint,
                ) {
                    // A base the check could not read says nothing of this chunk's bytes.
                    if let Some(e) = bases.trouble.take() {
                        rep.errors.push(format!(
                            "container {id}: chunk {fp_hex} could not be checked: {e}"
                        ));
                        continue;
                    }
                    rep.errors.push(format!(
                        "container {id}: chunk {fp_hex} is damaged: {reason} (quarantined)"
                    ));
                    found.push(Found {
                        fp: row.fp,
                        container_id: id as u64,
                        offset: row.offset,
                        reason,
                    });
                }
            }
            if !indexed {
                rep.dead_bytes += entry.stored_len as u64;
            }
        }
        for row in rows {
            rep.errors.push(format!(
                "container {id}: index row of {} names slot {}, past its {} committed slots",
                to_hex(&row.fp),
                row.slot,
                c.count
            ));
        }
        if expect_offset != data_end {
            rep.errors.push(format!(
                "container {id}: chunks end at {expect_offset}, index says {data_end}"
            ));
        }
        for slot in c.count..header.table_capacity {
            let so = slot_offset(slot) as usize;
            if bytes
                .get(so..so + TABLE_ENTRY_LEN)
                .is_some_and(|s| s.iter().any(|&b| b != 0))
            {
                rep.warnings.push(format!(
                    "container {id}: uncommitted table slots from {slot} (cleared at next start)"
                ));
                break;
            }
        }
    }
    for (cid, rows) in by_container {
        rep.errors.push(format!(
            "{} index rows point at container {cid}, which is not in this repository",
            rows.len()
        ));
    }
    let versions = snap.live_manifests(repo_id).map_err(q)?;
    drop(snap);

    if !found.is_empty() {
        let tx = writer.begin().map_err(q)?;
        let moved = quarantine::quarantine(&*tx, repo_id, &found).map_err(q)?;
        tx.commit().map_err(q)?;
        // The deltas stored against what was found went with it.
        for fp in &moved {
            raw_len_of.remove(fp);
        }
    }
    // Every base is among the rows; the index is read only for a chain that leaves them.
    let rd = ix.read().map_err(q)?;
    let chains = store::versions::ManifestChains::new(&*rd, repo_id);
    chains
        .each(versions.iter().map(|v| (v.id, &v.manifest)), |vid, json| {
            rep.versions += 1;
            let m: Manifest = match json
                .map_err(|e| e.to_string())
                .and_then(|j| serde_json::from_slice(j).map_err(|e| e.to_string()))
            {
                Ok(m) => m,
                Err(e) => {
                    rep.errors
                        .push(format!("version {vid}: unreadable manifest: {e}"));
                    return Ok(());
                }
            };
            let mut missing: std::collections::HashSet<Fingerprint> = Default::default();
            for e in &m.entries {
                let mut sum = 0u64;
                let mut whole = true;
                for h in &e.recipe {
                    match parse_fp_hex(h) {
                        Some(fp) => match raw_len_of.get(&fp) {
                            Some(&n) => sum += n as u64,
                            None => {
                                missing.insert(fp);
                                whole = false;
                            }
                        },
                        None => {
                            rep.errors
                                .push(format!("version {vid}: {}: bad fingerprint {h:?}", e.path));
                            whole = false;
                        }
                    }
                }
                if e.kind == EntryKind::File && whole && sum != e.size {
                    rep.errors.push(format!(
                        "version {vid}: {}: size {} != chunks {sum}",
                        e.path, e.size
                    ));
                }
            }
            if !missing.is_empty() {
                rep.damaged_versions.push(vid);
                rep.errors.push(format!(
                    "version {vid} is damaged: {} of its chunks are missing or damaged (uploading them again heals it)",
                    missing.len()
                ));
            }
            Ok(())
        })
        .map_err(q)?;
    drop(rd);
    // Keep the versions' damage counts right for the API (a quarantine above, or rows that
    // an older server dropped).
    let tx = writer.begin().map_err(q)?;
    quarantine::recount_versions(&*tx, repo_id, None, false).map_err(q)?;
    tx.commit().map_err(q)?;
    Ok(rep)
}
