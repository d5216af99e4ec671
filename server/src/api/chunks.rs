//! Chunk endpoints: which chunks are missing, their raw lengths, and reading them back
//! (one, or many streamed as a bundle).

use std::sync::Arc;

use axum::{
    body::Body,
    extract::State,
    http::{header, HeaderMap, HeaderValue},
    response::{IntoResponse, Response},
    Json,
};
use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use serde_json::json;
use wasm_core::{
    compress::{Compressor, CODEC_RAW},
    format::bundle::{encode_entry_header, encode_header, Codec, EntryHeader},
    hash::{to_hex, Fingerprint, FINGERPRINT_LEN},
};

use super::{
    blocking, is_binary, octets, parse_fp, parse_json, path_param, read_body, Any, Authorized,
    Deltas, FpList, ReadData, RepoItemPath, St, DEFAULT_SEND_STALL, MAX_GET_BODY, MAX_GET_FPS,
    MAX_GET_HAVE, MAX_MISSING_BODY, MAX_MISSING_FPS, SEND_STALL,
};
use crate::{
    error::{ApiError, ApiResult},
    store::{
        chunks::{Answer, ChunkLoc, FpSet},
        Lookup, Store, StoreError,
    },
};

/// `chunks/get` reads and verifies up to this many bytes of its answer before it sends the
/// status, so that a damaged chunk among them gets an explicit `damaged` error (every
/// request the page makes is smaller). Damage found later can only cut the stream.
const VERIFY_AHEAD: usize = 16 << 20;

/// `chunks/get` reads its chunks in windows of at most this many bytes held in memory (a
/// chunk's stored bytes, or its raw bytes where it is answered decoded: a compressible
/// chunk of 1 MiB may be stored in a few hundred bytes) or [`WINDOW_CHUNKS`] chunks (the
/// first always), each in container order and at once (`ChunkReader::read_many`),
/// answered in request order.
const WINDOW_BYTES: u64 = 8 << 20;
const WINDOW_CHUNKS: usize = 1024;

/// How many of `locs` (from the first) make the next window; `held` is the bytes a chunk
/// occupies in it.
fn read_window(
    locs: &[(Fingerprint, ChunkLoc)],
    held: impl Fn(&Fingerprint, &ChunkLoc) -> u64,
) -> usize {
    let mut bytes = 0;
    let mut n = 0;
    for (fp, l) in locs.iter().take(WINDOW_CHUNKS) {
        let b = held(fp, l);
        if n > 0 && bytes + b > WINDOW_BYTES {
            break;
        }
        bytes += b;
        n += 1;
    }
    n
}

/// A fingerprint list from a `chunks/missing` or `chunks/lengths` body: N x 20 bytes when
/// `binary`, else JSON `{"fingerprints": [hex, ...]}`; at most MAX_MISSING_FPS.
fn fp_list(body: &[u8], binary: bool) -> ApiResult<Vec<Fingerprint>> {
    let fps: Vec<Fingerprint> = if binary {
        if !body.len().is_multiple_of(FINGERPRINT_LEN) {
            return Err(ApiError::bad_request(
                "binary body length is not a multiple of 20",
            ));
        }
        body.chunks_exact(FINGERPRINT_LEN)
            .map(|c| c.try_into().unwrap())
            .collect()
    } else {
        let list: FpList = parse_json(body)?;
        if list.fingerprints.len() > MAX_MISSING_FPS {
            return Err(ApiError::too_large(
                format!("more than {MAX_MISSING_FPS} fingerprints"),
                MAX_MISSING_FPS as u64,
            ));
        }
        list.fingerprints
            .iter()
            .map(|s| parse_fp(s))
            .collect::<ApiResult<_>>()?
    };
    if fps.len() > MAX_MISSING_FPS {
        return Err(ApiError::too_large(
            format!("more than {MAX_MISSING_FPS} fingerprints"),
            MAX_MISSING_FPS as u64,
        ));
    }
    Ok(fps)
}

/// The shared front of `chunks/missing` and `chunks/lengths`: reads the fingerprint list
/// (binary or JSON) and answers with `answer(store, repo_id, fps, binary)` on a blocking
/// thread.
async fn fp_query(
    store: Arc<Store>,
    auth: Authorized<Any>,
    headers: HeaderMap,
    body: Body,
    answer: fn(&Store, i64, Vec<Fingerprint>, bool) -> ApiResult<Response>,
) -> ApiResult<Response> {
    let repo_id = auth.repo_id();
    let binary = is_binary(&headers);
    let body = read_body(&headers, body, MAX_MISSING_BODY).await?;
    blocking(move || answer(&store, repo_id, fp_list(&body, binary)?, binary)).await
}

pub(super) async fn missing(
    State(store): St,
    auth: Authorized<Any>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    fp_query(store, auth, headers, body, |store, repo_id, fps, binary| {
        let out = store.missing(repo_id, fps)?;
        Ok(if binary {
            octets(out.concat())
        } else {
            let hex: Vec<String> = out.iter().map(to_hex).collect();
            Json(json!({ "missing": hex })).into_response()
        })
    })
    .await
}

