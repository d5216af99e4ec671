/** Messages between the page and a core worker: a small, typed bridge. */

export type WorkerRequest = { type: 'init'; module: WebAssembly.Module } | { type: 'hashFile'; id: number; file: File };

export type WorkerResponse =
  | { type: 'ready' }
  | { type: 'progress'; id: number; bytes: number }
  | { type: 'hashed'; id: number; sha1: string; bytes: number }
  | { type: 'failed'; id: number; message: string };
