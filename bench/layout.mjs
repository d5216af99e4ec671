// npm run bench:layout [-- --quick]: how the HiDeStore mover's thresholds trade bytes
// rewritten against the newest version's locality, and what the location index costs per
// moved chunk (docs/STORAGE.md, "Recipe updating"). typescript-10 is backed up once through
// the UI into a server with the layout off (arrival order); its history is then replayed,
// version by version (the same chunks uploaded as stored, the same manifests committed,
// the mover left to finish after each commit), into fresh servers with each setting.
import { rmSync } from 'node:fs';
import { openApp, launchBrowser, backupFolders, cli, dataset, du, settle, startServer, apiJson } from './lib.mjs';

const quick = cli().flag('quick');
const folders = dataset('typescript', quick ? 4 : 10);
const CONTAINER = 4 << 20;

/** POST `/api/v1<p>` with a body; the parsed JSON. */
async function post(server, p, body, type = 'application/json') {
  const res = await fetch(new URL(`/api/v1${p}`, server.origin), {
    method: 'POST',
    headers: { Authorization: `Bearer ${server.token}`, 'Content-Type': type },
    body,
  });
  if (!res.ok) throw new Error(`POST /api/v1${p}: ${res.status} ${await res.text()}`);
  return res.json();
}

async function postRaw(server, p, body) {
  const res = await fetch(new URL(`/api/v1${p}`, server.origin), {
    method: 'POST',
    headers: { Authorization: `Bearer ${server.token}`, 'Content-Type': 'application/json' },
    body: JSON.stringify(body),
  });
  if (!res.ok) throw new Error(`POST /api/v1${p}: ${res.status} ${await res.text()}`);
  return new Uint8Array(await res.arrayBuffer());
}

/** The entries of a bundle (FORMAT.md): fingerprint, codec, raw length, payload. */
function* bundleEntries(b) {
  const v = new DataView(b.buffer, b.byteOffset, b.byteLength);
  const n = v.getUint32(8, true);
  let off = 16;
  for (let i = 0; i < n; i++) {
    const raw = v.getUint32(off + 24, true);
    const stored = v.getUint32(off + 28, true);
    yield { head: b.subarray(off, off + 32), payload: b.subarray(off + 32, off + 32 + stored), raw };
    off += 32 + stored;
  }
}

function bundle(entries) {
  const size = 16 + entries.reduce((n, e) => n + 32 + e.payload.length, 0);
  const out = new Uint8Array(size);
  out.set([0x44, 0x54, 0x42, 0x31, 1, 0, 0, 0]);
  new DataView(out.buffer).setUint32(8, entries.length, true);
  let off = 16;
  for (const e of entries) {
    out.set(e.head, off);
    out.set(e.payload, off + 32);
    off += 32 + e.payload.length;
  }
  return out;
}

/** Per version: the containers holding its distinct chunks, and the fewest that could. */
async function locality(server, versionId) {
  const { manifest } = await apiJson(server, `/repos/default/versions/${versionId}`);
  const { containers } = await apiJson(server, '/repos/default/containers');
  const where = new Map();
  for (const c of containers) for (const ch of c.chunks) where.set(ch.fp, [c.id, ch.stored_len]);
  const fps = new Set(manifest.entries.flatMap((e) => e.recipe));
  const read = new Set();
  let bytes = 0;
  for (const fp of fps) {
    const [id, len] = where.get(fp);
    read.add(id);
    bytes += len;
  }
  return { read: read.size, min: Math.ceil(bytes / CONTAINER) };
}

// 1. The history, through the UI, in arrival order.
const source = await startServer({ env: { DITTO_LAYOUT: 'off' } });
const browser = await launchBrowser();
try {
  const page = await openApp(browser, source);
  await backupFolders(page, folders, 'typescript');
} finally {
  await browser.close();
}
const { versions } = await apiJson(source, '/repos/default/versions');

// 2. Replays into fresh servers with each setting.
const settings = [
  { name: 'layout off', env: { DITTO_LAYOUT: 'off' } },
  ...[
    [0, 0.5],
    [0, 0.8],
    [0, 0.95],
    [0.25, 0.8],
  ].map(([move, compact]) => ({
    name: `move>=${move} compact<${compact}`,
    env: { DITTO_MOVE_THRESHOLD: String(move), DITTO_COMPACT_THRESHOLD: String(compact) },
  })),
];
const rows = [];
for (const s of settings) {
  const target = await startServer({ env: s.env });
  const sent = new Set();
  let uploaded = 0;
  const t0 = performance.now();
  for (const v of versions) {
    const { manifest } = await apiJson(source, `/repos/default/versions/${v.id}`);
    const want = [...new Set(manifest.entries.flatMap((e) => e.recipe))].filter((fp) => !sent.has(fp));
    for (let i = 0; i < want.length; i += 2000) {
      const part = want.slice(i, i + 2000);
      const got = [...bundleEntries(await postRaw(source, '/repos/default/chunks/get', { fingerprints: part }))];
      for (let j = 0; j < got.length;) {
        let n = 0;
        const batch = [];
        while (j < got.length && n + got[j].payload.length < 12 << 20) {
          n += got[j].payload.length + 32;
          batch.push(got[j++]);
        }
        await post(target, '/repos/default/bundles', bundle(batch), 'application/x-ditto-bundle');
        uploaded += n;
      }
      part.forEach((fp) => sent.add(fp));
    }
    await post(target, '/repos/default/versions', JSON.stringify(manifest));
    // The delta pass and the mover run after the commit: wait for the pass, then a dry-run
    // prune runs the mover to the end.
    await settle(target);
  }
  const seconds = (performance.now() - t0) / 1000;
  const stats = await apiJson(target, '/repos/default/stats');
  const { versions: tv } = await apiJson(target, '/repos/default/versions');
  const newest = await locality(target, tv.at(-1).id);
  const oldest = await locality(target, tv[0].id);
  const m = stats.layout.mover;
  rows.push({
    setting: s.name,
    replay_seconds: +seconds.toFixed(1),
    uploaded_bytes: uploaded,
    rewritten_bytes: m.bytes_rewritten,
    write_amplification: +((uploaded + m.bytes_rewritten) / uploaded).toFixed(2),
    chunks_moved: m.chunks_moved,
    longest_switch_ms: +m.longest_switch_ms.toFixed(1),
    switch_us_per_chunk: m.chunks_moved ? +((m.switch_ms * 1000) / m.chunks_moved).toFixed(1) : 0,
    dead_bytes: stats.layout.dead_bytes,
    active_containers: stats.layout.active_containers,
    archival_containers: stats.layout.archival_containers,
    data_dir_bytes: du(target.dataDir),
    newest_containers_read: newest.read,
    newest_containers_min: newest.min,
    oldest_containers_read: oldest.read,
    oldest_containers_min: oldest.min,
  });
  console.log(JSON.stringify(rows.at(-1)));
  await target.stop();
  rmSync(target.dataDir, { recursive: true, force: true });
}
await source.stop();
rmSync(source.dataDir, { recursive: true, force: true });
console.table(rows);
console.log(JSON.stringify({ versions: versions.length, rows }));
