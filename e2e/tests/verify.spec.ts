import { expect, test } from '@playwright/test';
import { createHash, randomBytes } from 'node:crypto';
import { openSync, readSync, writeSync, closeSync, readdirSync, existsSync } from 'node:fs';
import path from 'node:path';
import { startServer, repoJson, settleLayout, type RunningServer } from '../server';

let server: RunningServer;

test.beforeAll(async () => {
  server = await startServer();
});
test.afterAll(async () => {
  await server?.stop();
});

/** A bundle (docs/FORMAT.md) of raw chunks. */
function bundle(chunks: Buffer[]): Uint8Array<ArrayBuffer> {
  const head = Buffer.alloc(16);
  head.write('DTB1', 0, 'latin1');
  head.writeUInt16LE(1, 4);
  head.writeUInt32LE(chunks.length, 8);
  const parts: Buffer[] = [head];
  for (const raw of chunks) {
    const e = Buffer.alloc(32);
    createHash('sha1').update(raw).digest().copy(e, 0);
    e.writeUInt32LE(raw.length, 24);
    e.writeUInt32LE(raw.length, 28);
    parts.push(e, raw);
  }
  return new Uint8Array(Buffer.concat(parts));
}

test('Verify reads every chunk back and names the version a damaged chunk breaks', async ({ page }) => {
  const auth = { Authorization: `Bearer ${server.token}` };
  const chunks = [randomBytes(30_000), randomBytes(40_000)];
  const hex = chunks.map((c) => createHash('sha1').update(c).digest('hex'));
  let res = await fetch(`${server.url}/api/v1/repos/default/bundles`, {
    method: 'POST',
    headers: auth,
    body: bundle(chunks),
  });
  expect(res.status).toBe(200);
  const manifest = {
    source: 'Verified',
    time: Date.now(),
    entries: [{ path: 'Verified/f.bin', kind: 'file', size: 70_000, mtime: 0, recipe: hex }],
  };
  res = await fetch(`${server.url}/api/v1/repos/default/versions`, {
    method: 'POST',
    headers: { ...auth, 'Content-Type': 'application/json' },
    body: JSON.stringify(manifest),
  });
  expect(res.status).toBe(201);
  const { id } = (await res.json()) as { id: number };

  await page.goto(server.appUrl);
  await page.getByTestId('tab-versions').click();
  await page.getByTestId('verify-run').click();
  await expect(page.getByTestId('verify-ok')).toContainText('All 2 stored chunks');

  // The server's work after a commit (the mover, the delta pass, then the search cache's
  // warm-up) reads the chunks too, and would set the damaged one aside before Verify does:
  // it ends before the bit flips.
  await settleLayout(server, { readsDone: true });
  // One flipped bit in the second chunk's bytes on disk.
  const { containers } = await repoJson<{ containers: { id: number; chunks: { fp: string; offset: number }[] }[] }>(
    server,
    '/containers',
  );
  const c = containers.find((c) => c.chunks.some((ch) => ch.fp === hex[1]))!;
  const offset = c.chunks.find((ch) => ch.fp === hex[1])!.offset + 1000;
  const repos = path.join(server.dataDir, 'repos');
  const file = readdirSync(repos)
    .map((r) => path.join(repos, r, 'containers', `${String(c.id).padStart(10, '0')}.dct`))
    .find((p) => existsSync(p))!;
  const fd = openSync(file, 'r+');
  const b = Buffer.alloc(1);
  readSync(fd, b, 0, 1, offset);
  b[0] ^= 0x04;
  writeSync(fd, b, 0, 1, offset);
  closeSync(fd);

  await page.getByTestId('verify-run').click();
  const damaged = page.getByTestId('verify-damaged');
  await expect(damaged).toContainText('1 damaged chunk set aside');
  await expect(damaged).toHaveAttribute('data-versions', String(id));
  // The versions list, reloaded, marks the version.
  await expect(
    page.locator(`[data-testid=version-row][data-version="${id}"] [data-testid=version-damaged]`),
  ).toHaveAttribute('data-chunks', '1');
  // The server now asks for the chunk again, so the next backup heals the version.
  res = await fetch(`${server.url}/api/v1/repos/default/chunks/missing`, {
    method: 'POST',
    headers: { ...auth, 'Content-Type': 'application/json' },
    body: JSON.stringify({ fingerprints: hex }),
  });
  expect(((await res.json()) as { missing: string[] }).missing).toEqual([hex[1]]);
});
