//! Containers as immutable objects in an S3-compatible object store (docs/STORAGE.md
//! "Object storage"), through the `object_store` crate: a container is one object, put
//! whole once (S3 acknowledges a PUT only once the object is durable) and never rewritten:
//! the PUT only creates (`If-None-Match: *`), as a container file on disk is only created;
//! reads are ranged GETs; the mover, compaction, expiry and garbage collection create and
//! delete objects. Keys are `<prefix>/repos/<repo id>/containers/<id>.dct`, as the local
//! disk's paths, so several repositories and several servers share one bucket.
//!
//! The store is synchronous (it runs on blocking threads); each call here runs its request
//! on a small runtime of its own and waits for the answer, so it works from any thread,
//! the HTTP server's blocking pool and the CLI alike.

use std::{future::Future, io, sync::Arc};

use futures_util::StreamExt;
use object_store::{
    aws::{AmazonS3, AmazonS3Builder},
    path::Path,
    ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload,
};

use super::{container_id_of, container_name, ContainerBackend, Handle, Whole};

/// An object opened for reading: its key and size.
pub struct ObjectHandle {
    key: Path,
    size: u64,
}

/// Where the objects are: read from the environment.
pub struct Config {
    pub bucket: String,
    pub endpoint: Option<String>,
    pub region: String,
    pub access_key_id: Option<String>,
    pub secret_access_key: Option<String>,
    pub prefix: String,
    /// Whether a container's PUT only creates (`If-None-Match: *`); off for a store that
    /// does not take that header, at the price of the guard it gives.
    pub create_only: bool,
}

impl Config {
    /// `DITTO_S3_BUCKET` (object storage is on when set), `DITTO_S3_ENDPOINT` (an
    /// S3-compatible server's URL; plain http allowed, for one on loopback),
    /// `DITTO_S3_REGION` (default `us-east-1`), `DITTO_S3_ACCESS_KEY_ID`,
    /// `DITTO_S3_SECRET_ACCESS_KEY`, `DITTO_S3_PREFIX` (prepended to every key),
    /// `DITTO_S3_CREATE_ONLY` (`1`, the default, or `0`).
    pub fn from_env() -> Result<Option<Config>, String> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let Some(bucket) = var("DITTO_S3_BUCKET") else {
            return Ok(None);
        };
        let access_key_id = var("DITTO_S3_ACCESS_KEY_ID");
        let secret_access_key = var("DITTO_S3_SECRET_ACCESS_KEY");
        if access_key_id.is_some() != secret_access_key.is_some() {
            return Err("DITTO_S3_ACCESS_KEY_ID and DITTO_S3_SECRET_ACCESS_KEY go together".into());
        }
        let create_only = match var("DITTO_S3_CREATE_ONLY").as_deref() {
            None | Some("1") => true,
            Some("0") => false,
            Some(v) => return Err(format!("DITTO_S3_CREATE_ONLY must be 0 or 1, not {v:?}")),
        };
        Ok(Some(Config {
            bucket,
            create_only,
            endpoint: var("DITTO_S3_ENDPOINT"),
            region: var("DITTO_S3_REGION").unwrap_or_else(|| "us-east-1".into()),
            access_key_id,
            secret_access_key,
            prefix: var("DITTO_S3_PREFIX")
                .unwrap_or_default()
                .trim_matches('/')
                .to_string(),
        }))
    }
}

/// Containers in an S3-compatible bucket.
pub struct ObjectStorage {
    store: Arc<AmazonS3>,
    prefix: String,
    create_only: bool,
    rt: tokio::runtime::Runtime,
}

fn io_err(e: object_store::Error) -> io::Error {
    match e {
        object_store::Error::NotFound { .. } => io::Error::new(io::ErrorKind::NotFound, e),
        object_store::Error::AlreadyExists { .. } => {
            io::Error::new(io::ErrorKind::AlreadyExists, e)
        }
        e => io::Error::other(e),
    }
}

