// Writes the benchmark inputs once, so every contender reads the same bytes:
//   <out>/typescript-10.bin  all files of all versions, versions in version order, files
//                            in sorted path order (the native bench reads the same order)
//   <out>/random-<MB>.bin    seeded pseudo-random bytes (xorshift32, seed 0xD1770)
// Usage: node prepare.mjs DATASET_DIR OUT_DIR RANDOM_MB
import fs from 'node:fs';
import path from 'node:path';

const [dsDir, outDir, randomMb] = process.argv.slice(2);
fs.mkdirSync(outDir, { recursive: true });

function filesIn(dir, out) {
  // Byte-wise name order, as Rust's OsString sort.
  const names = fs.readdirSync(dir).sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
  for (const n of names) {
    const p = path.join(dir, n);
    const st = fs.statSync(p);
    if (st.isDirectory()) filesIn(p, out);
    else if (st.isFile()) out.push(p);
  }
}

const tsOut = path.join(outDir, 'typescript-10.bin');
if (!fs.existsSync(tsOut)) {
  const key = (v) => v.split('.').map((x) => parseInt(x, 10) || 0);
  const cmp = (a, b) => {
    const ka = key(a), kb = key(b);
    for (let i = 0; i < Math.max(ka.length, kb.length); i++) {
      if ((ka[i] ?? 0) !== (kb[i] ?? 0)) return (ka[i] ?? 0) - (kb[i] ?? 0);
    }
    return 0;
  };
  const versions = fs.readdirSync(dsDir).filter((v) => fs.statSync(path.join(dsDir, v)).isDirectory()).sort(cmp);
  const fd = fs.openSync(tsOut + '.tmp', 'w');
  for (const v of versions) {
    const files = [];
    filesIn(path.join(dsDir, v), files);
    for (const f of files) fs.writeSync(fd, fs.readFileSync(f));
  }
  fs.closeSync(fd);
  fs.renameSync(tsOut + '.tmp', tsOut);
}

const rOut = path.join(outDir, `random-${randomMb}.bin`);
if (!fs.existsSync(rOut)) {
  const buf = new Uint8Array(Number(randomMb) << 20);
  const w = new Uint32Array(buf.buffer);
  let s = 0xd1770;
  for (let i = 0; i < w.length; i++) {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    w[i] = s >>> 0;
  }
  fs.writeFileSync(rOut + '.tmp', buf);
  fs.renameSync(rOut + '.tmp', rOut);
}
console.log(JSON.stringify({ typescript: tsOut, random: rOut }));