pub(super) async fn lengths(
    State(store): St,
    auth: Authorized<Any>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    fp_query(store, auth, headers, body, |store, repo_id, fps, binary| {
        let out = store.raw_lengths(repo_id, &fps)?;
        Ok(if binary {
            octets(out.iter().flat_map(|n| n.to_le_bytes()).collect())
        } else {
            Json(json!({ "lengths": out })).into_response()
        })
    })
    .await
}

pub(super) async fn chunk_get(
    State(store): St,
    auth: Authorized<ReadData>,
    p: RepoItemPath,
) -> ApiResult<Response> {
    let (_, fp) = path_param(p)?;
    let repo_id = auth.repo_id();
    let fp = parse_fp(&fp)?;
    blocking(move || {
        let loc = match store.locate(repo_id, &fp)? {
            Lookup::Stored(loc) => loc,
            Lookup::Damaged => return Err(StoreError::Damaged(vec![fp]).into()),
            Lookup::Missing => {
                return Err(ApiError::not_found(format!(
                    "chunk {} is not stored",
                    to_hex(&fp)
                )))
            }
        };
        let (_, raw) = store.read_chunk(repo_id, &fp, &loc, Answer::Raw)?;
        let mut resp = raw.into_response();
        let h = resp.headers_mut();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/octet-stream"),
        );
        h.insert("x-ditto-raw-length", HeaderValue::from(loc.raw_len));
        if let Ok(v) = HeaderValue::from_str(&format!("\"{}\"", to_hex(&fp))) {
            h.insert(header::ETAG, v);
        }
        Ok(resp)
    })
    .await
}

