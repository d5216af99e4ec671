// Storage-engine benchmark (docs/STORAGE.md): typescript-10 backed up through the real UI
// (headless Chromium, real release server) into two servers, the HiDeStore layout on and off
// (DITTO_LAYOUT=off); on each, the newest and the oldest version restored as a zip (checked
// byte for byte) and the containers holding each counted; then the oldest versions expired
// (keep-last K) and a middle kept version deleted, the bytes freed set against the ideal
// computed here from the manifests and the container chunk tables. Then the same history in
// restic and borg, pruned the same way. Prints tables and, last, one JSON line.
// Usage: node bench/storage.mjs [--package P] [--count N] [--keep K] [--runs N] [--quick]
// --count / --keep: versions backed up / kept by the expiry (default 10 / 5; --quick: 5 / 3,
// so that a middle kept version exists). --runs: rounds (default 3, --quick 1); each round
// runs every part once, in the same order, on fresh data directories and repositories (a slow
// spell of this shared VM then falls on all of them); medians are reported, and the times of
// every round are in the JSON.
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import {
  apiJson,
  backupFolders,
  borgRepo,
  cli,
  dataset,
  du,
  launchBrowser,
  median,
  now,
  resticRepo,
  restoreZip,
  settle,
  startServer,
} from './lib.mjs';
import { launchCdp } from './cdp.mjs';

const { flag, option } = cli();
const quick = flag('quick');
const pkg = option('package', 'typescript');
const count = Number(option('count', quick ? 5 : 10));
const keep = Number(option('keep', quick ? 3 : 5));
const runs = Number(option('runs', quick ? 1 : 3));
if (!(runs >= 1)) throw new Error('--runs must be at least 1');
// A middle kept version is one that is neither the oldest nor the newest kept.
if (!(keep >= 3 && keep < count)) throw new Error('--keep must be at least 3 and below --count');

/** The data size a container is closed at (docs/FORMAT.md): the unit of `containers_min`. */
const CONTAINER_DATA_BYTES = 4 * 1024 * 1024;

const versions = dataset(pkg, count);
const names = versions.map((v) => path.basename(v));
const scratch = mkdtempSync(path.join(tmpdir(), 'ditto-bench-storage-'));
const countFiles = (dir) => readdirSync(dir, { withFileTypes: true, recursive: true }).filter((e) => e.isFile()).length;

/**
 * `method` on `/api/v1<p>` of `server` with its token and `body` as JSON: `{ json, seconds }`,
 * `seconds` being the wall clock from sending the request to the whole answer read.
 */
