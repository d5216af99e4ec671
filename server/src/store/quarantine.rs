//! Quarantine: what happens to a stored chunk found damaged.
//!
//! A chunk whose stored bytes no longer decode to its fingerprint (or whose container is
//! damaged or gone) must never be served and must not satisfy deduplication, or every later
//! backup would point at the rotten copy. Its index row therefore moves from `chunks` to
//! `quarantine` in one transaction: from then on the chunk is *not stored* (`chunks/missing`
//! asks for it, a version commit that references it gets 409), and the versions that
//! reference it count it in `versions.damaged`. The next upload of the good bytes stores a
//! new copy at a new place; that heals every version referencing the fingerprint, since
//! recipes name chunks by fingerprint, not by place. The quarantine row stays as the record
//! of the damaged copy (`healed_ms` set), so `check` can tell its container slot apart from
//! a broken index.

use std::collections::HashSet;

use rusqlite::{params, Connection};
use wasm_core::hash::Fingerprint;

use super::now_ms;

/// A damaged copy found by a read: quarantined only if the index still points there (a
/// concurrent upload may have healed it already).
#[derive(Debug, Clone)]
pub struct Found {
    pub fp: Fingerprint,
    pub container_id: u64,
    pub offset: u64,
    pub reason: String,
}

const MOVE_ROW: &str = "INSERT INTO quarantine(repo_id, fp, container_id, slot, offset, stored_len, raw_len, codec, first_version, reason, found_ms)
    SELECT repo_id, fp, container_id, slot, offset, stored_len, raw_len, codec, first_version, ?5, ?6
    FROM chunks WHERE repo_id = ?1 AND fp = ?2 AND container_id = ?3 AND offset = ?4";

/// Moves the index rows of `found` into quarantine and recounts the versions that reference
/// them. Runs in the caller's transaction. Returns the fingerprints actually quarantined.
pub fn quarantine(
    conn: &Connection,
    repo_id: i64,
    found: &[Found],
) -> rusqlite::Result<Vec<Fingerprint>> {
    let mut moved = Vec::new();
    {
        let mut ins = conn.prepare_cached(MOVE_ROW)?;
        let mut del = conn.prepare_cached(
            "DELETE FROM chunks WHERE repo_id = ?1 AND fp = ?2 AND container_id = ?3 AND offset = ?4",
        )?;
        let now = now_ms() as i64;
        for f in found {
            let at = params![repo_id, &f.fp[..], f.container_id as i64, f.offset as i64];
            if ins.execute(params![
                repo_id,
                &f.fp[..],
                f.container_id as i64,
                f.offset as i64,
                f.reason,
                now
            ])? > 0
            {
                del.execute(at)?;
                moved.push(f.fp);
            }
        }
    }
    if !moved.is_empty() {
        let touched: HashSet<Fingerprint> = moved.iter().copied().collect();
        recount_versions(conn, repo_id, Some(&touched), false)?;
    }
    Ok(moved)
}

