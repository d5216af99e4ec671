//! The HTTP/1.1 listener: the axum router served by hyper, with a timeout on reading request
//! headers that also closes idle keep-alive connections, so a client that connects and sends
//! nothing (or a header a byte at a time) cannot hold a connection open.

use std::{future::Future, time::Duration};

use axum::{
    http::{header, Extensions, HeaderMap, StatusCode, Version},
    Router,
};
use hyper::server::conn::http1;
use hyper_util::{
    rt::{TokioIo, TokioTimer},
    server::graceful::GracefulShutdown,
    service::TowerToHyperService,
};
use tokio::net::TcpListener;
use tower_http::compression::{
    predicate::{Predicate, SizeAbove},
    CompressionLayer, CompressionLevel,
};

/// Serves `app` on `listener` until `stop` resolves, then lets open connections finish for
/// at most `grace`. `header_timeout`: how long a connection may wait between requests or
/// take to send one request's headers.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    header_timeout: Duration,
    stop: impl Future<Output = ()>,
    grace: Duration,
) {
    let graceful = GracefulShutdown::new();
    tokio::pin!(stop);
    loop {
        tokio::select! {
            r = listener.accept() => {
                let stream = match r {
                    Ok((s, _)) => s,
                    Err(e) => {
                        // Out of descriptors, say: keep serving the connections we have.
                        eprintln!("ditto-server: accept: {e}");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let _ = stream.set_nodelay(true);
                let conn = http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(header_timeout)
                    .serve_connection(TokioIo::new(stream), TowerToHyperService::new(app.clone()));
                let watched = graceful.watch(conn);
                tokio::spawn(async move {
                    let _ = watched.await;
                });
            }
            _ = &mut stop => break,
        }
    }
    drop(listener);
    tokio::select! {
        _ = graceful.shutdown() => {}
        _ = tokio::time::sleep(grace) => {
            eprintln!("ditto-server: connections still open after {grace:?}; stopping anyway")
        }
    }
}

/// Content types sent compressed to a client that accepts zstd or gzip: JSON (a version's
/// manifest is ~40 bytes per chunk reference, mostly hex), the binary chunk locations and
/// search answers, and the page's own files. Chunk bundles and container ranges are left
/// alone: what they carry is compressed already, and they are most of what a restore or a
/// search moves.
const COMPRESSED_TYPES: &[&str] = &[
    "application/json",
    "application/x-ditto-locations",
    "application/x-ditto-search",
    "text/html",
    "text/css",
    "text/javascript",
    "application/javascript",
    "application/wasm",
    "image/svg+xml",
];

/// Responses smaller than this go as they are (the encoding's framing would eat the gain).
const COMPRESS_ABOVE: u16 = 1024;

/// Compression of the responses [`COMPRESSED_TYPES`] lists (docs/API.md), zstd where the
/// client takes it (current browsers), else gzip, both at level 3 (gzip's default level takes
/// several times as long for little less): over a link, the manifest a restore plans from
/// arrives in a fraction of the time, and on loopback it costs a few milliseconds.
pub fn compression() -> CompressionLayer<impl Predicate> {
    let listed = |_: StatusCode, _: Version, headers: &HeaderMap, _: &Extensions| {
        headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(|t| t.split(';').next().unwrap_or("").trim())
            .is_some_and(|t| COMPRESSED_TYPES.contains(&t))
    };
    CompressionLayer::new()
        .zstd(true)
        .gzip(true)
        .quality(CompressionLevel::Precise(3))
        .compress_when(SizeAbove::new(COMPRESS_ABOVE).and(listed))
}
