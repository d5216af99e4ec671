// scratch (not committed): auto's first search (fresh page, answered by the server), two web builds, one server
import { readFileSync } from 'node:fs';
import { cli, launchBrowser, median, openApp, startServer } from './lib.mjs';
const { option } = cli();
const runs = Number(option('runs', 6));
const dataDir = option('data', '/tmp/s29/data');
const builds = [{ name: 'before', dir: process.env.A }, { name: 'after', dir: process.env.B }];
const k128 = readFileSync('/tmp/s29/kw128.txt', 'utf8').trim().split('\n');
const sets = { 1: ['NamedTupleMember'], 8: k128.filter((_, i) => i % 16 === 0), 128: k128 };
const browser = await launchBrowser();
let server = null;
const res = {};
try {
  for (let run = 0; run < runs; run++)
    for (const b of run % 2 ? [...builds].reverse() : builds) {
      if (server) await server.stop();
      server = await startServer({ dataDir, webDir: b.dir });
      await new Promise((r) => setTimeout(r, 10000)); // the server's warm-up
      for (const n of [1, 8, 128]) {
        const page = await openApp(browser, server);
        await page.getByTestId('tab-search').click();
        await page.getByTestId('search-keywords').fill(sets[n].join('\n'));
        await page.getByTestId('search-where').selectOption('auto');
        await page.getByTestId('search-start').click();
        const done = page.locator('[data-testid=search-done][data-engine=dedup][data-seq="1"]');
        await done.waitFor({ timeout: 120_000 });
        const ms = Number(await done.getAttribute('data-total-ms'));
        const where = await done.getAttribute('data-where');
        const matches = await done.getAttribute('data-matches');
        ((res[b.name] ??= {})[n] ??= []).push(ms);
        await page.waitForTimeout(1500);
        await page.getByTestId('search-where').selectOption('server');
        await page.getByTestId('search-start').click();
        const done2 = page.locator('[data-testid=search-done][data-engine=dedup][data-seq="2"]');
        await done2.waitFor({ timeout: 120_000 });
        const ms2 = Number(await done2.getAttribute('data-total-ms'));
        ((res[b.name] ??= {})['s' + n] ??= []).push(ms2);
        console.error(`run ${run + 1} ${b.name} ${n}: ${ms.toFixed(1)} ms (${where}, ${matches} matches), server chosen ${ms2.toFixed(1)}`);
        await page.close();
      }
    }
} finally {
  await browser.close();
  if (server) await server.stop();
}
for (const n of [1, 8, 128, 's1', 's8', 's128'])
  console.log(n, builds.map((b) => `${b.name} ${median(res[b.name][n]).toFixed(1)} [${res[b.name][n].map((x) => x.toFixed(0)).join(' ')}]`).join('  '));
