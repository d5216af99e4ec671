//! `POST search`: DedupSearch run by the server (store module `search`), for repositories
//! too large to search in the page. Keywords are parsed and checked here, as the page's
//! engine does (`wasm_core::search`); the answer lists the files with hits like the page.

use axum::{
    body::Body,
    extract::State,
    http::{header, HeaderMap},
    response::{IntoResponse, Response},
    Extension, Json,
};
use serde::{ser::SerializeMap, ser::SerializeSeq, Deserialize, Serialize, Serializer};
use wasm_core::{
    format::search_answer::SearchAnswerWriter,
    hash::to_hex,
    search::{keyword_error, parse_keyword, parse_keyword_lines, Dictionary, Mode, MAX_KEYWORDS},
};

use super::{blocking, parse_json, read_body, search_turns::SearchTurns, Authorized, ReadData, St};
use crate::{
    error::{ApiError, ApiResult},
    store::{
        search::{Abandon, FileHits, SearchReport, SearchScope},
        StoreError,
    },
};

/// Abandons the search when dropped: axum drops a handler's future unfinished when its
/// client goes away, and the search, on a blocking thread, would otherwise run to its end.
struct AbandonOnDrop(Abandon);

impl Drop for AbandonOnDrop {
    fn drop(&mut self) {
        self.0.abandon();
    }
}

/// Keywords may be as long as the default chunker's minimum chunk size (docs/SEARCH.md).
pub const MAX_KEYWORD_LEN: usize = 2048;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchRequest {
    #[serde(default)]
    keywords: Vec<String>,
    /// Instead of `keywords`: one keyword per line, as typed in the page's Search tab
    /// (`wasm_core::search::parse_keyword_lines`, the page's workers' reading of it).
    #[serde(default)]
    text: Option<String>,
    /// Each keyword is hex bytes ("de ad be ef", "0xdeadbeef", ...), else UTF-8 text.
    #[serde(default)]
    hex: bool,
    /// Only the first hit per keyword and file.
    #[serde(default)]
    files_only: bool,
    /// Version ids to search; absent: all.
    #[serde(default)]
    versions: Option<Vec<i64>>,
    /// Only files whose path contains this (case-insensitive).
    #[serde(default)]
    path: String,
}

pub(super) async fn search(
    State(store): St,
    Extension(turns): Extension<SearchTurns>,
    auth: Authorized<ReadData>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    let repo_id = auth.repo_id();
    let binary = accepts(&headers, SEARCH_ANSWER_TYPE);
    let body = read_body(&headers, body, 1 << 20).await?;
    // At most 1 MiB of keywords: parsed and checked before the search waits for a slot, so
    // a bad request is refused at once.
    let req: SearchRequest = parse_json(&body)?;
    let keywords = match &req.text {
        Some(_) if !req.keywords.is_empty() => {
            return Err(ApiError::bad_request("give keywords or text, not both"))
        }
        Some(text) => parse_keyword_lines(text, req.hex),
        None => req
            .keywords
            .iter()
            .enumerate()
            .map(|(i, k)| parse_keyword(k, req.hex).map_err(|e| (i + 1, e)))
            .collect(),
    }
    .map_err(|(n, e)| ApiError::bad_request(keyword_error(n, &e)))?;
    if keywords.is_empty() || keywords.len() > MAX_KEYWORDS {
        return Err(ApiError::bad_request(format!(
            "keywords: give 1 to {MAX_KEYWORDS}"
        )));
    }
    // Each search decodes and scans on up to four threads and holds its keyword tables (up
    // to 128 MiB) and its matches in memory: more at once would only share the cores and
    // could exhaust the memory. One whose client goes away while it waits never runs.
    let _turn = turns.turn(repo_id).await;
    let abandon = Abandon::default();
    let _abandon_on_drop = AbandonOnDrop(abandon.clone());
    blocking(move || {
        let dict = Dictionary::new(keywords, MAX_KEYWORD_LEN)
            .map_err(|e| ApiError::bad_request(e.to_string()))?;
        let mode = if req.files_only {
            Mode::FilesOnly
        } else {
            Mode::AllMatches
        };
        let scope = SearchScope {
            versions: req.versions,
            path_filter: req.path,
        };
        let r = match store.search(repo_id, &dict, mode, &scope, &abandon) {
            Err(StoreError::Abandoned) => {
                eprintln!("search: repository {repo_id}: the client went away; stopped");
                return Err(StoreError::Abandoned.into());
            }
            r => r?,
        };
        if binary {
            return Ok((
                [(header::CONTENT_TYPE, SEARCH_ANSWER_TYPE)],
                encode_answer(&r)?,
            )
                .into_response());
        }
        Ok(Json(SearchAnswer(r)).into_response())
    })
    .await
}

