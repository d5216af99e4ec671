import { expect, test } from '@playwright/test';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { repoJson, startServer, type RunningServer } from '../server';

let server: RunningServer;
let root: string;
let folder: string;

const PATTERNS = ['*.log', '!important.log', '/build/', 'docs/**/draft-*'];
/** The presets ticked in the page, as the patterns they stand for (web/src/input/excludes.ts). */
const PRESET_PATTERNS = [
  'node_modules/',
  '.DS_Store',
  '._*',
  'Thumbs.db',
  'ehthumbs.db',
  'desktop.ini',
  '$RECYCLE.BIN/',
  '.Trash-*/',
];

test.beforeAll(async () => {
  server = await startServer();
  root = mkdtempSync(path.join(tmpdir(), 'ditto-excludes-'));
  folder = path.join(root, 'webapp');
  const files: Record<string, number> = {
    'index.js': 300,
    'node_modules/left-pad/index.js': 1200,
    'node_modules/left-pad/package.json': 400,
    'src/node_modules/x.js': 50,
    '.DS_Store': 6148,
    'src/Thumbs.db': 900,
    'src/app.js': 2000,
    'debug.log': 700,
    'src/important.log': 80,
    'build/out.js': 5000,
    'src/build/keep.js': 60,
    'docs/a/b/draft-1.md': 111,
    'docs/final.md': 222,
  };
  for (const [rel, size] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(folder, rel)), { recursive: true });
    writeFileSync(path.join(folder, rel), 'x'.repeat(size));
  }
});
test.afterAll(async () => {
  await server?.stop();
  rmSync(root, { recursive: true, force: true });
});

/** Node's own walk of the folder, every file with its size. */
function walk(dir: string, rel = ''): { path: string; size: number }[] {
  return readdirSync(path.join(dir, rel), { withFileTypes: true }).flatMap((d) => {
    const r = rel ? `${rel}/${d.name}` : d.name;
    return d.isDirectory() ? walk(dir, r) : [{ path: r, size: statSync(path.join(dir, r)).size }];
  });
}

/** The files git itself ignores with `patterns` as the folder's .gitignore (git check-ignore). */
function ignoredByGit(patterns: string[], files: string[]): Set<string> {
  const repo = mkdtempSync(path.join(tmpdir(), 'ditto-excludes-git-'));
  try {
    execFileSync('git', ['init', '-q'], { cwd: repo });
    writeFileSync(path.join(repo, '.gitignore'), patterns.join('\n') + '\n');
    for (const f of files) {
      mkdirSync(path.dirname(path.join(repo, f)), { recursive: true });
      writeFileSync(path.join(repo, f), '');
    }
    const out = execFileSync('git', ['check-ignore', '--no-index', '--stdin'], { cwd: repo, input: files.join('\n') });
    return new Set(out.toString().split('\n').filter(Boolean));
  } finally {
    rmSync(repo, { recursive: true, force: true });
  }
}

test('excludes: presets and patterns leave out what git would, counted before the backup', async ({ page }) => {
  const all = walk(folder);
  const ignored = ignoredByGit(
    [...PRESET_PATTERNS, ...PATTERNS],
    all.map((f) => f.path),
  );
  const out = all.filter((f) => ignored.has(f.path));
  const kept = all.filter((f) => !ignored.has(f.path));
  expect(out.length).toBeGreaterThan(5);

  await page.goto(server.appUrl);
  await expect(page.getByTestId('engine-ready')).toBeVisible();
  await page.getByTestId('folder-input').setInputFiles(folder);
  await expect(page.getByTestId('picked-excluded')).toHaveAttribute('data-files', '0');
  await page.getByTestId('exclude-preset-node_modules').check();
  await page.getByTestId('exclude-preset-os').check();
  const box = page.getByTestId('exclude-patterns');
  await box.fill([...(await box.inputValue()).split('\n'), ...PATTERNS].join('\n'));

  const shown = page.getByTestId('picked-excluded');
  await expect(shown).toHaveAttribute('data-files', String(out.length));
  await expect(shown).toHaveAttribute('data-bytes', String(out.reduce((n, f) => n + f.size, 0)));
  await expect(page.getByTestId('picked-summary')).toHaveAttribute('data-files', String(kept.length));
  const listed = await page
    .getByTestId('excluded-file')
    .evaluateAll((els) => els.map((e) => e.getAttribute('data-path')));
  expect(listed.sort()).toEqual(out.map((f) => `webapp/${f.path}`).sort());

  await page.getByTestId('backup-start').click();
  await expect(page.getByTestId('backup-done')).toBeVisible({ timeout: 60_000 });
  // Excluded files are not skipped errors: the version is complete and lists them nowhere.
  await expect(page.getByTestId('backup-skipped')).toHaveCount(0);
  await expect(page.getByTestId('backup-excluded')).toHaveAttribute('data-files', String(out.length));
  const id = await page.getByTestId('backup-done').getAttribute('data-version');
  const v = await repoJson<{
    stats: { files: number; skipped_files?: number };
    manifest: { entries: { path: string; kind: string }[] };
  }>(server, `/versions/${id}`);
  const inVersion = v.manifest.entries.filter((e) => e.kind === 'file').map((e) => e.path);
  expect(inVersion.sort()).toEqual(kept.map((f) => f.path).sort());
  expect(v.stats.skipped_files ?? 0).toBe(0);
  expect(v.manifest.entries.some((e) => e.path === 'node_modules' || e.path.startsWith('build'))).toBe(false);

  // Kept with the source: picking the folder again shows the same patterns and counts.
  await page.reload();
  await expect(page.getByTestId('engine-ready')).toBeVisible();
  await page.getByTestId('folder-input').setInputFiles(folder);
  await expect(page.getByTestId('exclude-preset-node_modules')).toBeChecked();
  await expect(page.getByTestId('picked-excluded')).toHaveAttribute('data-files', String(out.length));
});
