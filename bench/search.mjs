// Search benchmark: typescript-10 backed up through the real UI (headless Chromium, real
// release server; its delta pass and mover then settled, so deltas are searched), then for 1, 8 and 128 keywords: DedupSearch in the page (Search tab) cold
// (the first search after a page load) and warm (a second search in that page with other
// keywords of the same count, served by the page's and the workers' caches, started
// --pause-ms after the first one's results, 500 by default: a person reads them before
// typing the next query, and the workers summarise what they cached meanwhile), DedupSearch run
// by the server (`POST search`, chosen in the page; its cache warmed up after the backups, the
// first of the run reported apart), `auto` (the tab's default) in another fresh page: its first
// search, which the server answers while the page caches the repository behind it, and a second
// one with set B once the page has (in the page), the naive search in the page, and
// ripgrep over the 10 release folders on disk, as in the DedupSearch paper's Fig. 7 (phase
// times, record counts). Rounds are interleaved (every count in every round) and medians
// reported, since the machine is shared.
//
// Keywords (deterministic, from the data): every identifier-like word /[A-Za-z_][A-Za-z0-9_]{5,20}/
// (whole tokens of [A-Za-z0-9_]) counted over the files of the newest release; the candidates
// are the words seen 10..2000 times, sorted by (count, word); a set of N keywords is N words
// evenly spaced over that list, so a set mixes rare and common words (the paper used words of
// varied frequency). The 1-keyword set is the median candidate. The warm search's set B takes
// the picks a quarter of a step earlier, so it shares no keyword with set A.
//
// Then, in the same round, the first search after a reload, of set A again, in a browser
// profile kept on disk (a person's browser; the pages above have none): a first search fills
// the workers' device caches (origin private file system), then the page is reloaded and
// searches, clicked as soon as the tab opens (in the page, then again with `auto`, which asks
// the server while the workers still read their files), and reloaded again and searches after
// --type-ms (1000 by default: a person typing the keywords). The caches are cleared after.
//
// Then, in the same round, the tab's read-ahead (on by default; off in every page above, whose
// first searches read the chunks themselves): a fresh page opens the Search tab, the keywords are
// typed for --type-ms, and the search (`auto`) is clicked: the time from the tab's click to the
// read-ahead's end, and the search, which runs in the page from memory when the read-ahead
// has ended (else on the server, the page reading the rest behind it).
//
// After the rounds, the same engine natively with nothing decoded anywhere: the server's search
// (`POST search`, every version) on a copy of the repository with its search cache off
// (DITTO_SEARCH_CACHE_MB=0), --runs times per set A after one untimed search, timed to the
// answer's last byte (`server, uncached`): the reference for a page's first search in a fresh
// profile, which does the same reading, decoding, checking and scanning in its workers.
//
// Last, a search right after a backup: a page searches set A (8 keywords), one more version
// (the newest release with a line added to every 50th file) is backed up from another page
// and the repository settles, then the first page searches set B: what that search fetched
// and how long it took (the workers keep what they decoded across a change of the
// repository).
//
// Prints a table per keyword count and, last, one JSON line.
// Usage: node bench/search.mjs [--package P] [--count N] [--quick] [--runs N] [--naive-runs N] [--pause-ms MS] [--type-ms MS]
// (--runs: DedupSearch and ripgrep runs per set, default 3, medians reported; --naive-runs:
// default 1; --quick: 3 releases)
import { execFileSync, spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import {
  backupFolders,
  cli,
  dataset,
  launchBrowser,
  launchProfile,
  noReadAhead,
  now,
  openApp,
  settle,
  startServer,
} from './lib.mjs';

const { flag, option } = cli();
const quick = flag('quick');
const pkg = option('package', 'typescript');
const count = Number(option('count', quick ? 3 : 10));
const runs = Number(option('runs', 3));
const pauseMs = Number(option('pause-ms', 500));
const typeMs = Number(option('type-ms', 1000));
const naiveRuns = Number(option('naive-runs', 1));
const SIZES = [1, 8, 128];
if (!(runs >= 1) || !(naiveRuns >= 1)) throw new Error('--runs and --naive-runs must be at least 1');

const versions = dataset(pkg, count);
const scratch = mkdtempSync(path.join(tmpdir(), 'ditto-bench-search-'));

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

/** Every regular file under `dir` (absolute paths). */
function walk(dir) {
  const out = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) out.push(...walk(p));
    else if (e.isFile()) out.push(p);
  }
  return out;
}

