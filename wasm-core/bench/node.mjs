// Wasm under Node: runs core-bench.mjs on the prepared files; prints one JSON array.
// Usage: node node.mjs PKG_DIR TS_BIN RANDOM_BIN REPS [TS_LIMIT_MB]
import fs from 'node:fs';
import crypto from 'node:crypto';
import { createRequire } from 'node:module';
import { createSHA1 } from 'hash-wasm';
import { runCoreBench } from './core-bench.mjs';

const [pkg, tsBin, rndBin, reps, tsLimit] = process.argv.slice(2);
const require = createRequire(import.meta.url);
const core = require(`${pkg}/wasm_core.js`);
let ts = new Uint8Array(fs.readFileSync(tsBin));
if (tsLimit) ts = ts.subarray(0, Number(tsLimit) << 20);
const random = new Uint8Array(fs.readFileSync(rndBin));
const res = await runCoreBench(
  core,
  { 'typescript-10': ts, random },
  {
    where: 'wasm-node',
    reps: Number(reps),
    hashers: {
      hashwasm: createSHA1,
      nodeSha1: (b) => crypto.createHash('sha1').update(b).digest(),
    },
    log: (l) => process.stderr.write(l + '\n'),
  },
);
console.log(JSON.stringify(res));
