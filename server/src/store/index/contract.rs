//! The index contract (module docs of `index`, docs/STORAGE.md "Backends") as tests that any
//! backend runs: transactions are atomic and isolated, snapshots stable, ids grow. The
//! store's own suites (`server/tests`) cover the concepts through the real server.

use wasm_core::{hash::Fingerprint, resemble::frame::SLICE_LEN};

use super::{
    chunks::NewChunk,
    containers::NewContainer,
    maintenance::{RewriteMove, WrittenContainer},
    quarantine::Found,
    repos::TokenRow,
    versions::{NewVersion, StoredManifest},
    Index, IndexWrite, IndexWriter,
};

/// Runs every contract test against a fresh, empty index made by `open`.
pub fn run_all(open: &dyn Fn() -> (Box<dyn Index>, Box<dyn IndexWriter>)) {
    let (ix, mut w) = open();
    commit_is_atomic_and_visible(&*ix, &mut *w);
    let (ix, mut w) = open();
    snapshot_is_stable(&*ix, &mut *w);
    let (ix, mut w) = open();
    ids_grow_and_tokens_dedupe(&*ix, &mut *w);
    let (ix, mut w) = open();
    chunks_move_quarantine_and_go(&*ix, &mut *w);
    let (ix, mut w) = open();
    bases_come_with_locations(&*ix, &mut *w);
    let (ix, mut w) = open();
    committed_raw_leaves_out_pending_chunks_and_frames(&*ix, &mut *w);
}

fn commit_is_atomic_and_visible(ix: &dyn Index, w: &mut dyn IndexWriter) {
    // Dropped uncommitted: nothing of it stays.
    {
        let tx = w.begin().unwrap();
        tx.create_repo("gone", 1).unwrap();
        assert!(
            tx.repo_id("gone").unwrap().is_some(),
            "a tx reads its own writes"
        );
    }
    assert_eq!(ix.read().unwrap().repo_id("gone").unwrap(), None);

    // Committed: all of it is visible at once, and not before.
    let tx = w.begin().unwrap();
    let id = tx.create_repo("kept", 2).unwrap();
    tx.add_token(id, &token(7, "full", 3)).unwrap();
    assert_eq!(ix.read().unwrap().repo_id("kept").unwrap(), None);
    tx.commit().unwrap();
    let r = ix.read().unwrap();
    assert_eq!(r.repo_id("kept").unwrap(), Some(id));
    assert_eq!(r.token(&[7; 32]).unwrap(), Some((id, "full".to_string())));
}

fn snapshot_is_stable(ix: &dyn Index, w: &mut dyn IndexWriter) {
    let tx = w.begin().unwrap();
    tx.create_repo("a", 1).unwrap();
    tx.commit().unwrap();
    let snap = ix.snapshot().unwrap();
    assert_eq!(snap.repo_ids().unwrap().len(), 1);
    // The writer is not blocked by the open snapshot, and the snapshot does not move.
    let tx = w.begin().unwrap();
    tx.create_repo("b", 2).unwrap();
    tx.commit().unwrap();
    assert_eq!(snap.repo_ids().unwrap().len(), 1);
    assert_eq!(snap.repo_id("b").unwrap(), None);
    drop(snap);
    assert_eq!(ix.read().unwrap().repo_ids().unwrap().len(), 2);
    assert!(ix.snapshot().unwrap().repo_id("b").unwrap().is_some());
}

fn ids_grow_and_tokens_dedupe(ix: &dyn Index, w: &mut dyn IndexWriter) {
    let tx = w.begin().unwrap();
    let a = tx.create_repo("x", 1).unwrap();
    let b = tx.create_repo("y", 1).unwrap();
    assert!(b > a);
    tx.add_token(a, &token(1, "read", 20)).unwrap();
    tx.add_token(a, &token(2, "backup", 10)).unwrap();
    // The same token again is left as it was (its scope is not changed).
    tx.add_token(a, &token(1, "full", 30)).unwrap();
    tx.commit().unwrap();
    let r = ix.read().unwrap();
    assert_eq!(r.repo_ids().unwrap(), vec![a, b]);
    let listed: Vec<(u8, String)> = r
        .tokens(a)
        .unwrap()
        .into_iter()
        .map(|t| (t.hash[0], t.scope))
        .collect();
    assert_eq!(
        listed,
        vec![(2, "backup".to_string()), (1, "read".to_string())],
        "oldest first"
    );
    assert!(r.tokens(b).unwrap().is_empty());
    drop(r);
    let tx = w.begin().unwrap();
    tx.delete_token(&[1; 32]).unwrap();
    tx.commit().unwrap();
    assert_eq!(ix.read().unwrap().token(&[1; 32]).unwrap(), None);
    // Ids keep growing across transactions.
    let tx = w.begin().unwrap();
    let c = tx.create_repo("z", 1).unwrap();
    tx.commit().unwrap();
    assert!(c > b);
    // A container id handed out counts as handed out before any row names it (recovery
    // removes only files with such ids), and the next one is above it.
    let before = ix.read().unwrap().container_ids_handed_out().unwrap();
    let id = w.next_container_id().unwrap();
    assert!(id > before);
    assert!(ix.read().unwrap().container_ids_handed_out().unwrap() >= id);
    assert!(w.next_container_id().unwrap() > id);
}

