import { expect, test, type Locator, type Page } from '@playwright/test';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { walk } from '../datasets';
import { expectSame, pageHits, scanFolders as scanAll, type ScanOptions } from '../hits';
import { backUp, openWithoutPicker, restoreVersionZip, withoutReadAhead } from '../page';
import { repoJson, startServer, type RunningServer } from '../server';

// Delta chunks (issue 17) in the page: after the server's delta pass re-stored the second
// version's edited chunks as deltas against the first version's (and the third's against
// the second's), the page's DedupSearch
// (which reads containers itself) must still find exactly what a scan of the folders finds
// and what the naive search finds, and the restore must give back the folder byte for byte.
// The first version holds more than 1 MiB of whole chunks, so the pass trains a zstd
// dictionary on them and stores them as deltas against it: the later versions' deltas then
// have deltas as bases, chains of up to three links, which the workers fetch as stored with
// their whole base chains, one `chunks/get` per job (the dictionary, in no manifest, always
// comes from `chunks/get`), and resolve themselves. The pass then stores each version's new
// chunks together in frames (docs/FORMAT.md, "Codec 2, method 3"): most chunks here are
// 25-byte slices of a frame, itself a delta against an older frame or the dictionary.

let server: RunningServer;
let root: string;
const folders: string[] = [];
const ids: number[] = [];

test.describe.configure({ mode: 'serial' });

/** Deterministic text: words from a small vocabulary (compressible, like source code). */
function words(seed: number, bytes: number): Buffer {
  const vocab = ['alpha', 'beta', 'gamma', 'delta', 'omega', 'needle', 'const', 'return', 'value', '\n', '{', '}'];
  let x = seed >>> 0 || 1;
  const out: string[] = [];
  let n = 0;
  while (n < bytes) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    const w = vocab[x % vocab.length] + (x % 7 === 0 ? String(x % 1000) : '') + ' ';
    out.push(w);
    n += w.length;
  }
  return Buffer.from(out.join('').slice(0, bytes));
}

/** `data` with `EDITMARK` written over it every `every` bytes (a small edit per chunk or two). */
function edited(data: Buffer, every: number, shift: number): Buffer {
  const out = Buffer.from(data);
  for (let at = shift; at + 8 < out.length; at += every) out.write('EDITMARK', at);
  return out;
}

// These tests check what a first search reads itself: the tab's read-ahead is off (the
// read-ahead's own test turns it on).
test.beforeEach(async ({ context }) => withoutReadAhead(context));

test.beforeAll(async () => {
  root = mkdtempSync(path.join(tmpdir(), 'ditto-delta-'));
  const v1 = path.join(root, 'v1');
  const v2 = path.join(root, 'v2');
  const v3 = path.join(root, 'v3');
  for (const [i, name] of ['a.txt', 'b.txt', 'lib/c.txt', 'lib/d.txt', 'small.txt'].entries()) {
    const size = name === 'small.txt' ? 900 : 300_000 + i * 37_000;
    const one = words(1000 + i, size);
    const two = name === 'small.txt' ? one : edited(one, 13_000 + i * 1_000, 3_000 + i * 500);
    const three = name === 'small.txt' ? one : edited(two, 11_000 + i * 700, 8_000 + i * 300);
    for (const [k, [dir, data]] of (
      [
        [v1, one],
        [v2, two],
        [v3, three],
      ] as const
    ).entries()) {
      const file = path.join(dir, name);
      mkdirSync(path.dirname(file), { recursive: true });
      writeFileSync(file, data);
      // An edit keeps the size, so each version's copy gets an mtime of its own (hours
      // apart, one per file): written in the same millisecond, an edited copy would look
      // unchanged to the backup's change detection (docs/BACKUP.md) once its mtime is no
      // longer racy, and be trusted unread.
      const at = new Date(Date.now() - (3 - k) * 3_600_000 + i * 1_000);
      utimesSync(file, at, at);
    }
  }
  folders.push(v1, v2, v3);
  server = await startServer({ env: { DITTO_DELTA: '1' } });
});
test.afterAll(async () => {
  await server?.stop();
  if (root) rmSync(root, { recursive: true, force: true });
});

