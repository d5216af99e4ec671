//! The index contract (module docs of `index`, docs/STORAGE.md "Backends") as tests that any
//! backend runs: transactions are atomic and isolated, snapshots stable, ids grow. The
//! store's own suites (`server/tests`) cover the concepts through the real server.

use super::{repos::TokenRow, Index, IndexWriter};

/// Runs every contract test against a fresh, empty index made by `open`.
pub fn run_all(open: &dyn Fn() -> (Box<dyn Index>, Box<dyn IndexWriter>)) {
    let (ix, mut w) = open();
    commit_is_atomic_and_visible(&*ix, &mut *w);
    let (ix, mut w) = open();
    snapshot_is_stable(&*ix, &mut *w);
    let (ix, mut w) = open();
    ids_grow_and_tokens_dedupe(&*ix, &mut *w);
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
}

fn token(byte: u8, scope: &str, created_ms: i64) -> TokenRow {
    TokenRow {
        hash: vec![byte; 32],
        scope: scope.to_string(),
        created_ms,
    }
}
