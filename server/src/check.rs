//! `ditto-server check REPO`: re-reads every container and verifies it against the index.

use std::{collections::HashMap, fs, path::Path};

use wasm_core::{
    format::{
        container::{slot_offset, ContainerHeader, TableEntry, TABLE_ENTRY_LEN},
        manifest::{EntryKind, Manifest},
        parse_fp_hex,
    },
    hash::{fingerprint, to_hex, Fingerprint},
};

use crate::{
    db,
    store::{self, decode_stored},
};

#[derive(Default)]
pub struct Report {
    pub errors: Vec<String>,
    pub warnings: Vec<String>,
    pub containers: u64,
    pub chunks: u64,
    pub bytes: u64,
    pub versions: u64,
}

struct Row {
    fp: Fingerprint,
    slot: u32,
    offset: u64,
    stored_len: u32,
    raw_len: u32,
    codec: u8,
}

pub fn check(data_dir: &Path, repo: &str) -> Result<Report, String> {
    let conn = db::open_ro(data_dir).map_err(|e| format!("database: {e}"))?;
    // One read snapshot for the whole check.
    let tx = conn.unchecked_transaction().map_err(|e| e.to_string())?;
    let repo_id = store::repo_id(&tx, repo)
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("no repository named {repo:?}"))?;
    let mut rep = Report::default();
    let q = |e: rusqlite::Error| e.to_string();

    let mut by_container: HashMap<i64, Vec<Row>> = HashMap::new();
    let mut raw_len_of: HashMap<Fingerprint, u32> = HashMap::new();
    {
        let mut st = tx
            .prepare("SELECT container_id, fp, slot, offset, stored_len, raw_len, codec FROM chunks WHERE repo_id = ?1 ORDER BY container_id, slot")
            .map_err(q)?;
        let mut rows = st.query([repo_id]).map_err(q)?;
        while let Some(r) = rows.next().map_err(q)? {
            let fp: Vec<u8> = r.get(1).map_err(q)?;
            let Ok(fp) = <Fingerprint>::try_from(fp.as_slice()) else {
                rep.errors
                    .push("index row with a malformed fingerprint".into());
                continue;
            };
            let row = Row {
                fp,
                slot: r.get(2).map_err(q)?,
                offset: r.get::<_, i64>(3).map_err(q)? as u64,
                stored_len: r.get(4).map_err(q)?,
                raw_len: r.get(5).map_err(q)?,
                codec: r.get(6).map_err(q)?,
            };
            raw_len_of.insert(fp, row.raw_len);
            by_container
                .entry(r.get(0).map_err(q)?)
                .or_default()
                .push(row);
        }
    }
    let containers: Vec<(i64, u8, i64, i64, u32)> = {
        let mut st = tx
            .prepare("SELECT id, kind, data_offset, data_end, chunk_count FROM containers WHERE repo_id = ?1 ORDER BY id")
            .map_err(q)?;
        let it = st
            .query_map([repo_id], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
            })
            .map_err(q)?;
        it.collect::<Result<_, _>>().map_err(q)?
    };
    for (id, kind, data_offset, data_end, count) in containers {
        rep.containers += 1;
        let rows = by_container.remove(&id).unwrap_or_default();
        let path = store::container_path(data_dir, repo_id, id as u64);
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) => {
                rep.errors.push(format!(
                    "container {id}: cannot read {}: {e}",
                    path.display()
                ));
                continue;
            }
        };
        let (data_offset, data_end) = (data_offset as u64, data_end as u64);
        let header = match ContainerHeader::decode(&bytes) {
            Ok(h) => h,
            Err(e) => {
                rep.errors.push(format!("container {id}: bad header: {e}"));
                continue;
            }
        };
        if header.id != id as u64 || header.kind as u8 != kind || header.data_offset != data_offset
        {
            rep.errors
                .push(format!("container {id}: header disagrees with the index"));
        }
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
        if rows.len() != count as usize {
            rep.errors.push(format!(
                "container {id}: index says {count} chunks but has {} rows",
                rows.len()
            ));
        }
        let mut expect_offset = data_offset;
        for (i, row) in rows.iter().enumerate() {
            rep.chunks += 1;
            rep.bytes += row.stored_len as u64;
            let fp_hex = to_hex(&row.fp);
            if row.slot as usize != i || row.offset != expect_offset {
                rep.errors.push(format!(
                    "container {id}: chunk {fp_hex} at slot {} offset {} breaks the layout",
                    row.slot, row.offset
                ));
            }
            expect_offset = row.offset + row.stored_len as u64;
            let so = slot_offset(row.slot) as usize;
            match bytes
                .get(so..so + TABLE_ENTRY_LEN)
                .map(TableEntry::decode)
            {
                Some(Ok(Some(t)))
                    if t.fp == row.fp
                        && t.offset == row.offset
                        && t.stored_len == row.stored_len
                        && t.raw_len == row.raw_len
                        && t.codec == row.codec => {}
                other => rep.errors.push(format!(
                    "container {id}: table slot {} does not match the index row of {fp_hex}: {other:?}",
                    row.slot
                )),
            }
            let Some(stored) = bytes.get(row.offset as usize..expect_offset as usize) else {
                rep.errors.push(format!(
                    "container {id}: chunk {fp_hex} lies outside the file"
                ));
                continue;
            };
            match decode_stored(row.codec, row.raw_len, stored.to_vec()) {
                Ok(raw) if fingerprint(&raw) == row.fp => {}
                Ok(_) => rep.errors.push(format!(
                    "container {id}: chunk {fp_hex}: fingerprint mismatch"
                )),
                Err(e) => rep
                    .errors
                    .push(format!("container {id}: chunk {fp_hex}: {e}")),
            }
        }
        if expect_offset != data_end {
            rep.errors.push(format!(
                "container {id}: chunks end at {expect_offset}, index says {data_end}"
            ));
        }
        for slot in count..header.table_capacity {
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
    let mut st = tx
        .prepare("SELECT id, manifest FROM versions WHERE repo_id = ?1 ORDER BY id")
        .map_err(q)?;
    let mut rows = st.query([repo_id]).map_err(q)?;
    while let Some(r) = rows.next().map_err(q)? {
        rep.versions += 1;
        let vid: i64 = r.get(0).map_err(q)?;
        let blob: Vec<u8> = r.get(1).map_err(q)?;
        let m: Manifest = match zstd::decode_all(&blob[..])
            .map_err(|e| e.to_string())
            .and_then(|j| serde_json::from_slice(&j).map_err(|e| e.to_string()))
        {
            Ok(m) => m,
            Err(e) => {
                rep.errors
                    .push(format!("version {vid}: unreadable manifest: {e}"));
                continue;
            }
        };
        let mut missing = 0u64;
        for e in &m.entries {
            let mut sum = 0u64;
            for h in &e.recipe {
                match parse_fp_hex(h).and_then(|fp| raw_len_of.get(&fp)) {
                    Some(&n) => sum += n as u64,
                    None => missing += 1,
                }
            }
            if e.kind == EntryKind::File && missing == 0 && sum != e.size {
                rep.errors.push(format!(
                    "version {vid}: {}: size {} != chunks {sum}",
                    e.path, e.size
                ));
            }
        }
        if missing > 0 {
            rep.errors.push(format!(
                "version {vid}: {missing} recipe references to chunks that are not stored"
            ));
        }
    }
    Ok(rep)
}
