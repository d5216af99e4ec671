import { defineConfig, type LaunchOptions } from '@playwright/test';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/**
 * The benchmarks' Chromium (bench/lib.mjs `launchOptions`): the same flags, and the same
 * features off. Headless Chromium makes each test's new context a window that loads its
 * omnibox popup, a WebUI page, in a renderer of its own (~0.4 s of CPU on the machine's two
 * cores while the test runs); that list has to be merged with Playwright's own
 * `--disable-features`, which a probe browser tells. Read once, by the runner, and handed to
 * its workers in the environment.
 */
const LAUNCH = 'DITTO_E2E_LAUNCH_OPTIONS';
process.env[LAUNCH] ??= execFileSync(
  process.execPath,
  [fileURLToPath(new URL('../scripts/chromium-options.mjs', import.meta.url))],
  { encoding: 'utf8' },
);
const launchOptions = JSON.parse(process.env[LAUNCH]) as LaunchOptions;

/**
 * Real Chromium (Debian's, never a downloaded one) against the real server process,
 * which each spec starts itself with a fresh data directory (see server.ts).
 */
export default defineConfig({
  testDir: './tests',
  timeout: 180_000,
  expect: { timeout: 30_000 },
  fullyParallel: false,
  workers: 1,
  retries: 0,
  reporter: process.env.CI ? [['list'], ['html', { open: 'never' }]] : 'list',
  outputDir: './test-results',
  use: {
    browserName: 'chromium',
    launchOptions,
    acceptDownloads: true,
    // A failed test keeps its trace's actions, console and network, without DOM snapshots
    // or screenshots: recording those keeps every page's renderer busy for the whole test,
    // on the machine's two cores, which slows each test several times over.
    trace: { mode: 'retain-on-failure', screenshots: false, snapshots: false },
  },
});
