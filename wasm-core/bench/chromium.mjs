// Wasm in headless Chromium (system /usr/bin/chromium, launched as bench/lib.mjs does; nothing is
// downloaded): serves the web-target build, the bench module, hash-wasm and the data files
// from a local HTTP server and runs core-bench.mjs in the page. Prints one JSON array.
// Usage: node chromium.mjs PKG_WEB_DIR TS_BIN RANDOM_BIN REPS [TS_LIMIT_MB]
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { launchBrowser } from '../../bench/lib.mjs';

const [pkg, tsBin, rndBin, reps, tsLimit] = process.argv.slice(2);
const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '../..');
const routes = {
  '/': { type: 'text/html', body: '<!doctype html><title>bench</title>' },
  '/core-bench.mjs': { type: 'text/javascript', file: path.join(here, 'core-bench.mjs') },
  '/pkg/wasm_core.js': { type: 'text/javascript', file: path.join(pkg, 'wasm_core.js') },
  '/pkg/wasm_core_bg.wasm': { type: 'application/wasm', file: path.join(pkg, 'wasm_core_bg.wasm') },
  '/hash-wasm.js': { type: 'text/javascript', file: path.join(root, 'node_modules/hash-wasm/dist/index.esm.js') },
  '/ts.bin': { type: 'application/octet-stream', file: tsBin },
  '/random.bin': { type: 'application/octet-stream', file: rndBin },
};
const server = http.createServer((req, res) => {
  const r = routes[req.url];
  if (!r) {
    res.writeHead(404).end();
    return;
  }
  res.writeHead(200, { 'content-type': r.type });
  if (r.file) fs.createReadStream(r.file).pipe(res);
  else res.end(r.body);
});
await new Promise((ok) => server.listen(0, '127.0.0.1', ok));
const base = `http://127.0.0.1:${server.address().port}`;

// The benchmarks' browser: their flags and the features they turn off (bench/lib.mjs).
const browser = await launchBrowser();
try {
  const page = await browser.newPage();
  page.on('console', (m) => process.stderr.write(m.text() + '\n'));
  await page.goto(base + '/');
  const res = await page.evaluate(
    async ({ reps, tsLimit }) => {
      const core = await import('/pkg/wasm_core.js');
      await core.default('/pkg/wasm_core_bg.wasm');
      const { runCoreBench } = await import('/core-bench.mjs');
      const { createSHA1 } = await import('/hash-wasm.js');
      const get = async (u) => new Uint8Array(await (await fetch(u)).arrayBuffer());
      let ts = await get('/ts.bin');
      if (tsLimit) ts = ts.subarray(0, tsLimit << 20);
      const random = await get('/random.bin');
      return runCoreBench(core, { 'typescript-10': ts, random }, {
        where: 'wasm-chromium',
        reps,
        hashers: { hashwasm: createSHA1 },
        log: (l) => console.log(l),
      });
    },
    { reps: Number(reps), tsLimit: tsLimit ? Number(tsLimit) : 0 },
  );
  console.log(JSON.stringify(res));
} finally {
  await browser.close();
  server.close();
}
