//! Ditto's engine: a plain Rust library with no I/O.
//!
//! It compiles natively (for the storage server and the benchmarks) and to
//! `wasm32-unknown-unknown` with SIMD128 (for the browser's Web Workers, through the
//! wasm-bindgen layer in [`bindings`]). Everything that browser and server must agree
//! on — chunk boundaries, fingerprints, byte formats, search — lives here once.

pub mod chunk;
pub mod compress;
pub mod crc32;
pub mod deflate;
pub mod format;
pub mod hash;
pub mod resemble;
pub mod restore;
pub mod search;
pub mod warm_up;

#[cfg(target_arch = "wasm32")]
pub mod bindings;
