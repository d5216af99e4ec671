//! Version endpoints: commit a manifest, list, read (deleting is `maintenance.rs`). The manifest is validated
//! here (paths, kinds, fingerprints); checking it against the index is the store's.

use std::collections::HashSet;

use axum::{
    body::Body,
    extract::{rejection::QueryRejection, Query, State},
    http::{header, HeaderMap, StatusCode},
    response::{IntoResponse, Response},
    Json,
};
use serde::Deserialize;
use serde_json::{json, Value};
use wasm_core::{
    format::manifest::{
        validate_path, EntryKind, Manifest, MAX_ENTRIES, MAX_FOLDER_BYTES, MAX_SOURCE_BYTES,
    },
    hash::Fingerprint,
};

use super::{
    blocking, forbidden, parse_fp, parse_id, parse_json, path_param, read_body, Any, Authorized,
    Backup, ReadData, RepoItemPath, St, MAX_MANIFEST_BODY,
};
use crate::{
    error::{ApiError, ApiResult},
    store::versions::VersionRow,
};

fn validate_manifest(m: &mut Manifest) -> ApiResult<Vec<Vec<Fingerprint>>> {
    if m.source.is_empty() || m.source.len() > MAX_SOURCE_BYTES || m.source.contains('\0') {
        return Err(ApiError::bad_request(
            "source must be 1 to 256 bytes, with no NUL",
        ));
    }
    if let Some(f) = &m.folder {
        if f.is_empty()
            || f.len() > MAX_FOLDER_BYTES
            || f.contains(['/', '\0'])
            || f == "."
            || f == ".."
        {
            return Err(ApiError::bad_request(
                "folder must be one folder name of 1 to 256 bytes (no '/', NUL, '.' or '..')",
            ));
        }
    }
    if m.entries.len() > MAX_ENTRIES {
        return Err(ApiError::too_large(
            format!("more than {MAX_ENTRIES} entries"),
            MAX_ENTRIES as u64,
        ));
    }
    let mut paths = HashSet::with_capacity(m.entries.len());
    let mut recipes = Vec::with_capacity(m.entries.len());
    for e in &mut m.entries {
        validate_path(&e.path).map_err(|why| {
            ApiError::bad_request(format!("{:?}: {why}", e.path)).with("path", e.path.clone())
        })?;
        if !paths.insert(e.path.as_str()) {
            return Err(
                ApiError::bad_request(format!("duplicate path {:?}", e.path))
                    .with("path", e.path.clone()),
            );
        }
        if e.kind != EntryKind::File && (e.size != 0 || !e.recipe.is_empty()) {
            return Err(ApiError::bad_request(format!(
                "{:?}: dirs and symlinks have size 0 and an empty recipe",
                e.path
            ))
            .with("path", e.path.clone()));
        }
        let mut fps = Vec::with_capacity(e.recipe.len());
        for s in &mut e.recipe {
            let fp = parse_fp(s)?;
            s.make_ascii_lowercase();
            fps.push(fp);
        }
        recipes.push(fps);
    }
    Ok(recipes)
}

pub(super) async fn versions_post(
    State(store): St,
    auth: Authorized<Backup>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    let access = auth.access;
    let repo_id = access.repo_id;
    let body = read_body(&headers, body, MAX_MANIFEST_BODY).await?;
    let s = store.clone();
    let v = blocking(move || {
        let mut m: Manifest = parse_json(&body)?;
        drop(body);
        let recipes = validate_manifest(&mut m)?;
        Ok(s.commit_version(repo_id, &m, &recipes, &access.id)?)
    })
    .await?;
    // The chunks the previous version of this source dropped are cold now: the mover
    // files them into archival containers in the background.
    crate::store::mover::kick(&store, repo_id);
    Ok((StatusCode::CREATED, Json(v)).into_response())
}

/// A version's summary; `damaged` counts its distinct chunks that are not stored (found
/// damaged, or lost): such a version cannot be restored whole until they are uploaded again.
/// The picked folder's name rides in the row's stats JSON (store::versions) and is lifted out here.
fn version_summary(v: &VersionRow) -> Value {
    let mut stats: Value = serde_json::from_str(&v.stats).unwrap_or(Value::Null);
    let folder = stats.as_object_mut().and_then(|o| o.remove("folder"));
    let mut out = json!({ "id": v.id, "source": v.source, "time": v.time, "committed_at": v.committed_ms,
            "stats": stats, "damaged": v.damaged > 0, "damaged_chunks": v.damaged.max(0) });
    if let Some(f) = folder.filter(Value::is_string) {
        out["folder"] = f;
    }
    out
}

#[derive(Deserialize)]
pub(super) struct VersionsQuery {
    raw_bytes: Option<bool>,
}

pub(super) async fn versions_list(
    State(store): St,
    auth: Authorized<Any>,
    q: Result<Query<VersionsQuery>, QueryRejection>,
) -> ApiResult<Json<Value>> {
    let access = auth.access;
    let repo_id = access.repo_id;
    let raw_bytes = q
        .map_err(|e| ApiError::bad_request(format!("bad query: {e}")))?
        .raw_bytes
        .unwrap_or(false);
    blocking(move || {
        // A token that may not browse sees only the versions it committed.
        let own = (!access.scope.can_browse()).then_some(access.id);
        // The epoch with the list: what a page keys its caches by, in one request.
        let gc_epoch = store.gc_epoch(repo_id)?;
        let list: Vec<Value> = store
            .list_versions(repo_id, own.as_deref())?
            .iter()
            .map(version_summary)
            .collect();
        let mut out = json!({ "versions": list, "gc_epoch": gc_epoch });
        // What a search of everything scans, when asked (one sum over the chunk rows), for
        // a token that may search.
        if raw_bytes && own.is_none() {
            out["raw_bytes"] = json!(store.committed_raw_bytes(repo_id)?);
        }
        Ok(Json(out))
    })
    .await
}

pub(super) async fn version_get(
    State(store): St,
    auth: Authorized<Any>,
    p: RepoItemPath,
) -> ApiResult<Response> {
    let (_, id) = path_param(p)?;
    let access = auth.access;
    let repo_id = access.repo_id;
    let id = parse_id(&id, "version")?;
    blocking(move || {
        let v = store.version(repo_id, id)?;
        if !access.scope.can_browse() && v.token_id.as_deref() != Some(access.id.as_str()) {
            return Err(forbidden(format!(
                "version {id} was committed with another token; {}",
                access.scope.describe()
            )));
        }
        let manifest = store.manifest_json(repo_id, &v)?;
        let head = serde_json::to_vec(&version_summary(&v.row)).map_err(ApiError::internal)?;
        let mut out = Vec::with_capacity(head.len() + manifest.len() + 16);
        out.extend_from_slice(&head[..head.len() - 1]);
        out.extend_from_slice(b",\"manifest\":");
        out.extend_from_slice(&manifest);
        out.push(b'}');
        Ok(([(header::CONTENT_TYPE, "application/json")], out).into_response())
    })
    .await
}

/// Where the chunks of one version are, in binary (docs/API.md): a restore plans from it.
pub(super) async fn version_locations(
    State(store): St,
    auth: Authorized<ReadData>,
    p: RepoItemPath,
) -> ApiResult<Response> {
    let (_, id) = path_param(p)?;
    let repo_id = auth.repo_id();
    let id = parse_id(&id, "version")?;
    blocking(move || {
        let body = store.version_locations(repo_id, id)?.encode();
        Ok((
            [(header::CONTENT_TYPE, "application/x-ditto-locations")],
            body,
        )
            .into_response())
    })
    .await
}