const api = <T>(p: string) => repoJson<T>(server, p);

/** The oracle: every occurrence of each keyword in the backed-up folders (hits.ts). */
const scanFolders = (keywords: Buffer[], opts?: ScanOptions) => scanAll(folders, ids, keywords, opts);

let runs = 0;

async function searchBoth(page: Page, keywords: string[], hex: boolean) {
  await page.getByTestId('search-keywords').fill(keywords.join('\n'));
  await page.getByTestId('search-hex').setChecked(hex);
  await page.getByTestId('search-start').click();
  const done = page.locator(`[data-testid=search-done][data-engine=dedup][data-seq="${++runs}"]`);
  await expect(done).toBeVisible({ timeout: 120_000 });
  const hits = await pageHits(page);
  await page.getByTestId('search-naive').click();
  await expect(page.locator(`[data-testid=search-done][data-engine=naive][data-seq="${++runs}"]`)).toBeVisible({
    timeout: 120_000,
  });
  await expect(page.getByTestId('search-compare')).toHaveAttribute('data-identical', 'true');
  return { done, hits };
}

/** A search that fetched delta bases did so in one `chunks/get` per job (chains in the answer). */
async function expectOneRequestPerJob(done: Locator) {
  const jobs = Number(await done.getAttribute('data-base-jobs'));
  expect(jobs, 'jobs fetched bases').toBeGreaterThan(0);
  expect(Number(await done.getAttribute('data-base-requests')), 'one request per job').toBe(jobs);
}

/** The fingerprints of a bundle's entries, in order (docs/FORMAT.md: 16-byte header, 32-byte entry headers). */
function bundleFps(b: Buffer): string[] {
  const n = b.readUInt32LE(8);
  const out: string[] = [];
  let at = 16;
  for (let i = 0; i < n; i++) {
    out.push(b.subarray(at, at + 20).toString('hex'));
    at += 32 + b.readUInt32LE(at + 28);
  }
  expect(at).toBe(b.length);
  return out;
}

/** Keywords cut across chunk borders of v2's largest file, one-byte partials included. */
async function borderKeywords(): Promise<Buffer[]> {
  const v = await api<{ manifest: { entries: { path: string; kind: string; recipe: string[] }[] } }>(
    `/versions/${ids[1]}`,
  );
  const listing = await api<{ containers: { chunks: { fp: string; raw_len: number }[] }[] }>('/containers');
  const len = new Map(listing.containers.flatMap((c) => c.chunks.map((ch) => [ch.fp, ch.raw_len] as const)));
  const big = v.manifest.entries.filter((e) => e.kind === 'file').sort((a, b) => b.recipe.length - a.recipe.length)[0];
  expect(big.recipe.length).toBeGreaterThanOrEqual(4);
  const data = readFileSync(path.join(folders[1], big.path));
  const cuts: number[] = [];
  let at = 0;
  for (const fp of big.recipe.slice(0, -1)) cuts.push((at += len.get(fp)!));
  return [
    data.subarray(cuts[0] - 7, cuts[0] + 9),
    data.subarray(cuts[1] - 1, cuts[1] + 5),
    data.subarray(cuts[2] - 5, cuts[2] + 1),
  ];
}