/// A chunk's life: stored in a container, referenced by a version, re-pointed by a move
/// (only where the row still names the old slot), quarantined (then not stored), healed,
/// and its container dropped with its rows.
fn chunks_move_quarantine_and_go(ix: &dyn Index, w: &mut dyn IndexWriter) {
    let fp = |b: u8| -> Fingerprint { [b; 20] };
    let tx = w.begin().unwrap();
    let repo = tx.create_repo("r", 1).unwrap();
    let other = tx.create_repo("o", 1).unwrap();
    container(&*tx, 1, repo);
    tx.insert_chunks(
        repo,
        1,
        5,
        &[chunk(1, 0, 64), chunk(2, 1, 96), chunk(3, 2, 128)],
    )
    .unwrap();
    tx.extend_container(1, 160, 3).unwrap();
    let v1 = tx
        .insert_version(&NewVersion {
            repo_id: repo,
            source: "src",
            time: 10,
            committed_ms: 11,
            stats: "{}",
            manifest: &StoredManifest {
                base: None,
                blob: b"m1".to_vec(),
            },
            token_id: "t",
        })
        .unwrap();
    tx.commit().unwrap();
    versions_store_manifests_with_their_base(ix, w, repo, v1);

    let r = ix.snapshot().unwrap();
    assert_eq!(r.max_container_id().unwrap(), 1);
    assert_eq!(r.chunk_count(repo).unwrap(), 3);
    assert_eq!(
        r.chunk_count(other).unwrap(),
        0,
        "rows belong to their repository"
    );
    let loc = r.chunk_location(repo, &fp(2)).unwrap().unwrap();
    assert_eq!((loc.container_id, loc.offset, loc.stored_len), (1, 96, 32));
    assert!(r.chunk_location(other, &fp(2)).unwrap().is_none());
    // Batched lookups answer in the order asked, absent ones and repeats included.
    let locs = r
        .chunk_locations(repo, &[fp(3), fp(9), fp(2), fp(3)])
        .unwrap();
    let offsets: Vec<Option<u64>> = locs.iter().map(|l| l.map(|l| l.offset)).collect();
    assert_eq!(offsets, vec![Some(128), None, Some(96), Some(128)]);
    assert!(r.chunk_locations(repo, &[]).unwrap().is_empty());
    let versions = r.versions(repo, None).unwrap();
    assert_eq!(versions.len(), 1);
    assert_eq!((versions[0].id, versions[0].time), (v1, 10));
    drop(r);

    // The mover's switch: chunk 1 moves to container 2; chunk 2's move names a slot it no
    // longer holds and is skipped.
    let tx = w.begin().unwrap();
    tx.insert_written_container(&WrittenContainer {
        id: 2,
        repo_id: repo,
        kind: 1,
        data_offset: 64,
        data_end: 96,
        chunk_count: 1,
        newest_version: v1,
        created_ms: 1,
        sealed: true,
    })
    .unwrap();
    tx.repoint_chunks(repo, 2, &[(fp(1), 1, 0, 0, 64), (fp(2), 1, 7, 1, 96)])
        .unwrap();
    tx.commit().unwrap();
    let r = ix.read().unwrap();
    assert_eq!(
        r.chunk_location(repo, &fp(1))
            .unwrap()
            .unwrap()
            .container_id,
        2
    );
    assert_eq!(
        r.chunk_location(repo, &fp(2))
            .unwrap()
            .unwrap()
            .container_id,
        1
    );
    assert_eq!(r.max_container_id().unwrap(), 2);
    drop(r);

    // Quarantine: only where the row still points; afterwards the chunk is not stored.
    let tx = w.begin().unwrap();
    let found = |b: u8, container_id: u64, offset: u64| Found {
        fp: fp(b),
        container_id,
        offset,
        reason: "test".into(),
    };
    assert!(!tx.quarantine_chunk(repo, &found(3, 2, 128), 50).unwrap());
    assert!(tx.quarantine_chunk(repo, &found(3, 1, 128), 50).unwrap());
    tx.commit().unwrap();
    let r = ix.read().unwrap();
    assert!(!r.chunk_stored(repo, &fp(3)).unwrap());
    assert!(r.is_quarantined(repo, &fp(3)).unwrap());
    assert_eq!(r.quarantined_count(repo).unwrap(), 1);
    drop(r);
    let tx = w.begin().unwrap();
    tx.heal_quarantined(repo, &fp(3), 60).unwrap();
    tx.commit().unwrap();
    assert!(!ix.read().unwrap().is_quarantined(repo, &fp(3)).unwrap());

    // Garbage collection: a container's rows and the container go together, and the
    // epoch that clients' caches are valid for moves.
    let epoch = ix.read().unwrap().gc_epoch(repo).unwrap();
    let tx = w.begin().unwrap();
    assert_eq!(tx.delete_container_chunks(1).unwrap(), 1);
    tx.drop_container(1).unwrap();
    tx.bump_gc_epoch(repo).unwrap();
    tx.delete_versions(repo, &[v1]).unwrap();
    tx.commit().unwrap();
    let r = ix.read().unwrap();
    assert!(r.gc_epoch(repo).unwrap() > epoch);
    assert_eq!(r.container_ids(repo).unwrap(), vec![2]);
    assert_eq!(r.chunk_count(repo).unwrap(), 1);
    assert!(r.versions(repo, None).unwrap().is_empty());
    drop(r);

    // The delta pass's record: 0 for a new repository, raised, never lowered.
    assert_eq!(ix.read().unwrap().delta_done(repo).unwrap(), Some(0));
    let tx = w.begin().unwrap();
    tx.set_delta_done(repo, 5).unwrap();
    tx.set_delta_done(repo, 3).unwrap();
    tx.commit().unwrap();
    assert_eq!(ix.read().unwrap().delta_done(repo).unwrap(), Some(5));
}