/** The keyword sets (see the header): `{ [n]: string[] }`. */
function chooseKeywords(dir) {
  const counts = new Map();
  for (const f of walk(dir)) {
    const text = readFileSync(f, 'latin1');
    for (const m of text.matchAll(/[A-Za-z0-9_]+/g)) {
      const w = m[0];
      if (!/^[A-Za-z_][A-Za-z0-9_]{5,20}$/.test(w)) continue;
      counts.set(w, (counts.get(w) ?? 0) + 1);
    }
  }
  const cand = [...counts]
    .filter(([, c]) => c >= 10 && c <= 2000)
    .sort((a, b) => a[1] - b[1] || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  const max = Math.max(...SIZES);
  if (cand.length < max) throw new Error(`only ${cand.length} candidate keywords in ${dir}`);
  const sets = {};
  const other = {};
  const pick = (n, at) => Array.from({ length: n }, (_, i) => cand[Math.floor(((i + at) * cand.length) / n)][0]);
  for (const n of SIZES) {
    sets[n] = pick(n, 0.5);
    other[n] = pick(n, 0.25);
    if (other[n].some((w) => sets[n].includes(w))) throw new Error(`keyword sets A and B overlap at ${n}`);
  }
  return { sets, other, candidates: cand.length };
}

/** ripgrep over the release folders: median ms over `runs` (after one warm-up) and files with a hit. */
function ripgrep(keywords) {
  const pat = path.join(scratch, `kw-${keywords.length}.txt`);
  writeFileSync(pat, keywords.join('\n') + '\n');
  const args = ['-F', '-a', '--no-ignore', '--hidden', '--no-config', '-c', '-f', pat, ...versions];
  const once = () => {
    const t0 = now();
    const r = spawnSync('rg', args, { encoding: 'utf8', maxBuffer: 1 << 28 });
    const ms = (now() - t0) * 1000;
    if (r.status !== 0 && r.status !== 1) throw new Error(`rg exited ${r.status}: ${r.stderr}`);
    const lines = r.stdout.split('\n').filter(Boolean);
    return { ms, files: lines.length, lines: lines.reduce((a, l) => a + Number(l.slice(l.lastIndexOf(':') + 1)), 0) };
  };
  once(); // warm the page cache
  const all = [];
  for (let i = 0; i < runs; i++) all.push(once());
  return { ms: median(all.map((r) => r.ms)), all: all.map((r) => r.ms), files: all[0].files, lines: all[0].lines };
}

/** One search run in the page; waits for exactly this run's result (`seq`). */
async function pageRun(page, engine, seq, where = 'page') {
  const errors = page.getByTestId('search-error');
  await page.getByTestId('search-where').selectOption(where);
  await page.getByTestId(engine === 'dedup' ? 'search-start' : 'search-naive').click();
  const done = page.locator(`[data-testid=search-done][data-engine=${engine}][data-seq="${seq}"]`);
  // One wait for either, so that nothing is left polling the page once this run is over.
  await done.or(errors).first().waitFor({ timeout: 1_800_000 });
  if ((await done.count()) === 0) throw new Error(`${engine} search failed: ${await errors.innerText()}`);
  const a = (n) => done.getAttribute(n);
  const records = await a('data-records');
  return {
    totalMs: Number(await a('data-total-ms')),
    phases: JSON.parse(await a('data-phase-ms')),
    matches: Number(await a('data-matches')),
    files: Number(await a('data-files')),
    filesSearched: Number(await a('data-files-searched')),
    storedBytesRead: Number(await a('data-stored-bytes-read')),
    rangesRead: Number(await a('data-ranges-read')),
    basesFetched: Number((await a('data-bases-fetched')) ?? 0),
    basesBytes: Number((await a('data-bases-bytes')) ?? 0),
    baseJobs: Number((await a('data-base-jobs')) ?? 0),
    baseRequests: Number((await a('data-base-requests')) ?? 0),
    chunks: Number((await a('data-chunks')) ?? 0),
    ruledOut: Number((await a('data-ruled-out')) ?? 0),
    bytesScanned: Number((await a('data-bytes-scanned')) ?? 0),
    ruledOutBytes: Number((await a('data-ruled-out-bytes')) ?? 0),
    where: await a('data-where'),
    records: records ? JSON.parse(records) : null,
  };
}

/** The hits the page lists, as one comparable string (version, path, hits per file). */
async function listedHits(page) {
  return JSON.stringify(
    await page
      .getByTestId('search-file')
      .evaluateAll((rows) => rows.map((r) => [r.dataset.version, r.dataset.path, r.dataset.hits])),
  );
}

async function inPage(sets, other) {
  let server = await startServer();
  const browser = await launchBrowser();
  const profileDir = mkdtempSync(path.join(tmpdir(), 'ditto-bench-profile-'));
  const profile = await launchProfile(profileDir);
  try {
    const backupPage = await openApp(browser, server);
    const t0 = now();
    const backups = await backupFolders(backupPage, versions, pkg);
    console.error(`backed up ${backups.length} versions in ${(now() - t0).toFixed(1)} s`);
    // Search the repository at rest: the delta pass's deltas and the mover's layout in place.
    await settle(server);
    await backupPage.close();
    const out = Object.fromEntries(
      SIZES.map((n) => [
        n,
        {
          cold: [],
          warm: [],
          server: [],
          naive: [],
          reload: [],
          reloadAtOnce: [],
          reloadAtOnceAuto: [],
          coldAuto: [],
          warmAuto: [],
          readAhead: [],
        },
      ]),
    );
    let serverFirst = null;
    for (let round = 0; round < runs; round++) {
      for (const n of SIZES) {
        // A fresh page: nothing cached, workers started by the first search.
        const page = await openApp(browser, server, { readAhead: false });
        const pageErrors = [];
        page.on('pageerror', (e) => pageErrors.push(e.message));
        await page.getByTestId('tab-search').click();
        let seq = 0;
        const o = out[n];
        await page.getByTestId('search-keywords').fill(sets[n].join('\n'));
        o.cold.push(await pageRun(page, 'dedup', ++seq));
        const coldHits = await listedHits(page);
        await page.waitForTimeout(pauseMs);
        await page.getByTestId('search-keywords').fill(other[n].join('\n'));
        const warm = await pageRun(page, 'dedup', ++seq);
        o.warm.push(warm);
        const warmHits = await listedHits(page);
        // The server's engine on the same query: the same hits.
        const onServer = await pageRun(page, 'dedup', ++seq, 'server');
        o.server.push(onServer);
        // The server warms its search cache after each backup (docs/SEARCH.md), so its first
        // search of the run scans from memory as the later ones do; reported apart still.
        serverFirst ??= { keywords: n, ms: onServer.totalMs, phases: onServer.phases };
        if ((await listedHits(page)) !== warmHits || onServer.matches !== warm.matches)
          throw new Error(`${n} keywords: the server's search and the page's differ`);
        if (round < naiveRuns) {
          o.naive.push(await pageRun(page, 'naive', ++seq));
          const cmp = page.getByTestId('search-compare');
          await cmp.waitFor({ timeout: 60_000 });
          o.identical = (o.identical ?? true) && (await cmp.getAttribute('data-identical')) === 'true';
        }
        if (pageErrors.length) throw new Error(`errors on the page: ${pageErrors.join('; ')}`);
        await page.close();
        const auto = await autoRun(browser, server, sets[n], other[n], coldHits, warmHits);
        o.coldAuto.push(auto.cold);
        o.warmAuto.push(auto.warm);
        const reload = await afterReload(profile, server, sets[n], coldHits);
        o.reload.push(reload.typed);
        o.reloadAtOnce.push(reload.atOnce);
        o.reloadAtOnceAuto.push(reload.atOnceAuto);
        const ahead = await readAheadRun(browser, server, sets[n], coldHits);
        o.readAhead.push(ahead);
        console.error(
          `round ${round + 1}, ${n} keywords: cold ${o.cold.at(-1).totalMs.toFixed(0)} ms, warm ${warm.totalMs.toFixed(0)} ms ` +
            `(${warm.rangesRead} ranges fetched), server ${onServer.totalMs.toFixed(0)} ms` +
            (round < naiveRuns ? `, naive ${o.naive.at(-1).totalMs.toFixed(0)} ms, identical=${o.identical}` : '') +
            `, auto ${auto.cold.totalMs.toFixed(0)} ms first (${auto.cold.where}) then ${auto.warm.totalMs.toFixed(0)} ms (${auto.warm.where})` +
            `, after a reload ${reload.atOnce.totalMs.toFixed(0)} ms at once, ${reload.atOnceAuto.totalMs.toFixed(0)} ms at once with auto (${reload.atOnceAuto.where}), ${reload.typed.totalMs.toFixed(0)} ms typed ` +
            `(${reload.atOnce.storedBytesRead + reload.typed.storedBytesRead} stored bytes fetched)` +
            `, read ahead in ${ahead.aheadMs === null ? '(not done)' : `${ahead.aheadMs.toFixed(0)} ms`} then ${ahead.totalMs.toFixed(0)} ms (${ahead.where})`,
        );
      }
    }
    // The same engine natively with nothing decoded anywhere: a copy of this repository
    // served with the server's search cache off.
    const dataDir = server.dataDir;
    await server.stop();
    const uncached = await serverUncached(dataDir, sets);
    server = await startServer({ dataDir });
    return {
      out,
      serverFirst,
      uncached,
      afterBackup: await searchAfterBackup(browser, server, sets[8], other[8]),
    };
  } finally {
    await profile.close();
    rmSync(profileDir, { recursive: true, force: true });
    await browser.close();
    await server.stop();
    rmSync(server.dataDir, { recursive: true, force: true });
  }
}

/**
 * The server's DedupSearch (`POST search`, every version) on a copy of `dataDir` with its
 * search cache off (`DITTO_SEARCH_CACHE_MB=0`): each search reads, decodes, checks and scans
 * the stored chunks natively on the server's threads, as a page's first search in a fresh
 * profile does in its workers. Per keyword count: one search first (the containers into the
 * OS page cache, as ripgrep's folders are), then `runs` timed to the answer's last byte.
 */
async function serverUncached(dataDir, sets) {
  const copy = mkdtempSync(path.join(tmpdir(), 'ditto-bench-uncached-'));
  cpSync(dataDir, copy, { recursive: true });
  const server = await startServer({ dataDir: copy, env: { DITTO_SEARCH_CACHE_MB: '0' } });
  try {
    const out = {};
    for (const n of SIZES) {
      const once = async () => {
        const t0 = now();
        const res = await fetch(new URL('/api/v1/repos/default/search', server.origin), {
          method: 'POST',
          headers: { Authorization: `Bearer ${server.token}`, 'Content-Type': 'application/json' },
          body: JSON.stringify({ keywords: sets[n] }),
        });
        const body = await res.text();
        const totalMs = (now() - t0) * 1000;
        if (!res.ok) throw new Error(`POST search: ${res.status} ${body}`);
        const j = JSON.parse(body);
        return { totalMs, phases: j.phase_ms, files: j.files.length, read: j.stored_bytes_read, matches: j.matches };
      };
      await once();
      const all = [];
      for (let i = 0; i < runs; i++) all.push(await once());
      out[n] = all;
    }
    return out;
  } finally {
    await server.stop();
    rmSync(copy, { recursive: true, force: true });
  }
}

/**
 * `auto`, the Search tab's default, in a fresh page (see the header): the first search (set
 * A), which the server answers while the page caches the repository behind it, then, once the
 * page has, set B after --pause-ms, in the page. Each is checked against the page's hits.
 */
async function autoRun(browser, server, keywords, warmKeywords, coldHits, warmHits) {
  const page = await openApp(browser, server, { readAhead: false });
  const pageErrors = [];
  page.on('pageerror', (e) => pageErrors.push(e.message));
  await page.getByTestId('tab-search').click();
  await page.getByTestId('search-keywords').fill(keywords.join('\n'));
  const cold = await pageRun(page, 'dedup', 1, 'auto');
  if ((await listedHits(page)) !== coldHits) throw new Error("auto: the first search differs from the page's");
  const t0 = now();
  await page.locator('[data-testid=search-done][data-seq="1"][data-filled=true]').waitFor({ timeout: 600_000 });
  cold.fillSeconds = now() - t0;
  await page.waitForTimeout(pauseMs);
  await page.getByTestId('search-keywords').fill(warmKeywords.join('\n'));
  const warm = await pageRun(page, 'dedup', 2, 'auto');
  if ((await listedHits(page)) !== warmHits) throw new Error("auto: the second search differs from the page's");
  if (pageErrors.length) throw new Error(`errors on the page: ${pageErrors.join('; ')}`);
  await page.close();
  return { cold, warm };
}

/**
 * The first search after a reload (see the header), in the persistent browser `profile`:
 * `{ atOnce, typed }` page runs, each checked against the cold search's hits.
 */
async function afterReload(profile, server, keywords, coldHits) {
  const page = await profile.newPage();
  await noReadAhead(page);
  const pageErrors = [];
  page.on('pageerror', (e) => pageErrors.push(e.message));
  const settled = page.locator('[data-testid=search-device-cache][data-settled="1"]');
  const open = async (first) => {
    if (first) await page.goto(server.appUrl);
    else await page.reload();
    await page.getByTestId('engine-ready').waitFor({ timeout: 60_000 });
    await page.getByTestId('tab-search').click();
    await page.getByTestId('search-keywords').fill(keywords.join('\n'));
  };
  await open(true);
  await pageRun(page, 'dedup', 1);
  await settled.waitFor({ timeout: 60_000 });
  const out = {};
  for (const [name, pause, where] of [
    ['atOnce', 0, 'page'],
    ['atOnceAuto', 0, 'auto'],
    ['typed', typeMs, 'page'],
  ]) {
    await open(false);
    if (pause) await page.waitForTimeout(pause);
    out[name] = await pageRun(page, 'dedup', 1, where);
    if ((await listedHits(page)) !== coldHits)
      throw new Error(`${keywords.length} keywords: the search after a reload (${name}) and the cold one differ`);
    // The server's answer: the page searches behind it, from its files (which it then holds).
    if (out[name].where === 'server')
      await page.locator('[data-testid=search-done][data-seq="1"][data-filled=true]').waitFor({ timeout: 600_000 });
    else await settled.waitFor({ timeout: 60_000 });
  }
  await page.getByTestId('search-device-clear').click();
  await page.locator('[data-testid=search-device-cache][data-bytes="0"]').waitFor({ timeout: 60_000 });
  if (pageErrors.length) throw new Error(`errors on the page: ${pageErrors.join('; ')}`);
  await page.close();
  return out;
}

/**
 * The read-ahead (see the header) in a fresh page: `aheadMs` from the tab's click to the
 * read-ahead's end (null when not ended by the click), and the search's page run, checked
 * against the cold search's hits.
 */
async function readAheadRun(browser, server, keywords, coldHits) {
  const page = await openApp(browser, server);
  const pageErrors = [];
  page.on('pageerror', (e) => pageErrors.push(e.message));
  const t0 = now();
  await page.getByTestId('tab-search').click();
  await page.getByTestId('search-keywords').fill(keywords.join('\n'));
  const ended = page.locator('[data-testid=search-read-ahead][data-state=done]');
  const aheadMs = await ended.waitFor({ timeout: typeMs }).then(
    () => (now() - t0) * 1000,
    () => null,
  );
  await page.waitForTimeout(Math.max(0, typeMs - (now() - t0) * 1000));
  const run = await pageRun(page, 'dedup', 1, 'auto');
  if ((await listedHits(page)) !== coldHits)
    throw new Error(`${keywords.length} keywords: the search after the read-ahead and the cold one differ`);
  run.aheadBytes = Number(await page.getByTestId('search-read-ahead').getAttribute('data-stored-bytes'));
  if (pageErrors.length) throw new Error(`errors on the page: ${pageErrors.join('; ')}`);
  await page.close();
  return { ...run, aheadMs };
}

/** The last measurement of the header: a search before and after one more backup, in one page. */
async function searchAfterBackup(browser, server, first, second) {
  const page = await openApp(browser, server, { readAhead: false });
  await page.getByTestId('tab-search').click();
  await page.getByTestId('search-keywords').fill(first.join('\n'));
  const before = await pageRun(page, 'dedup', 1);
  const newest = versions[versions.length - 1];
  const copy = path.join(scratch, `${path.basename(newest)}-edited`);
  cpSync(newest, copy, { recursive: true });
  const files = walk(copy).sort();
  let edited = 0;
  for (let i = 0; i < files.length; i += 50, edited++) {
    const b = readFileSync(files[i]);
    const mid = b.length >> 1;
    writeFileSync(files[i], Buffer.concat([b.subarray(0, mid), Buffer.from('\n// edited\n'), b.subarray(mid)]));
  }
  const backupPage = await openApp(browser, server);
  await backupFolders(backupPage, [copy], pkg);
  await backupPage.close();
  await settle(server);
  await page.waitForTimeout(pauseMs);
  await page.getByTestId('search-keywords').fill(second.join('\n'));
  const after = await pageRun(page, 'dedup', 2);
  await page.close();
  return { before, after, edited };
}

/** The run whose total is the median (lower median for even counts), to report its phases and records. */
const medianRun = (rs) => [...rs].sort((a, b) => a.totalMs - b.totalMs)[Math.floor((rs.length - 1) / 2)];

try {
  const { sets, other, candidates } = chooseKeywords(versions[versions.length - 1]);
  console.error(`${candidates} candidate keywords; 1-keyword sets: ${sets[1][0]} (cold), ${other[1][0]} (warm)`);
  const { out: page, serverFirst, uncached, afterBackup } = await inPage(sets, other);
  // ripgrep after the page's runs (it needs the page cache warm, the page does not care).
  const rg = {};
  const rgOther = {};
  for (const n of SIZES) {
    rg[n] = ripgrep(sets[n]);
    rgOther[n] = ripgrep(other[n]);
  }

  const f0 = (x) => x.toFixed(0);
  const problems = [];
  const per = {};
  console.log(
    `\n${pkg}-${versions.length} (${versions.map((v) => path.basename(v)).join(', ')}), median of ${runs} rounds (cold, warm, server, ripgrep), ${naiveRuns} naive\n`,
  );
  const phases = (r) =>
    Object.entries(r.phases)
      .map(([k, v]) => `${k} ${f0(v)}`)
      .join(', ');
  for (const n of SIZES) {
    const p = page[n];
    const cold = medianRun(p.cold);
    const coldMs = median(p.cold.map((r) => r.totalMs));
    const warm = medianRun(p.warm);
    const warmMs = median(p.warm.map((r) => r.totalMs));
    const srv = medianRun(p.server);
    const srvMs = median(p.server.map((r) => r.totalMs));
    const rl = medianRun(p.reload);
    const rlMs = median(p.reload.map((r) => r.totalMs));
    const rl0 = medianRun(p.reloadAtOnce);
    const rl0Ms = median(p.reloadAtOnce.map((r) => r.totalMs));
    const rla = medianRun(p.reloadAtOnceAuto);
    const rlaMs = median(p.reloadAtOnceAuto.map((r) => r.totalMs));
    const ca = medianRun(p.coldAuto);
    const caMs = median(p.coldAuto.map((r) => r.totalMs));
    const wa = medianRun(p.warmAuto);
    const waMs = median(p.warmAuto.map((r) => r.totalMs));
    const ra = medianRun(p.readAhead);
    const raMs = median(p.readAhead.map((r) => r.totalMs));
    const raDone = p.readAhead.map((r) => r.aheadMs);
    const un = uncached[n];
    const unRun = medianRun(un);
    const unMs = median(un.map((x) => x.totalMs));
    const nv = medianRun(p.naive);
    const nMs = median(p.naive.map((r) => r.totalMs));
    const r = rg[n];
    const r2 = rgOther[n];
    const rec = cold.records ?? {};
    if (!p.identical)
      problems.push(`${n} keywords: DedupSearch and naive results differ (search-compare data-identical=false)`);
    if (r.files !== cold.files)
      problems.push(`${n} keywords: ripgrep finds ${r.files} files with a hit, the page ${cold.files}`);
    if (r2.files !== warm.files)
      problems.push(`${n} keywords (set B): ripgrep finds ${r2.files} files with a hit, the page ${warm.files}`);
    if (un.some((u) => u.files !== cold.files || u.matches !== cold.matches))
      problems.push(`${n} keywords: the server's search with nothing cached and the page's cold search differ`);
    if (p.warm.some((w) => w.rangesRead !== 0)) problems.push(`${n} keywords: a warm search fetched container ranges`);
    if (p.coldAuto.some((w) => w.where !== 'server'))
      problems.push(`${n} keywords: auto's first search in a fresh page did not go to the server`);
    if (p.warmAuto.some((w) => w.where !== 'page' || w.storedBytesRead !== 0))
      problems.push(`${n} keywords: auto's second search did not run in the page from its caches`);
    console.log(`${n} keyword${n > 1 ? 's' : ''}${n === 1 ? ` (cold ${sets[1][0]}, warm ${other[1][0]})` : ''}`);
    console.log(
      `  DedupSearch cold ${f0(coldMs).padStart(6)} ms  (${phases(cold)}; runs ${p.cold.map((x) => f0(x.totalMs)).join(' ')})`,
    );
    console.log(
      `  DedupSearch warm ${f0(warmMs).padStart(6)} ms  (${phases(warm)}; runs ${p.warm.map((x) => f0(x.totalMs)).join(' ')}; ranges fetched ${warm.rangesRead}; ${warm.ruledOut} of ${warm.chunks} chunks ruled out by their trigrams, ${(warm.bytesScanned - warm.ruledOutBytes) / 1e6} MB left to the exact-match pass)`,
    );
    console.log(
      `  after a reload   ${f0(rlMs).padStart(6)} ms  (typed for ${typeMs} ms; ${phases(rl)}; runs ${p.reload.map((x) => f0(x.totalMs)).join(' ')}; stored bytes fetched ${rl.storedBytesRead}; ${rl.ruledOut} of ${rl.chunks} chunks ruled out)`,
    );
    console.log(
      `    ... at once    ${f0(rl0Ms).padStart(6)} ms  (clicked as the tab opened; ${phases(rl0)}; runs ${p.reloadAtOnce.map((x) => f0(x.totalMs)).join(' ')}; stored bytes fetched ${rl0.storedBytesRead})`,
    );
    console.log(
      `    ... with auto  ${f0(rlaMs).padStart(6)} ms  (clicked as the tab opened, auto: on the ${p.reloadAtOnceAuto.map((x) => x.where).join('/')}; ${phases(rla)}; runs ${p.reloadAtOnceAuto.map((x) => f0(x.totalMs)).join(' ')})`,
    );
    console.log(
      `  auto, first      ${f0(caMs).padStart(6)} ms  (a fresh page: on the ${ca.where}; ${phases(ca)}; runs ${p.coldAuto.map((x) => f0(x.totalMs)).join(' ')}; the page cached the repository behind it in ${p.coldAuto.map((x) => x.fillSeconds.toFixed(2)).join(' ')} s)`,
    );
    console.log(
      `  auto, second     ${f0(waMs).padStart(6)} ms  (in the ${wa.where}, set B; runs ${p.warmAuto.map((x) => f0(x.totalMs)).join(' ')}; stored bytes fetched ${wa.storedBytesRead})`,
    );
    console.log(
      `  read ahead       ${f0(raMs).padStart(6)} ms  (a fresh page, typed for ${typeMs} ms, auto: in the ${p.readAhead.map((x) => x.where).join('/')}; ${phases(ra)}; runs ${p.readAhead.map((x) => f0(x.totalMs)).join(' ')}; read ahead in ${raDone.map((x) => (x === null ? 'not done' : `${f0(x)} ms`)).join(' ')} of the tab's opening, ${ra.aheadBytes} stored bytes; the search fetched ${ra.storedBytesRead})`,
    );
    console.log(
      `  on the server    ${f0(srvMs).padStart(6)} ms  (server: ${phases(srv)}; runs ${p.server.map((x) => f0(x.totalMs)).join(' ')})`,
    );
    console.log(
      `  server, uncached ${f0(unMs).padStart(6)} ms  (nothing cached, DITTO_SEARCH_CACHE_MB=0: ${phases(unRun)}; runs ${un.map((x) => f0(x.totalMs)).join(' ')}; stored bytes read ${unRun.read})`,
    );
    console.log(
      `  naive            ${f0(nMs).padStart(6)} ms  (${phases(nv)}; runs ${p.naive.map((x) => f0(x.totalMs)).join(' ')})`,
    );
    console.log(
      `  ripgrep          ${f0(r.ms).padStart(6)} ms set A, ${f0(r2.ms)} ms set B (runs ${r.all.map(f0).join(' ')} / ${r2.all.map(f0).join(' ')})`,
    );
    console.log(
      `  matches ${cold.matches} (set B ${warm.matches}), files with a hit: page ${cold.files}, rg ${r.files}; files searched ${cold.filesSearched}; stored bytes read: cold ${cold.storedBytesRead} (delta bases ${cold.basesBytes}: ${cold.basesFetched} fetched in ${cold.baseRequests} requests for ${cold.baseJobs} jobs), warm ${warm.storedBytesRead}, naive ${nv.storedBytesRead}`,
    );
    console.log(
      `  records: chunk-results ${rec.chunk_results} (${rec.chunk_result_bytes} B), location-lists ${rec.location_lists} (long ${rec.long_location_lists}, ${rec.location_list_bytes} B), tiny ${rec.tiny} (${rec.tiny_bytes} B, looked up ${rec.tiny_lookups}), infix lists ${rec.infix_lists}`,
    );
    console.log(
      `  cold/rg ${(coldMs / r.ms).toFixed(2)}x, read ahead/rg ${(raMs / r.ms).toFixed(2)}x, auto first/rg ${(caMs / r.ms).toFixed(2)}x, auto second/rg ${(waMs / r2.ms).toFixed(2)}x, after a reload/rg ${(rlMs / r.ms).toFixed(2)}x (at once ${(rl0Ms / r.ms).toFixed(2)}x, with auto ${(rlaMs / r.ms).toFixed(2)}x), warm/rg ${(warmMs / r2.ms).toFixed(2)}x, naive/cold ${(nMs / coldMs).toFixed(2)}x, naive/warm ${(nMs / warmMs).toFixed(2)}x, identical ${p.identical}\n`,
    );
    per[n] = {
      dedupsearch_ms: +coldMs.toFixed(1),
      dedup_phase_ms: cold.phases,
      warm_ms: +warmMs.toFixed(1),
      warm_phase_ms: warm.phases,
      warm_ranges_fetched: warm.rangesRead,
      warm_chunks: warm.chunks,
      warm_ruled_out: warm.ruledOut,
      // Raw bytes the warm search's exact-match pass read (the blocks where its summaries
      // let a keyword start).
      warm_bytes_read_wholly: warm.bytesScanned - warm.ruledOutBytes,
      reload_ms: +rlMs.toFixed(1),
      reload_phase_ms: rl.phases,
      reload_stored_bytes_read: rl.storedBytesRead,
      // The same for the first search after a reload (set A, summaries from the device files).
      reload_ruled_out: rl.ruledOut,
      reload_bytes_read_wholly: rl.bytesScanned - rl.ruledOutBytes,
      reload_over_rg: +(rlMs / r.ms).toFixed(3),
      reload_at_once_ms: +rl0Ms.toFixed(1),
      reload_at_once_phase_ms: rl0.phases,
      reload_at_once_stored_bytes_read: rl0.storedBytesRead,
      reload_at_once_over_rg: +(rl0Ms / r.ms).toFixed(3),
      reload_at_once_auto_ms: +rlaMs.toFixed(1),
      reload_at_once_auto_phase_ms: rla.phases,
      reload_at_once_auto_where: p.reloadAtOnceAuto.map((x) => x.where),
      reload_at_once_auto_over_rg: +(rlaMs / r.ms).toFixed(3),
      // The slowest first search after a page load with the tab as it comes (auto, the
      // read-ahead on, the device cache kept): a fresh profile clicked at once or typed, a
      // reload clicked at once or typed.
      default_first_worst_over_rg: +(Math.max(caMs, raMs, rlaMs, rlMs) / r.ms).toFixed(3),
      read_ahead_search_ms: +raMs.toFixed(1),
      read_ahead_search_phase_ms: ra.phases,
      read_ahead_search_where: p.readAhead.map((x) => x.where),
      read_ahead_search_stored_bytes_read: ra.storedBytesRead,
      read_ahead_over_rg: +(raMs / r.ms).toFixed(3),
      read_ahead_done_ms: raDone.map((x) => (x === null ? null : +x.toFixed(1))),
      read_ahead_stored_bytes: ra.aheadBytes,
      server_ms: +srvMs.toFixed(1),
      server_phase_ms: srv.phases,
      auto_first_ms: +caMs.toFixed(1),
      auto_first_phase_ms: ca.phases,
      auto_first_over_rg: +(caMs / r.ms).toFixed(3),
      auto_fill_seconds: p.coldAuto.map((x) => +x.fillSeconds.toFixed(3)),
      auto_second_ms: +waMs.toFixed(1),
      auto_second_over_rg: +(waMs / r2.ms).toFixed(3),
      server_uncached_ms: +unMs.toFixed(1),
      server_uncached_phase_ms: unRun.phases,
      server_uncached_stored_bytes_read: unRun.read,
      server_uncached_over_rg: +(unMs / r.ms).toFixed(3),
      naive_ms: +nMs.toFixed(1),
      naive_phase_ms: nv.phases,
      ripgrep_ms: +r.ms.toFixed(1),
      ripgrep_warm_set_ms: +r2.ms.toFixed(1),
      matches: cold.matches,
      files_with_hits: cold.files,
      rg_files_with_hits: r.files,
      files_searched: cold.filesSearched,
      dedup_stored_bytes_read: cold.storedBytesRead,
      dedup_bases_fetched: cold.basesFetched,
      dedup_bases_bytes: cold.basesBytes,
      dedup_base_jobs: cold.baseJobs,
      dedup_base_requests: cold.baseRequests,
      naive_stored_bytes_read: nv.storedBytesRead,
      records: cold.records,
      identical: p.identical,
      cold_over_rg: +(coldMs / r.ms).toFixed(3),
      warm_over_rg: +(warmMs / r2.ms).toFixed(3),
      naive_over_dedup: +(nMs / coldMs).toFixed(3),
      naive_over_warm: +(nMs / warmMs).toFixed(3),
      runs: {
        cold: p.cold.map((x) => x.totalMs),
        warm: p.warm.map((x) => x.totalMs),
        reload: p.reload.map((x) => x.totalMs),
        reload_at_once: p.reloadAtOnce.map((x) => x.totalMs),
        reload_at_once_auto: p.reloadAtOnceAuto.map((x) => x.totalMs),
        server: p.server.map((x) => x.totalMs),
        auto_first: p.coldAuto.map((x) => x.totalMs),
        auto_second: p.warmAuto.map((x) => x.totalMs),
        read_ahead: p.readAhead.map((x) => x.totalMs),
        server_uncached: un.map((x) => +x.totalMs.toFixed(1)),
      },
    };
  }
  const ab = afterBackup.after;
  console.log(
    `After one more backup (${afterBackup.edited} files edited), 8 keywords (set B) in a page that had searched set A: ` +
      `${f0(ab.totalMs)} ms (${phases(ab)}), ${ab.rangesRead} ranges and ${ab.storedBytesRead} stored bytes fetched ` +
      `(the first search of that page: ${f0(afterBackup.before.totalMs)} ms, ${afterBackup.before.rangesRead} ranges, ${afterBackup.before.storedBytesRead} bytes)\n`,
  );
  console.log(
    `The server's first search of the run (${serverFirst.keywords} keywords, its cache warmed up after the backups): ${f0(serverFirst.ms)} ms (${phases(serverFirst)})\n`,
  );
  for (const m of problems) console.log(`MISMATCH: ${m}`);
  console.log(
    JSON.stringify({
      package: pkg,
      versions: versions.length,
      keyword: sets[1][0],
      warm_keyword: other[1][0],
      warm_pause_ms: pauseMs,
      dedupsearch_ms: per[1].dedupsearch_ms,
      warm_ms: per[1].warm_ms,
      reload_ms: per[1].reload_ms,
      reload_at_once_ms: per[1].reload_at_once_ms,
      reload_at_once_auto_ms: per[1].reload_at_once_auto_ms,
      default_first_worst_over_rg: per[1].default_first_worst_over_rg,
      server_ms: per[1].server_ms,
      auto_first_ms: per[1].auto_first_ms,
      auto_second_ms: per[1].auto_second_ms,
      read_ahead_search_ms: per[1].read_ahead_search_ms,
      server_first_ms: +serverFirst.ms.toFixed(1),
      server_first_keywords: serverFirst.keywords,
      server_uncached_ms: per[1].server_uncached_ms,
      naive_ms: per[1].naive_ms,
      ripgrep_ms: per[1].ripgrep_ms,
      keywords_1: per[1],
      keywords_8: per[8],
      keywords_128: per[128],
      after_backup_ms: +ab.totalMs.toFixed(1),
      after_backup_phase_ms: ab.phases,
      after_backup_ranges_fetched: ab.rangesRead,
      after_backup_stored_bytes_read: ab.storedBytesRead,
      after_backup_first_search_ms: +afterBackup.before.totalMs.toFixed(1),
      after_backup_first_search_stored_bytes_read: afterBackup.before.storedBytesRead,
    }),
  );
  if (problems.length) process.exitCode = 1;
} finally {
  rmSync(scratch, { recursive: true, force: true });
}