test('with delta chunks stored, search equals the naive search and a scan, and restore is identical', async ({
  page,
}, testInfo) => {
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(e.message));
  await openWithoutPicker(page, server);
  for (const f of folders) ids.push(await backUp(page, f, 'delta'));

  // The pass runs in the background after the commit: wait until it handled version 2.
  let stats: { delta_chunks: number; delta_pass: { version: number } | null } | null = null;
  await expect
    .poll(
      async () => {
        stats = await api('/stats');
        return stats!.delta_pass?.version === ids[2] ? stats!.delta_chunks : -1;
      },
      { timeout: 60_000 },
    )
    .toBeGreaterThan(0);
  const listing = await api<{ containers: { chunks: { fp: string; codec: number }[] }[] }>('/containers');
  const listed = listing.containers.flatMap((c) => c.chunks);
  const deltas = listed.filter((c) => c.codec === 2).length;
  expect(deltas, 'the containers list delta chunks').toBeGreaterThan(0);
  const chunksOf = await Promise.all(
    ids.map(async (id) => {
      const v = await api<{ manifest: { entries: { recipe: string[] }[] } }>(`/versions/${id}`);
      return new Set(v.manifest.entries.flatMap((e) => e.recipe));
    }),
  );
  const named = new Set(chunksOf.flatMap((s) => [...s]));
  expect(
    listed.filter((c) => !named.has(c.fp)).length,
    'a trained dictionary is stored (a chunk no manifest names)',
  ).toBeGreaterThan(0);
  expect(
    listed.filter((c) => c.codec === 2 && chunksOf[0].has(c.fp)).length,
    "the first version's chunks are deltas (against the dictionary)",
  ).toBeGreaterThan(0);

  await page.getByTestId('tab-search').click();
  await page.getByTestId('search-where').selectOption('page');
  // Text: a word only the edits wrote (inside delta chunks), common words, overlaps.
  const text = ['EDITMARK', 'needle', 'gamma', 'ARKne', 'MARK'];
  const { done, hits } = await searchBoth(page, text, false);
  const want = scanFolders(text.map((k) => Buffer.from(k)));
  expect([...want.values()].reduce((n, h) => n + h.length, 0)).toBeGreaterThan(1000);
  expectSame(hits, want);
  const scanned = Number(await done.getAttribute('data-delta-chunks'));
  // Every delta chunk a version names; frames (chunks no manifest names, docs/FORMAT.md) are
  // decoded as the bases of their slices, not scanned.
  expect(scanned, 'the page decoded delta chunks').toBe(listed.filter((c) => c.codec === 2 && named.has(c.fp)).length);
  expect(
    Number(await done.getAttribute('data-bases-fetched')) + Number(await done.getAttribute('data-links-in-range')),
    'bases fetched or read with the ranges, the dictionary at least',
  ).toBeGreaterThan(0);
  // Links stored in a job's range (frames, the dictionary) are decoded from it (docs/SEARCH.md,
  // "Work split by chain").
  expect(Number(await done.getAttribute('data-links-in-range')), 'links read with the ranges').toBeGreaterThan(0);
  if (Number(await done.getAttribute('data-base-jobs')) > 0) await expectOneRequestPerJob(done);

  // Hex keywords straddling chunk borders of the edited file (tiny records across deltas).
  const cut = await borderKeywords();
  const hex = await searchBoth(
    page,
    cut.map((b) => b.toString('hex')),
    true,
  );
  expectSame(hex.hits, scanFolders(cut));

  // Repeat search: every chunk, deltas included, comes from the workers' caches.
  await page.getByTestId('search-hex').setChecked(false);
  await page.getByTestId('search-keywords').fill(text.join('\n'));
  await page.getByTestId('search-start').click();
  const again = page.locator(`[data-testid=search-done][data-engine=dedup][data-seq="${++runs}"]`);
  await expect(again).toBeVisible({ timeout: 120_000 });
  expectSame(await pageHits(page), want);

  // A cold search in a new browser context (empty worker caches, nothing kept on the
  // device) of the third version's edited file only: the bases of its deltas are the second
  // version's copies, out of scope and deltas against the first version's (deltas against
  // the dictionary) in turn, so the one request of each job brings them with their chain
  // links.
  const freshContext = await page.context().browser()!.newContext();
  await withoutReadAhead(freshContext);
  const fresh = await freshContext.newPage();
  fresh.on('pageerror', (e) => errors.push(e.message));
  const gets: { asked: string[]; have: string[]; body: Promise<Buffer> }[] = [];
  fresh.on('request', (r) => {
    if (!r.url().endsWith('/chunks/get')) return;
    const req = r.postDataJSON() as { fingerprints: string[]; deltas?: string; chains?: boolean; have?: string[] };
    if (req.deltas !== 'stored') return;
    expect(req.chains, 'bases are asked for with their chains').toBe(true);
    gets.push({
      asked: req.fingerprints,
      have: req.have ?? [],
      body: r.response().then((res) => res!.body()),
    });
  });
  await openWithoutPicker(fresh, server);
  await fresh.getByTestId('tab-search').click();
  await fresh.getByTestId('search-where').selectOption('page');
  await fresh.getByTestId('search-versions').selectOption(String(ids[2]));
  await fresh.getByTestId('search-path').fill('a.txt');
  await fresh.getByTestId('search-keywords').fill(text.join('\n'));
  await fresh.getByTestId('search-start').click();
  const scoped = fresh.locator('[data-testid=search-done][data-engine=dedup][data-seq="1"]');
  await expect(scoped).toBeVisible({ timeout: 120_000 });
  const only = scanFolders(
    text.map((k) => Buffer.from(k)),
    { only: { version: ids[2], path: 'a.txt' } },
  );
  expect(only.size).toBeGreaterThan(0);
  expectSame(await pageHits(fresh), only);
  expect(Number(await scoped.getAttribute('data-bases-fetched'))).toBeGreaterThan(0);
  await expectOneRequestPerJob(scoped);
  // The answers: the bases asked for, then their chain links (down to the dictionary, a
  // whole chunk), each once, none the worker said it has.
  expect(gets.length).toBe(Number(await scoped.getAttribute('data-base-requests')));
  let links = 0;
  for (const g of gets) {
    const got = bundleFps(await g.body);
    expect(got.slice(0, g.asked.length)).toEqual(g.asked);
    const extra = got.slice(g.asked.length);
    expect(new Set(got).size, 'each chunk once').toBe(got.length);
    expect(extra.filter((fp) => g.have.includes(fp))).toEqual([]);
    links += extra.length;
  }
  expect(links, 'chain links came with the bases').toBeGreaterThan(0);
  await fresh.context().close();

  // Restore the newest version: byte-identical to its folder, its chunks fetched as stored
  // (deltas with their base chains, unchecked by the server), so that fewer bytes cross than
  // the version holds.
  const restoreGets: Promise<{ deltas?: string; chains?: boolean; verify?: boolean; bytes: number }>[] = [];
  page.on('request', (r) => {
    if (r.url().endsWith('/chunks/get'))
      restoreGets.push(
        r.response().then(async (res) => ({
          ...(r.postDataJSON() as { deltas?: string; chains?: boolean; verify?: boolean }),
          bytes: (await res!.body()).length,
        })),
      );
  });
  await restoreZip(page, ids[2], testInfo.outputPath('v3'));
  const asked = await Promise.all(restoreGets);
  expect(asked.length).toBeGreaterThan(0);
  for (const g of asked) expect([g.deltas, g.chains, g.verify]).toEqual(['stored', true, false]);
  const wire = asked.reduce((n, g) => n + g.bytes, 0);
  const raw = walk(folders[2]).reduce((n, rel) => n + readFileSync(path.join(folders[2], rel)).length, 0);
  console.log(`restore of version 3: ${wire} bytes fetched for ${raw} bytes of files`);
  expect(wire, 'the restore fetched the stored forms, not raw chunks').toBeLessThan(raw / 2);

  // The source's dashboard splits its savings with delta too: per version, from the chunks
  // each stored first (the second version's edits are its deltas).
  const after = await api<{
    stored_bytes: number;
    delta_saved_bytes: number;
    series: { id: number; first_stored_bytes: number; delta_saved_bytes: number }[];
  }>('/stats');
  const v2 = after.series.find((p) => p.id === ids[1])!;
  expect(v2.delta_saved_bytes, 'the second version saved by deltas').toBeGreaterThan(0);
  expect(after.series.reduce((n, p) => n + p.delta_saved_bytes, 0)).toBe(after.delta_saved_bytes);
  expect(after.series.reduce((n, p) => n + p.first_stored_bytes, 0)).toBe(after.stored_bytes);
  await page.getByTestId('tab-dashboard').click();
  await page.getByTestId('dash-scope').selectOption('delta');
  await expect(page.getByTestId('dashboard')).toHaveAttribute('data-scope', 'delta');
  await expect(page.getByTestId('dash-saved-delta')).toHaveAttribute('data-value', String(after.delta_saved_bytes));
  await expect(page.getByTestId('dash-stored')).toHaveAttribute('data-value', String(after.stored_bytes));
  await expect(page.getByTestId('chart-savings')).toContainText('Saved by delta');
  expect(errors).toEqual([]);
});