/// A manifest row keeps its base as written; dependents are found by base; a row's
/// manifest can be stored another way.
fn versions_store_manifests_with_their_base(
    ix: &dyn Index,
    w: &mut dyn IndexWriter,
    repo: i64,
    v1: i64,
) {
    let tx = w.begin().unwrap();
    let v2 = tx
        .insert_version(&NewVersion {
            repo_id: repo,
            source: "src",
            time: 12,
            committed_ms: 13,
            stats: "{}",
            manifest: &StoredManifest {
                base: Some(v1),
                blob: b"m2".to_vec(),
            },
            token_id: "t",
        })
        .unwrap();
    tx.commit().unwrap();
    let r = ix.read().unwrap();
    let m2 = r.stored_manifest(repo, v2).unwrap().unwrap();
    assert_eq!((m2.base, &m2.blob[..]), (Some(v1), &b"m2"[..]));
    assert_eq!(r.stored_manifest(repo, v1).unwrap().unwrap().base, None);
    assert!(r.stored_manifest(repo + 1, v2).unwrap().is_none());
    assert_eq!(r.manifest_dependents(repo, &[v1]).unwrap(), vec![v2]);
    assert!(r.manifest_dependents(repo, &[v2]).unwrap().is_empty());
    let rec = r.version(repo, v2).unwrap().unwrap();
    assert_eq!(rec.manifest.base, Some(v1));
    let all = r.manifests(repo).unwrap();
    assert!(all.iter().any(|(id, m)| *id == v2 && m.base == Some(v1)));
    drop(r);
    let tx = w.begin().unwrap();
    let alone = StoredManifest {
        base: None,
        blob: b"m2 alone".to_vec(),
    };
    tx.set_manifest(repo, v2, &alone).unwrap();
    tx.delete_versions(repo, &[v2]).unwrap();
    tx.commit().unwrap();
    let r = ix.read().unwrap();
    assert!(r.stored_manifest(repo, v2).unwrap().is_none());
    assert!(r.manifest_dependents(repo, &[v1]).unwrap().is_empty());
}

