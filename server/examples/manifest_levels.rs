//! Measures the zstd level of stored manifests (docs/BENCHMARKS.md, "Stored manifests"):
//! reads every version's manifest from a copy of a data directory's `ditto.sqlite3`, and
//! for each level prints the bytes the version rows would hold and the time to compress
//! and decode one manifest, and beside them the bytes if each manifest were compressed
//! against the previous one (in id order, whatever its source; the server uses the source's
//! previous version, docs/FORMAT.md "Stored form").
//!
//! `cargo run -p ditto-server --example manifest_levels -- COPY.sqlite3 [LEVEL...]`
//!
//! The database is opened read-only; pass a copy anyway, since a live server's file may
//! change underneath. The server has no library target, so this calls zstd as
//! `store::manifest_blob` does: one frame per manifest with its content checksum, a row
//! with a `manifest_base` decoded with its base's JSON as the dictionary.

use std::time::{Duration, Instant};

use rusqlite::{Connection, OpenFlags};

/// Repetitions per manifest and level: enough for a steady time at the fast levels, few
/// enough that the slow ones finish in seconds.
const ROUNDS: u32 = 20;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let db = args
        .next()
        .ok_or("usage: manifest_levels COPY.sqlite3 [LEVEL...]")?;
    let mut levels: Vec<i32> = args.map(|a| a.parse()).collect::<Result<_, _>>()?;
    if levels.is_empty() {
        levels = vec![3, 9, 12, 19];
    }
    let c = Connection::open_with_flags(&db, OpenFlags::SQLITE_OPEN_READ_ONLY)?;
    let mut st = c.prepare("SELECT id, manifest_base, manifest FROM versions ORDER BY id")?;
    let rows = st.query_map([], |r| {
        Ok((
            r.get::<_, i64>(0)?,
            r.get::<_, Option<i64>>(1)?,
            r.get::<_, Vec<u8>>(2)?,
        ))
    })?;
    let mut stored = 0usize;
    let mut jsons: Vec<(i64, Vec<u8>)> = Vec::new();
    for row in rows {
        let (id, base, blob) = row?;
        stored += blob.len();
        let json = match base {
            None => zstd::decode_all(&blob[..]),
            Some(b) => {
                let base = &jsons
                    .iter()
                    .find(|(id, _)| *id == b)
                    .ok_or_else(|| format!("version {id}: base {b} not found"))?
                    .1;
                zstd::bulk::Decompressor::with_dictionary(base)
                    .and_then(|mut d| d.decompress(&blob, 256 << 20))
            }
        };
        jsons.push((id, json.map_err(|e| format!("version {id}: {e}"))?));
    }
    let json_bytes: usize = jsons.iter().map(|(_, j)| j.len()).sum();
    println!(
        "{} manifests: {json_bytes} bytes of JSON, {stored} bytes stored now",
        jsons.len()
    );
    println!(
        "level  stored_bytes  ratio  compress_ms_per_manifest  decode_ms_per_manifest  compress_MB/s  with_previous_bytes"
    );
    for level in levels {
        let mut size = 0usize;
        let mut enc = Duration::ZERO;
        let mut dec = Duration::ZERO;
        for (_, json) in &jsons {
            let t = Instant::now();
            let mut frame = Vec::new();
            for _ in 0..ROUNDS {
                let mut c = zstd::bulk::Compressor::new(level)?;
                c.set_parameter(zstd::zstd_safe::CParameter::ChecksumFlag(true))?;
                frame = c.compress(json)?;
            }
            enc += t.elapsed();
            let t = Instant::now();
            for _ in 0..ROUNDS {
                let back = zstd::decode_all(&frame[..])?;
                assert_eq!(&back, json, "level {level} does not round-trip");
            }
            dec += t.elapsed();
            size += frame.len();
        }
        // The candidate beyond a level: each manifest compressed against the one before it
        // (id order) as a raw-content dictionary, the first on its own.
        let mut with_previous = 0usize;
        for (i, (_, json)) in jsons.iter().enumerate() {
            let mut c = match i {
                0 => zstd::bulk::Compressor::new(level)?,
                _ => zstd::bulk::Compressor::with_dictionary(level, &jsons[i - 1].1)?,
            };
            c.set_parameter(zstd::zstd_safe::CParameter::ChecksumFlag(true))?;
            with_previous += c.compress(json)?.len();
        }
        let per = |d: Duration| d.as_secs_f64() * 1e3 / (ROUNDS as f64 * jsons.len() as f64);
        let mbps = json_bytes as f64 * ROUNDS as f64 / enc.as_secs_f64() / 1e6;
        println!(
            "{level:>5}  {size:>12}  {:>5.3}  {:>24.3}  {:>22.3}  {mbps:>13.1}  {with_previous:>19}",
            size as f64 / json_bytes as f64,
            per(enc),
            per(dec)
        );
    }
    Ok(())
}