/** Restores version `id` as a zip into `out` and checks it against the third folder. */
async function restoreZip(page: Page, id: number, out: string) {
  const got = await restoreVersionZip(page, id, out);
  expect([...got.keys()].sort()).toEqual(walk(folders[2]).sort());
  for (const [rel, bytes] of got) expect(bytes.equals(readFileSync(path.join(folders[2], rel))), rel).toBe(true);
}

test('a restore whose unchecked answer arrives damaged asks again checked and is still identical', async ({
  page,
}, testInfo) => {
  expect(ids.length, 'the versions backed up by the first test').toBe(3);
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(e.message));
  // One byte of the last chunk of the first stored-form answer is changed on the way: the
  // worker refuses the bundle, and the restore asks for the same chunks checked by the server
  // (other requests of the plan may go out in between: the workers verify them at once).
  type Asked = { fingerprints: string[]; deltas?: string; verify?: boolean };
  const asked: Asked[] = [];
  let damaged: Asked | null = null;
  await page.route('**/chunks/get', async (route) => {
    const req = route.request().postDataJSON() as Asked;
    asked.push(req);
    const res = await route.fetch();
    let body = await res.body();
    if (req.deltas === 'stored' && !damaged) {
      damaged = req;
      body = Buffer.from(body);
      body[body.length - 3] ^= 0x5a;
    }
    await route.fulfill({ response: res, body });
  });
  await openWithoutPicker(page, server);
  await restoreZip(page, ids[2], testInfo.outputPath('v3-retried'));
  expect(damaged).toMatchObject({ deltas: 'stored', verify: false });
  const again = asked.slice(asked.indexOf(damaged!) + 1).filter((r) => r.verify === undefined);
  expect(
    again.map((r) => r.fingerprints),
    'the same chunks asked again, checked',
  ).toEqual([damaged!.fingerprints]);
  expect(errors).toEqual([]);
});