pub(super) async fn chunks_get(
    State(store): St,
    auth: Authorized<ReadData>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    let repo_id = auth.repo_id();
    let body = read_body(&headers, body, MAX_GET_BODY).await?;
    let (locs, answer, decoded) = {
        let store = store.clone();
        blocking(move || {
            let list: FpList = parse_json(&body)?;
            if list.fingerprints.len() > MAX_GET_FPS {
                return Err(ApiError::too_large(
                    format!("more than {MAX_GET_FPS} fingerprints"),
                    MAX_GET_FPS as u64,
                ));
            }
            let fps = list
                .fingerprints
                .iter()
                .map(|s| parse_fp(s))
                .collect::<ApiResult<Vec<Fingerprint>>>()?;
            let answer = match (list.decode, list.deltas, list.verify) {
                (true, ..) => Answer::Raw,
                (false, Deltas::Decoded, _) => Answer::Whole,
                (false, Deltas::Stored, true) => Answer::Stored,
                (false, Deltas::Stored, false) => Answer::StoredUnchecked,
            };
            let as_stored = matches!(answer, Answer::Stored | Answer::StoredUnchecked);
            if (list.chains || !list.have.is_empty()) && !as_stored {
                return Err(ApiError::bad_request(
                    "chains and have need \"deltas\": \"stored\" (and no decode)",
                ));
            }
            if !list.verify && !as_stored {
                return Err(ApiError::bad_request(
                    "verify: false needs \"deltas\": \"stored\" (and no decode)",
                ));
            }
            if !list.have.is_empty() && !list.chains {
                return Err(ApiError::bad_request("have needs \"chains\": true"));
            }
            if list.have.len() > MAX_GET_HAVE {
                return Err(ApiError::bad_request(format!(
                    "more than {MAX_GET_HAVE} fingerprints in have"
                )));
            }
            let have = list
                .have
                .iter()
                .map(|s| parse_fp(s))
                .collect::<ApiResult<FpSet>>()?;
            let mut locs = store.locate_all(repo_id, &fps)?;
            let mut decoded = FpSet::default();
            if list.chains {
                // Deltas whose chains would bring a link for a small share of its bytes go
                // decoded; the links of the others after the requested entries: the order
                // docs/API.md promises.
                let links;
                (decoded, links) = store.chains_answer(repo_id, &locs, &have)?;
                locs.extend(links);
            }
            Ok((locs, answer, decoded))
        })
        .await?
    };
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Piece>(4);
    let runtime = tokio::runtime::Handle::current();
    let stall = *SEND_STALL.get().unwrap_or(&DEFAULT_SEND_STALL);
    tokio::task::spawn_blocking(move || {
        // False once the client went away or took nothing for `stall`.
        let send = |piece: Piece| {
            runtime
                .block_on(tokio::time::timeout(stall, tx.send(piece)))
                .is_ok_and(|sent| sent.is_ok())
        };
        let held = |fp: &Fingerprint, l: &ChunkLoc| {
            let decodes = answer.decodes(l.codec) || decoded.contains(fp);
            if decodes {
                l.stored_len.max(l.raw_len) as u64
            } else {
                l.stored_len as u64
            }
        };
        let mut reader = store.chunk_reader(repo_id);
        let mut zstd = if decoded.is_empty() {
            None
        } else {
            Compressor::new(3).ok()
        };
        let mut buf = BytesMut::with_capacity(512 << 10);
        buf.extend_from_slice(&encode_header(locs.len() as u32));
        let mut sent = false;
        let mut rest = &locs[..];
        while !rest.is_empty() {
            let (window, tail) = rest.split_at(read_window(rest, held));
            rest = tail;
            let read = match reader.read_many(window, answer, &decoded) {
                Ok(v) => v,
                Err(e) => {
                    eprintln!("chunks/get: {e}");
                    send(Piece::Failed(e));
                    return;
                }
            };
            for ((fp, loc), (codec, payload)) in window.iter().zip(read) {
                // A delta answered decoded travels compressed (a few KiB, level 3).
                let (codec, payload) = match zstd.as_mut() {
                    Some(z) if decoded.contains(fp) && codec == CODEC_RAW => {
                        let (c, b) = z.compress(&payload);
                        (c, b.to_vec())
                    }
                    _ => (codec, payload),
                };
                let h = EntryHeader {
                    fp: *fp,
                    codec: Codec::from_u8(codec).unwrap_or(Codec::Raw),
                    raw_len: loc.raw_len,
                    stored_len: payload.len() as u32,
                };
                buf.extend_from_slice(&encode_entry_header(&h));
                buf.extend_from_slice(&payload);
                let send_at = if sent { 256 << 10 } else { VERIFY_AHEAD };
                if buf.len() >= send_at {
                    sent = true;
                    if !send(Piece::Data(buf.split().freeze())) {
                        return; // the client went away, or stopped reading
                    }
                }
            }
        }
        if !buf.is_empty() && !send(Piece::Data(buf.freeze())) {
            return;
        }
        send(Piece::End);
    });
    // The status waits for the first piece: everything up to VERIFY_AHEAD is verified.
    let first = match rx.recv().await {
        Some(Piece::Data(b)) => b,
        Some(Piece::Failed(e)) => return Err(e.into()),
        Some(Piece::End) | None => {
            return Err(ApiError::internal("chunks/get: the reader stopped"))
        }
    };
    // Too late for a status: a failure cuts the connection (an error item), so the client
    // never takes a truncated bundle for a whole one, and its retry gets the explicit error
    // (a damaged chunk is quarantined). So does a reader that stopped before `End`: it was
    // abandoned (the client took nothing for the stall time) or it panicked.
    let rest = futures_util::stream::unfold(Some(rx), |rx| async move {
        let mut rx = rx?;
        match rx.recv().await {
            Some(Piece::Data(b)) => Some((Ok(b), Some(rx))),
            Some(Piece::End) => None,
            Some(Piece::Failed(e)) => Some((Err(std::io::Error::other(e.to_string())), None)),
            None => Some((
                Err(std::io::Error::other(
                    "chunks/get: the reader stopped before the end",
                )),
                None,
            )),
        }
    });
    let stream =
        futures_util::stream::once(async move { Ok::<_, std::io::Error>(first) }).chain(rest);
    Ok((
        [(header::CONTENT_TYPE, "application/x-ditto-bundle")],
        Body::from_stream(stream),
    )
        .into_response())
}

/// What the `chunks/get` reader hands to the response.
enum Piece {
    Data(Bytes),
    Failed(StoreError),
    /// The answer is whole: the response ends.
    End,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 1 024 compressible chunks of 1 MiB stored in 300 bytes each.
    fn compressible() -> Vec<(Fingerprint, ChunkLoc)> {
        (0..1024u32)
            .map(|i| {
                let mut fp = [0u8; 20];
                fp[..4].copy_from_slice(&i.to_le_bytes());
                let loc = ChunkLoc {
                    container_id: 1,
                    offset: i as u64 * 300,
                    stored_len: 300,
                    raw_len: 1 << 20,
                    codec: 1,
                };
                (fp, loc)
            })
            .collect()
    }

    /// A window answered decoded holds its raw bytes: 8 chunks of 1 MiB, not 1 024 (1 GiB);
    /// answered as stored, the window holds what is stored.
    #[test]
    fn a_decoded_window_is_bounded_by_raw_bytes() {
        let locs = compressible();
        let raw = |_: &Fingerprint, l: &ChunkLoc| l.stored_len.max(l.raw_len) as u64;
        assert_eq!(read_window(&locs, raw), 8);
        let stored = |_: &Fingerprint, l: &ChunkLoc| l.stored_len as u64;
        assert_eq!(read_window(&locs, stored), WINDOW_CHUNKS);
        // The first chunk always makes a window, however large.
        let huge = |_: &Fingerprint, _: &ChunkLoc| WINDOW_BYTES * 2;
        assert_eq!(read_window(&locs, huge), 1);
    }
}
