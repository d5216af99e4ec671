//! `ditto-server`: the storage server and the host of the web app.
//!
//! `ditto-server serve` listens on 127.0.0.1:$PORT (default 8080), keeps its data in
//! $DATA_DIR (default ./data) and serves the built web app from $WEB_DIR (default web/dist).

use std::{net::SocketAddr, path::PathBuf};

use axum::{routing::get, Json, Router};
use tower_http::services::{ServeDir, ServeFile};

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_string())
}

/// The access token of the default repository, created on first start and kept in the
/// data directory (mode 0600) so that `npm start` can print the same link every time.
fn default_token(data_dir: &std::path::Path) -> std::io::Result<String> {
    let path = data_dir.join("default-repo.token");
    if let Ok(t) = std::fs::read_to_string(&path) {
        return Ok(t.trim().to_string());
    }
    let mut bytes = [0u8; 24];
    getrandom::fill(&mut bytes).map_err(|e| std::io::Error::other(e.to_string()))?;
    let token: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    std::fs::write(&path, &token)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
    }
    Ok(token)
}

async fn health() -> Json<serde_json::Value> {
    Json(serde_json::json!({ "status": "ok", "version": env!("CARGO_PKG_VERSION") }))
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        None | Some("serve") => {}
        Some(other) => {
            eprintln!("unknown command {other:?}; usage: ditto-server serve");
            std::process::exit(2);
        }
    }
    let port: u16 = env_or("PORT", "8080").parse().unwrap_or_else(|_| {
        eprintln!("PORT must be a number");
        std::process::exit(2)
    });
    let data_dir = PathBuf::from(env_or("DATA_DIR", "data"));
    let web_dir = PathBuf::from(env_or("WEB_DIR", "web/dist"));
    if let Err(e) = std::fs::create_dir_all(&data_dir) {
        eprintln!("cannot create data directory {}: {e}", data_dir.display());
        std::process::exit(1);
    }
    let token = default_token(&data_dir).unwrap_or_else(|e| {
        eprintln!(
            "cannot create the default token in {}: {e}",
            data_dir.display()
        );
        std::process::exit(1)
    });

    let spa = ServeDir::new(&web_dir).fallback(ServeFile::new(web_dir.join("index.html")));
    let app = Router::new()
        .route("/api/v1/health", get(health))
        .fallback_service(spa);

    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .unwrap_or_else(|e| {
            eprintln!("cannot listen on {addr}: {e}");
            std::process::exit(1)
        });
    let addr = listener.local_addr().expect("bound address");
    println!("Ditto is running. Open http://{addr}/#token={token}");
    axum::serve(listener, app).await.expect("server error");
}