async function call(server, method, p, body) {
  const t0 = now();
  const res = await fetch(new URL(`/api/v1${p}`, server.origin), {
    method,
    headers: { Authorization: `Bearer ${server.token}`, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  const seconds = now() - t0;
  if (!res.ok) throw new Error(`${method} /api/v1${p}: ${res.status} ${text}`);
  return { json: JSON.parse(text), seconds };
}

/**
 * Bytes of the regular files under a data directory: SQLite's (`*.sqlite3*`: the database, its
 * write-ahead log and shared memory, which grow and shrink with checkpoints, not with the data)
 * apart from everything else (the containers, the lock and token files).
 */
function dirBytes(dir) {
  let data = 0;
  let sqlite = 0;
  for (const e of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (!e.isFile()) continue;
    // A file unlinked since the listing (a container the server just freed) counts as gone.
    const n = statSync(path.join(e.parentPath ?? e.path, e.name), { throwIfNoEntry: false })?.size ?? 0;
    if (e.name.includes('.sqlite3')) sqlite += n;
    else data += n;
  }
  return { data, sqlite };
}

/**
 * What the repository holds, read through the API and nothing else: each live version's
 * distinct chunk fingerprints (its manifest's recipes) and each stored chunk's container and
 * stored length (the container chunk tables). The server's own accounting is not used, so the
 * figures below check it rather than repeat it.
 */
async function holdings(server) {
  const { versions: list } = await apiJson(server, '/repos/default/versions');
  const fps = new Map();
  for (const v of list) {
    const { manifest } = await apiJson(server, `/repos/default/versions/${v.id}`);
    const set = new Set();
    for (const e of manifest.entries) if (e.kind === 'file') for (const fp of e.recipe) set.add(fp);
    fps.set(v.id, set);
  }
  const { containers } = await apiJson(server, '/repos/default/containers');
  const chunks = new Map();
  let duplicates = 0;
  for (const c of containers)
    for (const ch of c.chunks) {
      if (chunks.has(ch.fp)) duplicates++;
      else chunks.set(ch.fp, { container: c.id, kind: c.kind, bid: c.newest_version, storedLen: ch.stored_len });
    }
  if (duplicates) throw new Error(`${duplicates} fingerprints are listed in more than one container`);
  return { list, fps, chunks };
}

/** Stored bytes of `fps` by the kind of container holding them: `{ active, archival, bids }`, `bids` the archival B_IDs. */
function byKind(h, fps) {
  const out = { active: 0, archival: 0, bids: new Set() };
  for (const fp of fps) {
    const c = h.chunks.get(fp);
    out[c.kind] += c.storedLen;
    if (c.kind === 'archival') out.bids.add(c.bid);
  }
  return { ...out, bids: [...out.bids].sort((a, b) => a - b) };
}

/**
 * The containers a restore of version `id` must read: `read` = the distinct containers holding
 * its distinct chunks, `min` = the fewest that could (its chunks' stored bytes over the
 * container size, rounded up); `holders`: the version's stored bytes in each of them, most
 * first, as `kind:bytes`.
 */
function readCost(h, id) {
  const used = new Map();
  let storedBytes = 0;
  for (const fp of h.fps.get(id)) {
    const c = h.chunks.get(fp);
    if (!c) throw new Error(`chunk ${fp} of version ${id} is in no container`);
    const u = used.get(c.container) ?? { kind: c.kind, bytes: 0 };
    u.bytes += c.storedLen;
    used.set(c.container, u);
    storedBytes += c.storedLen;
  }
  const holders = [...used.values()].sort((a, b) => b.bytes - a.bytes).map((u) => `${u.kind}:${u.bytes}`);
  return { read: used.size, min: Math.ceil(storedBytes / CONTAINER_DATA_BYTES), storedBytes, holders };
}

/** The chunks referenced by a version of `removed` and by none of `kept`, and their stored bytes. */
function onlyIn(h, removed, kept) {
  const live = new Set();
  for (const id of kept) for (const fp of h.fps.get(id)) live.add(fp);
  const fps = new Set();
  for (const id of removed) for (const fp of h.fps.get(id)) if (!live.has(fp)) fps.add(fp);
  let bytes = 0;
  for (const fp of fps) bytes += h.chunks.get(fp).storedLen;
  return { fps, bytes };
}

/**
 * After a removal: throws if a chunk of a kept version is no longer stored (or a kept version
 * is damaged, or the live versions are not `kept`); returns the chunks that only removed
 * versions referenced and that are still stored (what the removal left) by container kind.
 */
function checkAfter(h, freed, kept, what) {
  const ids = h.list.map((v) => v.id);
  if (ids.join() !== kept.join()) throw new Error(`${what}: live versions ${ids} instead of ${kept}`);
  for (const v of h.list) if (v.damaged) throw new Error(`${what}: version ${v.id} is damaged`);
  for (const id of kept)
    for (const fp of h.fps.get(id))
      if (!h.chunks.has(fp)) throw new Error(`${what}: chunk ${fp} of kept version ${id} is gone`);
  return byKind(
    h,
    [...freed.fps].filter((fp) => h.chunks.has(fp)),
  );
}

/**
 * One Ditto round on a fresh server, the layout on or off: the backups through the UI, the
 * restores and their container counts, the expiry and the middle delete. Returns flat metrics.
 */
async function ditto(layout) {
  const server = await startServer({ env: layout ? {} : { DITTO_LAYOUT: 'off' } });
  try {
    const cdp = await launchCdp();
    let backups;
    try {
      const page = await cdp.newPage(server.appUrl);
      await page.waitFor('[data-testid=engine-ready]');
      backups = await backupFolders(page, versions, pkg);
    } finally {
      await cdp.close();
    }
    const ids = backups.map((b) => b.version);
    // The delta pass and the mover run in the background after each commit.
    const settled = await settle(server);
    const h0 = await holdings(server);
    // Each version must hold its whole folder (a driver that clicked too early would not).
    for (const [i, id] of ids.entries()) {
      const files = h0.list.find((v) => v.id === id)?.stats.files;
      if (files !== countFiles(versions[i])) throw new Error(`version ${id} has ${files} files, not ${names[i]}'s`);
    }
    const { layout: shape } = await apiJson(server, '/repos/default/stats');
    const m = {
      settle_seconds: settled.seconds,
      active_containers: shape?.active_containers ?? null,
      archival_containers: shape?.archival_containers ?? null,
      dead_bytes_before: shape?.dead_bytes ?? null,
      // The paper's Fig. 12 for every version, oldest first (the tables alone, no restore).
      containers_read_by_version: ids.map((id) => readCost(h0, id).read),
      containers_min_by_version: ids.map((id) => readCost(h0, id).min),
    };

    const browser = await launchBrowser();
    try {
      for (const [label, i] of [
        ['newest', count - 1],
        ['oldest', 0],
      ]) {
        const cost = readCost(h0, ids[i]);
        const r = await restoreZip(browser, server, ids[i], versions[i], scratch);
        // The page plans from the same tables: its count of containers must be ours.
        if (r.containersMin !== cost.read)
          throw new Error(`${label}: the page's plan uses ${r.containersMin} containers, the tables give ${cost.read}`);
        Object.assign(m, {
          [`${label}_containers_read`]: cost.read,
          [`${label}_containers_min`]: cost.min,
          [`${label}_stored_bytes`]: cost.storedBytes,
          [`${label}_restore_mbps`]: r.mbps,
          [`${label}_restore_seconds`]: r.wallSeconds,
          [`${label}_page_container_reads`]: r.containersRead,
          [`${label}_holders`]: cost.holders.join(' '),
        });
      }

      // Expiry: the oldest count - keep versions go.
      const removed = ids.slice(0, count - keep);
      const kept = ids.slice(count - keep);
      const freed = onlyIn(h0, removed, kept);
      const dry = await call(server, 'POST', '/repos/default/forget', { policy: { keep_last: keep }, dry_run: true });
      const b0 = dirBytes(server.dataDir);
      const f = await call(server, 'POST', '/repos/default/forget', { policy: { keep_last: keep } });
      const b1 = dirBytes(server.dataDir);
      const said = f.json.remove.map((v) => v.id).sort((a, b) => a - b);
      if (said.join() !== removed.join()) throw new Error(`forget removed ${said}, not ${removed}`);
      const h1 = await holdings(server);
      const left = checkAfter(h1, freed, kept, 'after forget');
      const shape1 = (await apiJson(server, '/repos/default/stats')).layout;
      Object.assign(m, {
        data_bytes_before: b0.data,
        sqlite_bytes_before: b0.sqlite,
        expire_seconds: f.seconds,
        reclaimed_bytes: b0.data - b1.data,
        sqlite_reclaimed_bytes: b0.sqlite - b1.sqlite,
        api_reclaimed_bytes: f.json.reclaimed_bytes,
        api_freed_bytes: dry.json.freed_bytes,
        ideal_reclaimable_bytes: freed.bytes,
        unswept_bytes: left.active + left.archival,
        unswept_active_bytes: left.active,
        unswept_archival_bids: left.bids.join(' '),
        dead_bytes_after: shape1?.dead_bytes ?? null,
        containers_deleted: f.json.prune?.containers_deleted ?? null,
        containers_icda: f.json.prune?.containers_icda ?? null,
        bytes_rewritten: f.json.prune?.bytes_rewritten ?? null,
      });

      // A middle kept version: neither the oldest nor the newest kept.
      const middle = kept[Math.floor((keep - 1) / 2)];
      const rest = kept.filter((id) => id !== middle);
      const midFreed = onlyIn(h1, [middle], rest);
      const d = await call(server, 'DELETE', `/repos/default/versions/${middle}`);
      const b2 = dirBytes(server.dataDir);
      const h2 = await holdings(server);
      Object.assign(m, {
        middle_version: names[ids.indexOf(middle)],
        middle_delete_seconds: d.seconds,
        middle_reclaimed_bytes: b1.data - b2.data,
        middle_api_reclaimed_bytes: d.json.reclaimed_bytes,
        middle_ideal_reclaimable_bytes: midFreed.bytes,
        middle_unswept_bytes: ((x) => x.active + x.archival)(checkAfter(h2, midFreed, rest, 'after the middle delete')),
        middle_dead_bytes_after: (await apiJson(server, '/repos/default/stats')).layout?.dead_bytes ?? null,
      });

      // The newest version still restores, byte for byte, from what is left.
      const after = readCost(h2, ids[count - 1]);
      const r = await restoreZip(browser, server, ids[count - 1], versions[count - 1], scratch);
      Object.assign(m, {
        after_newest_containers_read: after.read,
        after_newest_containers_min: after.min,
        after_newest_restore_mbps: r.mbps,
      });
    } finally {
      await browser.close();
    }
    return m;
  } finally {
    await server.stop();
    rmSync(server.dataDir, { recursive: true, force: true });
  }
}

/** Wall seconds of `f()`. */
function timed(f) {
  const t0 = now();
  f();
  return now() - t0;
}

/**
 * restic (zstd, as bench:backup) with one snapshot per version, then `forget --keep-last K
 * --prune` and `forget <middle> --prune`. Snapshots of `.` in each folder have different
 * paths, so forget groups by host only (by default it groups by host and paths, and would keep
 * every snapshot as the last of its own group).
 */
function restic() {
  const repo = resticRepo('storage');
  try {
    for (const v of versions) repo.backup(v);
    const snapshots = () =>
      JSON.parse(repo.run(['snapshots', '--json']))
        .map((s) => ({ id: s.id, name: path.basename(s.paths[0]) }))
        .sort((a, b) => names.indexOf(a.name) - names.indexOf(b.name));
    const s0 = du(repo.repo);
    const prune = timed(() => repo.run(['forget', '-q', '--group-by', 'host', '--keep-last', `${keep}`, '--prune']));
    const s1 = du(repo.repo);
    const kept = snapshots();
    if (kept.map((s) => s.name).join() !== names.slice(count - keep).join())
      throw new Error(`restic kept ${kept.map((s) => s.name)}`);
    const middle = kept[Math.floor((keep - 1) / 2)];
    const mid = timed(() => repo.run(['forget', '-q', '--prune', middle.id]));
    const s2 = du(repo.repo);
    if (snapshots().length !== keep - 1) throw new Error('restic did not forget the middle snapshot');
    return {
      restic_bytes_before: s0,
      restic_prune_seconds: prune,
      restic_reclaimed_bytes: s0 - s1,
      restic_middle_seconds: mid,
      restic_middle_reclaimed_bytes: s1 - s2,
    };
  } finally {
    repo.remove();
  }
}

/**
 * borg 1.2 (zstd,3, as bench:backup): `prune --keep-last K` + `compact`, then `delete` +
 * `compact`. borg's keep-last is keep-secondly (the last archive of each of the K newest
 * seconds), and these archives are made less than a second apart: each gets its own minute by
 * `--timestamp` so that the rule keeps K archives, as it does for a user's daily backups.
 */
function borg() {
  const repo = borgRepo('storage');
  try {
    const start = Math.floor(Date.now() / 60_000) * 60_000 - count * 60_000;
    for (const [i, v] of versions.entries()) {
      const stamp = new Date(start + i * 60_000).toISOString().slice(0, 19);
      repo.run(['create', '--compression', 'zstd,3', '--timestamp', stamp, `::${names[i]}`, '.'], { cwd: v });
    }
    const archives = () =>
      repo
        .run(['list', '--short'])
        .split('\n')
        .filter(Boolean)
        .sort((a, b) => names.indexOf(a) - names.indexOf(b));
    const s0 = du(repo.repo);
    const prune = timed(() => {
      repo.run(['prune', '--keep-last', `${keep}`]);
      repo.run(['compact']);
    });
    const s1 = du(repo.repo);
    const kept = archives();
    if (kept.join() !== names.slice(count - keep).join()) throw new Error(`borg kept ${kept}`);
    const middle = kept[Math.floor((keep - 1) / 2)];
    const mid = timed(() => {
      repo.run(['delete', `::${middle}`]);
      repo.run(['compact']);
    });
    const s2 = du(repo.repo);
    if (archives().length !== keep - 1) throw new Error('borg did not delete the middle archive');
    return {
      borg_bytes_before: s0,
      borg_prune_seconds: prune,
      borg_reclaimed_bytes: s0 - s1,
      borg_middle_seconds: mid,
      borg_middle_reclaimed_bytes: s1 - s2,
    };
  } finally {
    repo.remove();
  }
}

try {
  const rounds = [];
  for (let r = 0; r < runs; r++) {
    const on = await ditto(true);
    const off = await ditto(false);
    const round = {
      ...on,
      ...Object.fromEntries(Object.entries(off).map(([k, v]) => [`off_${k}`, v])),
      ...restic(),
      ...borg(),
    };
    rounds.push(round);
    const s = (x) => x.toFixed(2);
    console.log(
      `round ${r + 1}/${runs}: expire ${s(round.expire_seconds)} s (layout off ${s(round.off_expire_seconds)} s),`,
      `restic ${s(round.restic_prune_seconds)} s, borg ${s(round.borg_prune_seconds)} s;`,
      `newest reads ${round.newest_containers_read} containers for ${round.newest_containers_min}`,
      `(layout off ${round.off_newest_containers_read} for ${round.off_newest_containers_min});`,
      `forget reclaimed ${(round.reclaimed_bytes / 1e6).toFixed(2)} MB of ideal ${(round.ideal_reclaimable_bytes / 1e6).toFixed(2)}`,
      round.unswept_bytes
        ? `(left: ${(round.unswept_active_bytes / 1e6).toFixed(2)} MB in active containers, ` +
            `${((round.unswept_bytes - round.unswept_active_bytes) / 1e6).toFixed(2)} MB in archival ones of B_ID ${round.unswept_archival_bids})`
        : '',
      round.dead_bytes_after ? `(${(round.dead_bytes_after / 1e6).toFixed(2)} MB dead slots left)` : '',
    );
  }

  // Each figure is its median over the rounds (element by element for the per-version lists;
  // texts are the first round's).
  const res = {};
  for (const k of Object.keys(rounds[0])) {
    const xs = rounds.map((x) => x[k]);
    if (xs.every((x) => typeof x === 'number')) res[k] = median(xs);
    else if (xs.every(Array.isArray)) res[k] = xs[0].map((_, i) => median(xs.map((x) => x[i])));
    else res[k] = xs[0];
  }
  const anchor = Math.min(res.restic_prune_seconds, res.borg_prune_seconds);
  const ratio = (a, b) => (b > 0 ? +(a / b).toFixed(3) : null);
  const reclaimedVsIdeal = ratio(res.reclaimed_bytes, res.ideal_reclaimable_bytes);
  const expireVsAnchor = ratio(res.expire_seconds, anchor);
  const newestReadVsMin = ratio(res.newest_containers_read, res.newest_containers_min);

  const mb = (n) => (n === null ? '-' : (n / 1e6).toFixed(2));
  const s = (n) => (n === null ? '-' : n.toFixed(3));
  const row = (...cells) => console.log(cells.map((c, i) => `${c}`.padStart(i ? 14 : 30)).join(''));
  console.log(
    `\n${pkg} x${count} (${names[0]} .. ${names.at(-1)}), keep-last ${keep}, middle ${res.middle_version}; ` +
      `medians of ${runs} round(s)\n`,
  );
  row('restore', 'layout on', '', 'layout off', '');
  row('', 'containers', 'MB/s', 'containers', 'MB/s');
  for (const v of ['newest', 'oldest'])
    row(
      `${v} (read / min)`,
      `${res[`${v}_containers_read`]} / ${res[`${v}_containers_min`]}`,
      res[`${v}_restore_mbps`].toFixed(1),
      `${res[`off_${v}_containers_read`]} / ${res[`off_${v}_containers_min`]}`,
      res[`off_${v}_restore_mbps`].toFixed(1),
    );
  row(
    'newest after expiry',
    `${res.after_newest_containers_read} / ${res.after_newest_containers_min}`,
    res.after_newest_restore_mbps.toFixed(1),
    `${res.off_after_newest_containers_read} / ${res.off_after_newest_containers_min}`,
    res.off_after_newest_restore_mbps.toFixed(1),
  );
  console.log('\ncontainers read / min per version (tables only, after the backups)');
  for (const [i, name] of names.entries())
    row(
      name,
      `${res.containers_read_by_version[i]} / ${res.containers_min_by_version[i]}`,
      '',
      `${res.off_containers_read_by_version[i]} / ${res.off_containers_min_by_version[i]}`,
    );
  console.log();
  row('removal', 'seconds', 'reclaimed MB', 'ideal MB', 'API MB', 'dead MB');
  for (const [label, p, q] of [
    [`ditto forget keep-last ${keep}`, '', ''],
    ['  layout off', 'off_', ''],
    ['ditto delete middle', '', 'middle_'],
    ['  layout off', 'off_', 'middle_'],
  ]) {
    const seconds = q ? res[`${p}middle_delete_seconds`] : res[`${p}expire_seconds`];
    row(
      label,
      s(seconds),
      mb(res[`${p}${q}reclaimed_bytes`]),
      mb(res[`${p}${q}ideal_reclaimable_bytes`]),
      mb(res[`${p}${q}api_reclaimed_bytes`]),
      mb(res[`${p}${q}dead_bytes_after`]),
    );
  }
  row(`restic forget --prune`, s(res.restic_prune_seconds), mb(res.restic_reclaimed_bytes), '', '');
  row('restic forget middle', s(res.restic_middle_seconds), mb(res.restic_middle_reclaimed_bytes), '', '');
  row('borg prune + compact', s(res.borg_prune_seconds), mb(res.borg_reclaimed_bytes), '', '');
  row('borg delete middle + compact', s(res.borg_middle_seconds), mb(res.borg_middle_reclaimed_bytes), '', '');
  console.log(
    `\ntargets: reclaimed / ideal ${reclaimedVsIdeal} (>= 0.99), expire / faster of restic and borg ` +
      `${expireVsAnchor} (<= 0.5), newest containers read / min ${newestReadVsMin} (<= 1.1)\n`,
  );
  const round3 = (x) => (typeof x === 'number' && !Number.isInteger(x) ? +x.toFixed(3) : x);
  const runsOf = (k) => rounds.map((x) => round3(x[k]));
  console.log(
    JSON.stringify({
      package: pkg,
      versions: count,
      keep_last: keep,
      runs,
      ...Object.fromEntries(Object.entries(res).map(([k, v]) => [k, round3(v)])),
      reclaimed_vs_ideal: reclaimedVsIdeal,
      expire_vs_anchor: expireVsAnchor,
      newest_read_vs_min: newestReadVsMin,
      expire_seconds_runs: runsOf('expire_seconds'),
      restic_prune_seconds_runs: runsOf('restic_prune_seconds'),
      borg_prune_seconds_runs: runsOf('borg_prune_seconds'),
      reclaimed_bytes_runs: runsOf('reclaimed_bytes'),
      reclaimed_vs_ideal_runs: rounds.map((x) => ratio(x.reclaimed_bytes, x.ideal_reclaimable_bytes)),
      unswept_bytes_runs: runsOf('unswept_bytes'),
    }),
  );
} finally {
  rmSync(scratch, { recursive: true, force: true });
}
