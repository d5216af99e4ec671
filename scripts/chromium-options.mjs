// Prints the benchmarks' Chromium launch options (bench/lib.mjs `launchOptions`: their flags
// and the features they turn off) as JSON, for e2e/playwright.config.ts, which is loaded
// synchronously and so cannot launch the probe browser those options are read from itself.
import { launchOptions } from '../bench/lib.mjs';

process.stdout.write(JSON.stringify(await launchOptions()));