impl ObjectStorage {
    pub fn new(cfg: Config) -> Result<ObjectStorage, String> {
        let mut b = AmazonS3Builder::new()
            .with_bucket_name(&cfg.bucket)
            .with_region(&cfg.region);
        if let Some(e) = &cfg.endpoint {
            b = b.with_endpoint(e).with_allow_http(e.starts_with("http://"));
        }
        if let (Some(k), Some(s)) = (&cfg.access_key_id, &cfg.secret_access_key) {
            b = b.with_access_key_id(k).with_secret_access_key(s);
        }
        let store = b
            .build()
            .map_err(|e| format!("object storage (bucket {}): {e}", cfg.bucket))?;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("ditto-s3")
            .enable_all()
            .build()
            .map_err(|e| format!("object storage runtime: {e}"))?;
        Ok(ObjectStorage {
            store: Arc::new(store),
            prefix: cfg.prefix,
            create_only: cfg.create_only,
            rt,
        })
    }

    fn key(&self, repo_id: i64, id: u64) -> Path {
        self.path(&container_name(repo_id, id))
    }

    fn path(&self, name: &str) -> Path {
        if self.prefix.is_empty() {
            Path::from(name)
        } else {
            Path::from(format!("{}/{name}", self.prefix))
        }
    }

    /// Runs `f` on the backend's runtime and waits for it.
    fn block<T: Send + 'static>(
        &self,
        f: impl Future<Output = object_store::Result<T>> + Send + 'static,
    ) -> io::Result<T> {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.rt.spawn(async move {
            let _ = tx.send(f.await);
        });
        rx.recv()
            .map_err(|_| io::Error::other("object storage request abandoned"))?
            .map_err(io_err)
    }

    /// Checks that the bucket answers (at startup, so that a wrong endpoint or key is told
    /// at once rather than at the first upload).
    pub fn check(&self) -> io::Result<()> {
        let store = Arc::clone(&self.store);
        let prefix = self.path("repos");
        self.block(async move {
            let mut l = store.list(Some(&prefix));
            match l.next().await {
                Some(Err(e)) => Err(e),
                _ => Ok(()),
            }
        })
    }
}

/// Ranged GETs in flight at once when many ranges are read together (`chunks/get`): on
/// object storage a request's latency, not its size, is the cost.
const READ_CONCURRENCY: usize = 16;

fn unsupported() -> io::Error {
    io::Error::new(
        io::ErrorKind::Unsupported,
        "objects are written whole, never appended to",
    )
}

impl ContainerBackend for ObjectStorage {
    fn appends(&self) -> bool {
        false
    }

    fn create(&self, _: i64, _: u64, _: &[u8], _: u64) -> io::Result<Handle> {
        Err(unsupported())
    }

    fn append_sync(&self, _: &Handle, _: u64, _: &[u8], _: u64, _: &[u8]) -> io::Result<()> {
        Err(unsupported())
    }

