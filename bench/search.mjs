// Search benchmark: typescript-10 backed up through the real UI (headless Chromium, real
// release server), then for 1, 8 and 128 keywords: DedupSearch and the naive search in the
// page (Search tab), and ripgrep over the 10 release folders on disk, as in the DedupSearch
// paper's Fig. 7 (phase times, record counts).
//
// Keywords (deterministic, from the data): every identifier-like word /[A-Za-z_][A-Za-z0-9_]{5,20}/
// (whole tokens of [A-Za-z0-9_]) counted over the files of the newest release; the candidates
// are the words seen 10..2000 times, sorted by (count, word); a set of N keywords is N words
// evenly spaced over that list, so a set mixes rare and common words (the paper used words of
// varied frequency). The 1-keyword set is the median candidate.
//
// Prints a table per keyword count and, last, one JSON line.
// Usage: node bench/search.mjs [--package P] [--count N] [--quick] [--runs N] [--naive-runs N]
// (--runs: DedupSearch and ripgrep runs per set, default 3, medians reported; --naive-runs:
// default 1; --quick: 3 releases)
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { backupFolders, cli, dataset, launchBrowser, now, openApp, startServer } from './lib.mjs';

const { flag, option } = cli();
const quick = flag('quick');
const pkg = option('package', 'typescript');
const count = Number(option('count', quick ? 3 : 10));
const runs = Number(option('runs', 3));
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
  for (const n of SIZES) {
    const picks = [];
    for (let i = 0; i < n; i++) picks.push(cand[Math.floor(((i + 0.5) * cand.length) / n)][0]);
    sets[n] = picks;
  }
  return { sets, candidates: cand.length };
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
async function pageRun(page, engine, seq) {
  const errors = page.getByTestId('search-error');
  await page.getByTestId(engine === 'dedup' ? 'search-start' : 'search-naive').click();
  const done = page.locator(`[data-testid=search-done][data-engine=${engine}][data-seq="${seq}"]`);
  const failed = errors.waitFor({ timeout: 1_800_000 }).then(async () => {
    throw new Error(`${engine} search failed: ${await errors.innerText()}`);
  });
  failed.catch(() => {});
  await Promise.race([done.waitFor({ timeout: 1_800_000 }), failed]);
  const a = (n) => done.getAttribute(n);
  const records = await a('data-records');
  return {
    totalMs: Number(await a('data-total-ms')),
    phases: JSON.parse(await a('data-phase-ms')),
    matches: Number(await a('data-matches')),
    files: Number(await a('data-files')),
    filesSearched: Number(await a('data-files-searched')),
    storedBytesRead: Number(await a('data-stored-bytes-read')),
    records: records ? JSON.parse(records) : null,
  };
}

async function inPage(sets) {
  const server = await startServer();
  const browser = await launchBrowser();
  try {
    const backupPage = await openApp(browser, server);
    const t0 = now();
    const backups = await backupFolders(backupPage, versions, pkg);
    console.error(`backed up ${backups.length} versions in ${(now() - t0).toFixed(1)} s`);
    await backupPage.close();
    const page = await openApp(browser, server);
    const pageErrors = [];
    page.on('pageerror', (e) => pageErrors.push(e.message));
    await page.getByTestId('tab-search').click();
    let seq = 0;
    const out = {};
    for (const n of SIZES) {
      await page.getByTestId('search-keywords').fill(sets[n].join('\n'));
      const dedup = [];
      for (let i = 0; i < runs; i++) dedup.push(await pageRun(page, 'dedup', ++seq));
      const naive = [];
      for (let i = 0; i < naiveRuns; i++) naive.push(await pageRun(page, 'naive', ++seq));
      const cmp = page.getByTestId('search-compare');
      await cmp.waitFor({ timeout: 60_000 });
      const identical = await cmp.getAttribute('data-identical');
      if (pageErrors.length) throw new Error(`errors on the page: ${pageErrors.join('; ')}`);
      out[n] = { dedup, naive, identical: identical === 'true' };
      console.error(
        `${n} keywords: dedup ${dedup.map((r) => r.totalMs.toFixed(0)).join(' ')} ms, ` +
          `naive ${naive.map((r) => r.totalMs.toFixed(0)).join(' ')} ms, identical=${identical}`,
      );
    }
    return out;
  } finally {
    await browser.close();
    await server.stop();
    rmSync(server.dataDir, { recursive: true, force: true });
  }
}

