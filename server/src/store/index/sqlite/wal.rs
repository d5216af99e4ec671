//! The write-ahead log's identity, checked before every write.
//!
//! Committed transactions live in `ditto.sqlite3-wal` until a checkpoint copies them into
//! the database file. If that file is deleted (or replaced) while the server runs, the
//! server's connection keeps writing into the unlinked file: every later commit would be
//! acknowledged and then vanish at the next start. So the server remembers which file the
//! log is (device and inode) and, before each write, makes sure it still is. When it is not,
//! it copies what its connection still holds into the database file (a checkpoint through
//! the old descriptor) and refuses all writes until it is restarted.

use std::{
    os::unix::fs::MetadataExt,
    path::PathBuf,
    sync::{
        atomic::{AtomicBool, Ordering},
        Mutex,
    },
};

use rusqlite::Connection;

use crate::store::StoreError;

pub struct WalGuard {
    path: PathBuf,
    ident: Mutex<Option<(u64, u64)>>,
    lost: AtomicBool,
}

fn ident_of(path: &PathBuf) -> Option<(u64, u64)> {
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

impl WalGuard {
    pub fn new(db_path: PathBuf) -> WalGuard {
        let mut p = db_path.into_os_string();
        p.push("-wal");
        let path = PathBuf::from(p);
        WalGuard {
            ident: Mutex::new(ident_of(&path)),
            path,
            lost: AtomicBool::new(false),
        }
    }

    /// Before a write on `conn` (the writer connection): `Err(WalLost)` if the log is not the
    /// file it was.
    pub fn check(&self, conn: &Connection) -> Result<(), StoreError> {
        if self.lost.load(Ordering::Relaxed) {
            return Err(StoreError::WalLost);
        }
        let now = ident_of(&self.path);
        let mut known = self.ident.lock().unwrap_or_else(|p| p.into_inner());
        match (*known, now) {
            (Some(a), Some(b)) if a == b => return Ok(()),
            // SQLite had not created the log yet when the server started.
            (None, Some(b)) => {
                *known = Some(b);
                return Ok(());
            }
            (None, None) => return Ok(()),
            _ => {}
        }
        self.lost.store(true, Ordering::Relaxed);
        let saved = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, i64>(2)?,
            ))
        });
        eprintln!(
            "ditto-server: {} was removed or replaced while the server runs; writes are refused until a restart (checkpoint of what the server's connection held: {saved:?})",
            self.path.display()
        );
        Err(StoreError::WalLost)
    }
}
