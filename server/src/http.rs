//! The HTTP/1.1 listener: the axum router served by hyper, with a timeout on reading request
//! headers that also closes idle keep-alive connections, so a client that connects and sends
//! nothing (or a header a byte at a time) cannot hold a connection open.

use std::{future::Future, time::Duration};

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::{
    rt::{TokioIo, TokioTimer},
    server::graceful::GracefulShutdown,
    service::TowerToHyperService,
};
use tokio::net::TcpListener;

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
