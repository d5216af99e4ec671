import { defineConfig } from '@playwright/test';

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
    launchOptions: {
      executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
      args: [
        '--no-sandbox',
        '--headless',
        '--disable-gpu',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
        '--no-first-run',
        '--disable-quic',
      ],
    },
    acceptDownloads: true,
    // A failed test keeps its trace's actions, console and network, without DOM snapshots
    // or screenshots: recording those keeps every page's renderer busy for the whole test,
    // on the machine's two cores, which slows each test several times over.
    trace: { mode: 'retain-on-failure', screenshots: false, snapshots: false },
  },
});