test('a delta base that arrives damaged is refused by the worker; the server checks it, and the search started over finds the same', async ({
  page,
}) => {
  expect(ids.length, 'the versions backed up by the first test').toBe(3);
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(e.message));
  // The server sends the bases a worker asks for unchecked (`verify: false`, docs/API.md):
  // one byte of the first one answered is changed on the way, and the worker's own check
  // must refuse it rather than scan wrong bytes; the search then asks the server for that
  // chunk checked (which would quarantine a damaged copy) and starts over.
  type Asked = { fingerprints: string[]; deltas?: string; verify?: boolean };
  const asked: Asked[] = [];
  let damaged = '';
  await page.route('**/chunks/get', async (route) => {
    const req = route.request().postDataJSON() as Asked;
    asked.push(req);
    const res = await route.fetch();
    let body = await res.body();
    if (req.deltas === 'stored' && !damaged) {
      expect(req.verify, 'bases are asked for unchecked').toBe(false);
      body = Buffer.from(body);
      const storedLen = body.readUInt32LE(16 + 28);
      expect(storedLen).toBeGreaterThan(8);
      damaged = body.subarray(16, 36).toString('hex');
      body[16 + 32 + storedLen - 2] ^= 0x5a;
    }
    await route.fulfill({ response: res, body });
  });
  await openWithoutPicker(page, server);
  await page.getByTestId('tab-search').click();
  await page.getByTestId('search-where').selectOption('page');
  // One file of the third version: its deltas' bases are chunks of the second, out of scope
  // and elsewhere than its ranges, so they are fetched (a search of every version reads
  // most links with its ranges instead, docs/SEARCH.md).
  await page.getByTestId('search-versions').selectOption(String(ids[2]));
  await page.getByTestId('search-path').fill('a.txt');
  await page.getByTestId('search-keywords').fill('needle');
  await page.getByTestId('search-start').click();
  await expect(page.locator('[data-testid=search-done][data-engine=dedup][data-seq="1"]')).toBeVisible({
    timeout: 120_000,
  });
  expect(damaged, 'a base was fetched').not.toBe('');
  expect(
    asked.filter((r) => r.verify === undefined).map((r) => r.fingerprints),
    'the refused chunk asked for once, checked',
  ).toEqual([[damaged]]);
  const hits = await pageHits(page);
  expect(hits.size).toBeGreaterThan(0);
  // The same search again, nothing damaged on the way: the same hits.
  await page.getByTestId('search-start').click();
  await expect(page.locator('[data-testid=search-done][data-engine=dedup][data-seq="2"]')).toBeVisible({
    timeout: 120_000,
  });
  expectSame(await pageHits(page), hits);
  expect(errors).toEqual([]);
});