/// Quarantines the chunks of one container: all of them, or (`past = Some(len)`) those whose
/// bytes reach past `len`. For recovery: a damaged header, a missing or short file.
pub fn quarantine_container(
    conn: &Connection,
    repo_id: i64,
    container_id: u64,
    past: Option<u64>,
    reason: &str,
) -> rusqlite::Result<Vec<Fingerprint>> {
    let found: Vec<Found> = {
        let mut st = conn.prepare_cached(
            "SELECT fp, offset, stored_len FROM chunks WHERE container_id = ?1 AND repo_id = ?2 ORDER BY slot",
        )?;
        let rows = st.query_map(params![container_id as i64, repo_id], |r| {
            Ok((
                r.get::<_, Vec<u8>>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, i64>(2)?,
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (fp, offset, stored) = row?;
            let Ok(fp) = Fingerprint::try_from(fp.as_slice()) else {
                continue;
            };
            let end = (offset as u64).saturating_add(stored as u64);
            if past.is_none_or(|len| end > len) {
                out.push(Found {
                    fp,
                    container_id,
                    offset: offset as u64,
                    reason: reason.to_string(),
                });
            }
        }
        out
    };
    quarantine(conn, repo_id, &found)
}

/// Whether `fp` has a damaged copy that no upload has replaced yet.
pub fn is_quarantined(conn: &Connection, repo_id: i64, fp: &Fingerprint) -> rusqlite::Result<bool> {
    conn.prepare_cached(
        "SELECT 1 FROM quarantine WHERE repo_id = ?1 AND fp = ?2 AND healed_ms IS NULL LIMIT 1",
    )?
    .exists(params![repo_id, &fp[..]])
}

/// Whether the repository has any damaged chunk not yet replaced (a cheap test that lets
/// uploads skip the per-chunk lookups of [`healing`] in the normal case).
pub fn any_open(conn: &Connection, repo_id: i64) -> rusqlite::Result<bool> {
    conn.prepare_cached(
        "SELECT 1 FROM quarantine WHERE repo_id = ?1 AND healed_ms IS NULL LIMIT 1",
    )?
    .exists([repo_id])
}

/// Of `fps` (about to be stored), those that replace a quarantined copy.
pub fn healing(
    conn: &Connection,
    repo_id: i64,
    fps: impl Iterator<Item = Fingerprint>,
) -> rusqlite::Result<Vec<Fingerprint>> {
    if !any_open(conn, repo_id)? {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for fp in fps {
        if is_quarantined(conn, repo_id, &fp)? {
            out.push(fp);
        }
    }
    Ok(out)
}

/// After `stored` were stored (in the caller's transaction), `healing` among them replacing
/// quarantined copies: the quarantine rows are closed, the new rows keep the version that
/// first referenced the chunk (so later versions' "new bytes" stats stay right), and the
/// damaged versions that reference any of `stored` are recounted.
pub fn stored(
    conn: &Connection,
    repo_id: i64,
    stored: &[Fingerprint],
    healing: &[Fingerprint],
) -> rusqlite::Result<()> {
    let now = now_ms() as i64;
    {
        let mut first = conn.prepare_cached(
            "UPDATE chunks SET first_version = (SELECT first_version FROM quarantine q WHERE q.repo_id = ?1 AND q.fp = ?2 ORDER BY id DESC LIMIT 1) WHERE repo_id = ?1 AND fp = ?2 AND first_version IS NULL",
        )?;
        let mut close = conn.prepare_cached(
            "UPDATE quarantine SET healed_ms = ?3 WHERE repo_id = ?1 AND fp = ?2 AND healed_ms IS NULL",
        )?;
        for fp in healing {
            first.execute(params![repo_id, &fp[..]])?;
            close.execute(params![repo_id, &fp[..], now])?;
        }
    }
    let any_damaged = conn
        .prepare_cached("SELECT 1 FROM versions WHERE repo_id = ?1 AND damaged > 0 LIMIT 1")?
        .exists([repo_id])?;
    if any_damaged {
        let touched: HashSet<Fingerprint> = stored.iter().copied().collect();
        recount_versions(conn, repo_id, Some(&touched), true)?;
    }
    Ok(())
}

/// The highest quarantine row id: it grows whenever any process (the server, or `check`)
/// quarantines a chunk, so the server can tell that its in-memory fingerprint sets are stale.
pub fn epoch(conn: &Connection) -> rusqlite::Result<i64> {
    conn.prepare_cached("SELECT COALESCE(MAX(id), 0) FROM quarantine")?
        .query_row([], |r| r.get(0))
}

/// Counts `versions.damaged` where it is unknown (-1, set by a schema migration); returns
/// how many versions turned out damaged.
pub fn recount_unknown(conn: &Connection) -> rusqlite::Result<usize> {
    let repos: Vec<i64> = {
        let mut st = conn.prepare("SELECT DISTINCT repo_id FROM versions WHERE damaged < 0")?;
        let it = st.query_map([], |r| r.get(0))?;
        it.collect::<Result<_, _>>()?
    };
    let mut damaged = 0;
    for repo_id in repos {
        let tx = conn.unchecked_transaction()?;
        recount(
            &tx,
            repo_id,
            None,
            "SELECT id, damaged, manifest FROM versions WHERE repo_id = ?1 AND damaged < 0",
        )?;
        damaged += tx.query_row(
            "SELECT COUNT(*) FROM versions WHERE repo_id = ?1 AND damaged > 0",
            [repo_id],
            |r| r.get::<_, i64>(0),
        )? as usize;
        tx.commit()?;
    }
    Ok(damaged)
}

/// Sets `versions.damaged` = the number of distinct recipe chunks that are not stored, for
/// the versions of `repo_id` (only those already damaged when `only_damaged`; only those
/// referencing a chunk of `touched` when given).
pub fn recount_versions(
    conn: &Connection,
    repo_id: i64,
    touched: Option<&HashSet<Fingerprint>>,
    only_damaged: bool,
) -> rusqlite::Result<()> {
    recount(
        conn,
        repo_id,
        touched,
        if only_damaged {
            "SELECT id, damaged, manifest FROM versions WHERE repo_id = ?1 AND damaged > 0"
        } else {
            "SELECT id, damaged, manifest FROM versions WHERE repo_id = ?1"
        },
    )
}

/// [`recount_versions`] over the versions `select` picks (`id, damaged, manifest` of
/// repository `?1`).
fn recount(
    conn: &Connection,
    repo_id: i64,
    touched: Option<&HashSet<Fingerprint>>,
    select: &str,
) -> rusqlite::Result<()> {
    let rows: Vec<(i64, i64, Vec<u8>)> = {
        let mut st = conn.prepare_cached(select)?;
        let it = st.query_map([repo_id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
        it.collect::<Result<_, _>>()?
    };
    let mut exists = conn.prepare_cached("SELECT 1 FROM chunks WHERE repo_id = ?1 AND fp = ?2")?;
    let mut set = conn.prepare_cached("UPDATE versions SET damaged = ?2 WHERE id = ?1")?;
    for (vid, before, blob) in rows {
        // An unreadable manifest is `check`'s to report; it cannot be counted here.
        let Ok(fps) = super::versions::manifest_fps(&blob) else {
            continue;
        };
        if touched.is_some_and(|t| !fps.iter().any(|fp| t.contains(fp))) {
            continue;
        }
        let mut n = 0i64;
        for fp in &fps {
            if !exists.exists(params![repo_id, &fp[..]])? {
                n += 1;
            }
        }
        if n != before {
            set.execute(params![vid, n])?;
        }
    }
    Ok(())
}

impl super::Store {
    /// The repository's damage as the index knows it: the damaged versions (id, count of
    /// their chunks not stored) and the count of distinct chunks still quarantined.
    pub fn damage(&self, repo_id: i64) -> super::StoreResult<(Vec<(i64, i64)>, i64)> {
        let conn = self.readers.get()?;
        let mut st = conn.prepare_cached(
            "SELECT id, damaged FROM versions WHERE repo_id = ?1 AND damaged > 0 ORDER BY id",
        )?;
        let versions = st
            .query_map([repo_id], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<Result<_, _>>()?;
        let quarantined: i64 = conn.query_row(
            "SELECT COUNT(DISTINCT fp) FROM quarantine WHERE repo_id = ?1 AND healed_ms IS NULL",
            [repo_id],
            |r| r.get(0),
        )?;
        Ok((versions, quarantined))
    }

}