/// The answer in bytes (docs/FORMAT.md, "Search answer"), for a client whose `Accept` names
/// it: the page, which would otherwise parse a pair of JSON numbers per match.
const SEARCH_ANSWER_TYPE: &str = "application/x-ditto-search";

/// Whether `Accept` lists `media_type` (parameters such as `q` are not weighed: a client
/// names this type only to get it).
fn accepts(headers: &HeaderMap, media_type: &str) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.split(';').next().unwrap_or("").trim() == media_type)
}

fn encode_answer(r: &SearchReport) -> ApiResult<Vec<u8>> {
    let head = serde_json::to_vec(&Head(r)).map_err(|e| ApiError::internal(e.to_string()))?;
    let mut w = SearchAnswerWriter::new(&head, r.files.len() as u32);
    for f in &r.files {
        // A chunk is at most the chunker's maximum, far below 4 GiB; the format says so.
        if f.recipe.iter().any(|c| c.len > u64::from(u32::MAX)) {
            return Err(ApiError::internal(format!(
                "{}: a chunk over 4 GiB",
                f.path
            )));
        }
        w.file(
            f.version as u64,
            f.size,
            &f.path,
            f.recipe.iter().map(|c| (&c.fp, c.len as u32)),
            &f.hits,
        );
    }
    Ok(w.finish())
}

/// The answer to `POST search` (docs/API.md), written straight from the report: an answer
/// holds a pair per match (hundreds of thousands for many keywords), which a JSON value tree
/// would first allocate one by one.
pub(super) struct SearchAnswer(SearchReport);

impl Serialize for SearchAnswer {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(12))?;
        m.serialize_entry("files", &Files(&self.0.files))?;
        head_entries(&mut m, &self.0)?;
        m.end()
    }
}

/// The answer's fields other than its files: the head of the answer in bytes.
struct Head<'a>(&'a SearchReport);

impl Serialize for Head<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(11))?;
        head_entries(&mut m, self.0)?;
        m.end()
    }
}

fn head_entries<M: SerializeMap>(m: &mut M, r: &SearchReport) -> Result<(), M::Error> {
    m.serialize_entry("versions", &r.versions)?;
    m.serialize_entry("matches", &r.matches)?;
    m.serialize_entry("files_searched", &r.files_searched)?;
    m.serialize_entry("logical_bytes", &r.logical_bytes)?;
    m.serialize_entry("containers", &r.containers)?;
    m.serialize_entry("chunks", &r.chunks)?;
    m.serialize_entry("bytes_scanned", &r.bytes_scanned)?;
    m.serialize_entry("chunks_ruled_out", &r.chunks_ruled_out)?;
    m.serialize_entry("bytes_ruled_out", &r.bytes_ruled_out)?;
    m.serialize_entry("stored_bytes_read", &r.stored_bytes_read)?;
    m.serialize_entry(
        "phase_ms",
        &PhaseMs {
            prepare: r.prepare_ms,
            physical: r.physical_ms,
            logical: r.logical_ms,
        },
    )
}

#[derive(Serialize)]
struct PhaseMs {
    prepare: f64,
    physical: f64,
    logical: f64,
}

/// The files with hits: each with its recipe as hex fingerprints and their raw lengths.
struct Files<'a>(&'a [FileHits]);

impl Serialize for Files<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for f in self.0 {
            seq.serialize_element(&FileAnswer(f))?;
        }
        seq.end()
    }
}

struct FileAnswer<'a>(&'a FileHits);

impl Serialize for FileAnswer<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let f = self.0;
        let mut m = s.serialize_map(Some(6))?;
        m.serialize_entry("version", &f.version)?;
        m.serialize_entry("path", &f.path)?;
        m.serialize_entry("size", &f.size)?;
        m.serialize_entry(
            "recipe",
            &f.recipe.iter().map(|c| to_hex(&c.fp)).collect::<Vec<_>>(),
        )?;
        m.serialize_entry(
            "lengths",
            &f.recipe.iter().map(|c| c.len).collect::<Vec<_>>(),
        )?;
        m.serialize_entry("hits", &f.hits)?;
        m.end()
    }
}