test("links of chains read with the jobs' ranges that arrive damaged are refused: the search names one and shows no hits", async ({
  page,
}) => {
  expect(ids.length, 'the versions backed up by the first test').toBe(3);
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(e.message));
  // The links no file names (frames, the dictionary) that jobs read with their ranges: one
  // byte of each one a range holds is changed on the way, and the workers' own checks must
  // refuse what decodes from them rather than scan wrong bytes. (A range may also hold links
  // of the other worker's chains, which its job does not decode: every one is damaged.)
  // The server finds nothing wrong with a refused chunk, and every attempt of the search
  // reads damaged bytes again: it gives up after its last.
  const listing = await api<{
    containers: { id: number; chunks: { fp: string; offset: number; stored_len: number }[] }[];
  }>('/containers');
  const named = new Set<string>();
  for (const id of ids)
    for (const e of (await api<{ manifest: { entries: { recipe: string[] }[] } }>(`/versions/${id}`)).manifest.entries)
      for (const fp of e.recipe) named.add(fp);
  const damaged = new Set<string>();
  await page.route('**/containers/*', async (route) => {
    const range = /bytes=(\d+)-(\d+)/.exec(route.request().headers()['range'] ?? '');
    const res = await route.fetch();
    let body = await res.body();
    const id = Number(new URL(route.request().url()).pathname.split('/').pop());
    const c = listing.containers.find((x) => x.id === id);
    if (range && c) {
      const start = Number(range[1]);
      body = Buffer.from(body);
      for (const k of c.chunks)
        if (!named.has(k.fp) && k.offset >= start && k.offset + k.stored_len <= start + body.length) {
          damaged.add(k.fp);
          body[k.offset - start + k.stored_len - 2] ^= 0x5a;
        }
    }
    await route.fulfill({ response: res, body });
  });
  await openWithoutPicker(page, server);
  await page.getByTestId('tab-search').click();
  await page.getByTestId('search-where').selectOption('page');
  await page.getByTestId('search-keywords').fill('needle');
  await page.getByTestId('search-start').click();
  const error = page.getByTestId('search-error');
  await expect(error).toBeVisible({ timeout: 120_000 });
  expect(damaged.size, 'the ranges held links').toBeGreaterThan(0);
  const named_ = /chunk ([0-9a-f]{40})/.exec((await error.textContent()) ?? '');
  expect(named_, 'the error names a chunk').not.toBeNull();
  expect(damaged.has(named_![1]), `${named_![1]} is one of the links damaged`).toBe(true);
  await expect(page.locator('[data-testid=search-done][data-engine=dedup]')).toHaveCount(0);
  expect(errors).toEqual([]);
});