/** The run whose total is the median (lower median for even counts), to report its phases and records. */
const medianRun = (rs) => [...rs].sort((a, b) => a.totalMs - b.totalMs)[Math.floor((rs.length - 1) / 2)];

try {
  const { sets, candidates } = chooseKeywords(versions[versions.length - 1]);
  console.error(`${candidates} candidate keywords; 1-keyword set: ${sets[1][0]}`);
  const page = await inPage(sets);
  const rg = {};
  for (const n of SIZES) rg[n] = ripgrep(sets[n]);

  const f0 = (x) => x.toFixed(0);
  const problems = [];
  const per = {};
  console.log(
    `\n${pkg}-${versions.length} (${versions.map((v) => path.basename(v)).join(', ')}), median of ${runs} DedupSearch and ripgrep runs, ${naiveRuns} naive\n`,
  );
  for (const n of SIZES) {
    const p = page[n];
    const d = medianRun(p.dedup);
    const dMs = median(p.dedup.map((r) => r.totalMs));
    const nv = medianRun(p.naive);
    const nMs = median(p.naive.map((r) => r.totalMs));
    const r = rg[n];
    const rec = d.records ?? {};
    if (!p.identical)
      problems.push(`${n} keywords: DedupSearch and naive results differ (search-compare data-identical=false)`);
    if (r.files !== d.files)
      problems.push(`${n} keywords: ripgrep finds ${r.files} files with a hit, the page ${d.files}`);
    console.log(`${n} keyword${n > 1 ? 's' : ''}${n === 1 ? ` (${sets[1][0]})` : ''}`);
    console.log(
      `  DedupSearch ${f0(dMs).padStart(7)} ms  (prepare ${f0(d.phases.prepare)}, physical ${f0(d.phases.physical)}, logical ${f0(d.phases.logical)}; runs ${p.dedup.map((x) => f0(x.totalMs)).join(' ')})`,
    );
    console.log(
      `  naive       ${f0(nMs).padStart(7)} ms  (prepare ${f0(nv.phases.prepare)}, scan ${f0(nv.phases.scan)}; runs ${p.naive.map((x) => f0(x.totalMs)).join(' ')})`,
    );
    console.log(`  ripgrep     ${f0(r.ms).padStart(7)} ms  (runs ${r.all.map(f0).join(' ')})`);
    console.log(
      `  matches ${d.matches}, files with a hit: page ${d.files}, rg ${r.files} (rg matching lines ${r.lines}); files searched ${d.filesSearched}; stored bytes read: dedup ${d.storedBytesRead}, naive ${nv.storedBytesRead}`,
    );
    console.log(
      `  records: chunk-results ${rec.chunk_results} (${rec.chunk_result_bytes} B), location-lists ${rec.location_lists} (long ${rec.long_location_lists}, ${rec.location_list_bytes} B), tiny ${rec.tiny} (${rec.tiny_bytes} B, fetched ${rec.tiny_fetched}), infix lists ${rec.infix_lists}`,
    );
    console.log(
      `  naive/dedup ${(nMs / dMs).toFixed(2)}x, dedup/rg ${(dMs / r.ms).toFixed(2)}x, identical ${p.identical}\n`,
    );
    per[n] = {
      dedupsearch_ms: +dMs.toFixed(1),
      dedup_phase_ms: d.phases,
      naive_ms: +nMs.toFixed(1),
      naive_phase_ms: nv.phases,
      ripgrep_ms: +r.ms.toFixed(1),
      matches: d.matches,
      files_with_hits: d.files,
      rg_files_with_hits: r.files,
      files_searched: d.filesSearched,
      dedup_stored_bytes_read: d.storedBytesRead,
      naive_stored_bytes_read: nv.storedBytesRead,
      records: d.records,
      identical: p.identical,
      naive_over_dedup: +(nMs / dMs).toFixed(3),
      dedup_over_rg: +(dMs / r.ms).toFixed(3),
    };
  }
  for (const m of problems) console.log(`MISMATCH: ${m}`);
  console.log(
    JSON.stringify({
      package: pkg,
      versions: versions.length,
      keyword: sets[1][0],
      dedupsearch_ms: per[1].dedupsearch_ms,
      naive_ms: per[1].naive_ms,
      ripgrep_ms: per[1].ripgrep_ms,
      keywords_1: per[1],
      keywords_8: per[8],
      keywords_128: per[128],
    }),
  );
  if (problems.some((m) => m.includes('differ'))) process.exitCode = 1;
} finally {
  rmSync(scratch, { recursive: true, force: true });
}