/// A delta's base read with its location answers what the two reads answer apart, in the
/// order asked, absent chunks and repeats included.
fn bases_come_with_locations(ix: &dyn Index, w: &mut dyn IndexWriter) {
    let fp = |b: u8| -> Fingerprint { [b; 20] };
    let tx = w.begin().unwrap();
    let repo = tx.create_repo("r", 1).unwrap();
    container(&*tx, 1, repo);
    tx.insert_chunks(repo, 1, 5, &[chunk(1, 0, 64), chunk(2, 1, 96)])
        .unwrap();
    // Chunk 2 re-stored in place as a delta against chunk 1, as the delta pass does.
    tx.repoint_rewritten(
        repo,
        1,
        &[RewriteMove {
            fp: fp(2),
            old_container: 1,
            old_slot: 1,
            slot: 1,
            offset: 96,
            stored_len: 12,
            codec: 2,
            base: Some(fp(1)),
            saved: 20,
        }],
    )
    .unwrap();
    tx.commit().unwrap();
    let r = ix.snapshot().unwrap();
    let asked = [fp(2), fp(9), fp(1), fp(2)];
    let both = r.chunk_locations_with_bases(repo, &asked).unwrap();
    let apart: Vec<_> = r
        .chunk_locations(repo, &asked)
        .unwrap()
        .into_iter()
        .zip(r.delta_bases(repo, &asked).unwrap())
        .map(|(l, b)| l.map(|l| (l, b)))
        .collect();
    assert_eq!(both, apart);
    let bases: Vec<_> = both.iter().map(|x| x.map(|(_, b)| b)).collect();
    assert_eq!(
        bases,
        vec![Some(Some(fp(1))), None, Some(None), Some(Some(fp(1)))]
    );
    assert_eq!(both[0].unwrap().0.stored_len, 12);
    assert!(r.chunk_locations_with_bases(repo, &[]).unwrap().is_empty());
}

/// The committed raw bytes sum the chunks a commit marked, but not a chunk a slice is
/// stored against (a frame); a chunk another delta is stored against counts.
fn committed_raw_leaves_out_pending_chunks_and_frames(ix: &dyn Index, w: &mut dyn IndexWriter) {
    let fp = |b: u8| -> Fingerprint { [b; 20] };
    let tx = w.begin().unwrap();
    let repo = tx.create_repo("r", 1).unwrap();
    container(&*tx, 1, repo);
    let rows: Vec<NewChunk> = (1..=5)
        .map(|b| NewChunk {
            raw_len: 100 * b as u32,
            ..chunk(b, b as u32, 64 * b as u64)
        })
        .collect();
    tx.insert_chunks(repo, 1, 5, &rows).unwrap();
    // Chunk 5 is uploaded, not yet committed.
    tx.mark_first_version(repo, 7, &[fp(1), fp(2), fp(3), fp(4)])
        .unwrap();
    // Chunk 3 a slice of frame 2; chunk 4 a delta against chunk 1.
    let delta = |b: u8, base: u8, stored_len: u32| RewriteMove {
        fp: fp(b),
        old_container: 1,
        old_slot: b as u32,
        slot: b as u32,
        offset: 64 * b as u64,
        stored_len,
        codec: 2,
        base: Some(fp(base)),
        saved: 1,
    };
    tx.repoint_rewritten(repo, 1, &[delta(3, 2, SLICE_LEN as u32), delta(4, 1, 12)])
        .unwrap();
    tx.commit().unwrap();
    assert_eq!(
        ix.read().unwrap().committed_raw_bytes(repo).unwrap(),
        100 + 300 + 400
    );
}

fn container(tx: &dyn IndexWrite, id: u64, repo_id: i64) {
    tx.insert_container(&NewContainer {
        id,
        repo_id,
        kind: 0,
        data_offset: 64,
        data_end: 64,
        chunk_count: 0,
        created_ms: 1,
    })
    .unwrap();
}

/// Chunk `b` (fingerprint all `b`) in slot `slot` at `offset`, 32 stored bytes.
fn chunk(b: u8, slot: u32, offset: u64) -> NewChunk {
    NewChunk {
        fp: [b; 20],
        slot,
        offset,
        stored_len: 32,
        raw_len: 40,
        codec: 1,
    }
}

fn token(byte: u8, scope: &str, created_ms: i64) -> TokenRow {
    TokenRow {
        hash: vec![byte; 32],
        scope: scope.to_string(),
        created_ms,
    }
}