    fn write_whole(&self, repo_id: i64, id: u64, w: &Whole<'_>) -> io::Result<()> {
        let mut body = vec![0u8; w.data_at as usize + w.data.len()];
        body[..w.header.len()].copy_from_slice(w.header);
        let t = w.table_at as usize;
        body[t..t + w.table.len()].copy_from_slice(w.table);
        body[w.data_at as usize..].copy_from_slice(w.data);
        let store = Arc::clone(&self.store);
        let key = self.key(repo_id, id);
        let mode = if self.create_only {
            PutMode::Create
        } else {
            PutMode::Overwrite
        };
        let body = bytes::Bytes::from(body);
        let payload = PutPayload::from(body.clone());
        let k = key.clone();
        let put = self.block(async move {
            let opts = PutOptions::from(mode);
            store.put_opts(&k, payload, opts).await
        });
        match put {
            Ok(_) => Ok(()),
            // A new id has no object: one that has is not this index's to overwrite (another
            // server with an index of its own on this bucket and prefix), unless it holds
            // exactly these bytes.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                let store = Arc::clone(&self.store);
                let k = key.clone();
                let there = self.block(async move { store.get(&k).await?.bytes().await })?;
                if there == body {
                    return Ok(());
                }
                Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!(
                        "object {key} already exists with other bytes, and a new container is \
                         never written over one: does another server with an index of its own \
                         use this bucket and DITTO_S3_PREFIX?"
                    ),
                ))
            }
            Err(e) => Err(e),
        }
    }

    fn open(&self, repo_id: i64, id: u64) -> io::Result<Option<Handle>> {
        let store = Arc::clone(&self.store);
        let key = self.key(repo_id, id);
        let k = key.clone();
        match self.block(async move { store.head(&k).await }) {
            Ok(meta) => Ok(Some(Handle::Object(ObjectHandle {
                key,
                size: meta.size,
            }))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn read_at(&self, c: &Handle, offset: u64, len: u32) -> io::Result<Option<Vec<u8>>> {
        let Handle::Object(h) = c else {
            return Err(io::Error::other("not a container of the object store"));
        };
        let end = offset + len as u64;
        if end > h.size {
            return Ok(None);
        }
        if len == 0 {
            return Ok(Some(Vec::new()));
        }
        let store = Arc::clone(&self.store);
        let key = h.key.clone();
        match self.block(async move { store.get_range(&key, offset..end).await }) {
            Ok(b) if b.len() == len as usize => Ok(Some(b.to_vec())),
            Ok(_) => Ok(None),
            // Deleted since it was opened (moved away, or swept).
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn read_ranges(
        &self,
        repo_id: i64,
        ranges: &[(u64, u64, u32)],
    ) -> Vec<io::Result<Option<Vec<u8>>>> {
        // Ranged GETs by key, without a HEAD each, READ_CONCURRENCY at a time.
        let reqs: Vec<(Path, u64, u32)> = ranges
            .iter()
            .map(|&(id, offset, len)| (self.key(repo_id, id), offset, len))
            .collect();
        let store = Arc::clone(&self.store);
        let got = self.block(async move {
            Ok(futures_util::stream::iter(reqs)
                .map(|(key, offset, len)| {
                    let store = Arc::clone(&store);
                    async move {
                        let end = offset + len as u64;
                        match store.get_range(&key, offset..end).await {
                            Ok(b) if b.len() == len as usize => Ok(Some(b.to_vec())),
                            Ok(_) => Ok(None),
                            Err(e) => Err(io_err(e)),
                        }
                    }
                })
                .buffered(READ_CONCURRENCY)
                .collect::<Vec<io::Result<Option<Vec<u8>>>>>()
                .await)
        });
        let got = match got {
            Ok(v) => v,
            Err(e) => ranges
                .iter()
                .map(|_| Err(io::Error::new(e.kind(), e.to_string())))
                .collect(),
        };
        // A range the object does not cover is an error of the GET; the single read (a
        // HEAD for the size first) tells "shorter than committed" from a failure.
        got.into_iter()
            .zip(ranges)
            .map(|(r, &(id, offset, len))| match r {
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
                Err(_) => match self.open(repo_id, id)? {
                    Some(h) => self.read_at(&h, offset, len),
                    None => Ok(None),
                },
                ok => ok,
            })
            .collect()
    }

    fn read_all(&self, repo_id: i64, id: u64) -> io::Result<Option<Vec<u8>>> {
        let store = Arc::clone(&self.store);
        let key = self.key(repo_id, id);
        match self.block(async move { store.get(&key).await?.bytes().await }) {
            Ok(b) => Ok(Some(b.to_vec())),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn hint_newest_version(&self, _: i64, _: u64, _: i64) {
        // Objects are immutable: the header keeps the B_ID it was written with.
    }

    fn delete(&self, repo_id: i64, id: u64) -> io::Result<()> {
        let store = Arc::clone(&self.store);
        let key = self.key(repo_id, id);
        self.block(async move { store.delete(&key).await })
    }

    fn sync_deletes(&self, _: i64) -> io::Result<()> {
        // A DELETE is durable once acknowledged.
        Ok(())
    }

    fn list(&self) -> io::Result<Vec<(i64, u64, u64)>> {
        let store = Arc::clone(&self.store);
        let prefix = self.path("repos");
        let metas = self.block(async move {
            let mut out = Vec::new();
            let mut l = store.list(Some(&prefix));
            while let Some(m) = l.next().await {
                out.push(m?);
            }
            Ok(out)
        })?;
        let now = crate::store::now_ms() as i64;
        Ok(metas
            .into_iter()
            .filter_map(|m| {
                // `.../repos/{repo_id}/containers/{id}.dct` (`container_name`).
                let parts: Vec<_> = m.location.parts().collect();
                let [.., repo, dir, file] = &parts[..] else {
                    return None;
                };
                let id = container_id_of(file.as_ref())?;
                let repo_id = repo.as_ref().parse().ok()?;
                let age = (now - m.last_modified.timestamp_millis()).max(0) as u64;
                (dir.as_ref() == "containers").then_some((repo_id, id, age))
            })
            .collect())
    }
}
