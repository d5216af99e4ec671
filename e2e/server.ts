/**
 * Starts the real `ditto-server` process for a spec: fresh data directory, a free port,
 * the access token parsed from the line it prints.
 */
import { expect } from '@playwright/test';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

export interface RunningServer {
  url: string;
  token: string;
  dataDir: string;
  process: ChildProcess;
  /** Whether the delta pass runs after commits (on unless `DITTO_DELTA=0`). */
  delta: boolean;
  /** The page URL with the token in the fragment, as `npm start` prints it. */
  appUrl: string;
  stop(opts?: { keepData?: boolean; signal?: NodeJS.Signals }): Promise<void>;
}

export function serverBinary(): string {
  return process.env.DITTO_SERVER_BIN ?? path.join(ROOT, 'target', 'debug', 'ditto-server');
}

/**
 * `maxFileBytes` caps every file the server writes (RLIMIT_FSIZE through util-linux's
 * `prlimit`): a write past it fails as on a full disk. `env` adds to the server's
 * environment (`DATABASE_URL`, `DITTO_S3_*`: replicas on a shared database and bucket).
 */
export async function startServer(
  opts: { dataDir?: string; maxFileBytes?: number; env?: Record<string, string> } = {},
): Promise<RunningServer> {
  const dataDir = opts.dataDir ?? mkdtempSync(path.join(tmpdir(), 'ditto-e2e-'));
  const [cmd, args] = opts.maxFileBytes
    ? ['prlimit', [`--fsize=${opts.maxFileBytes}`, '--', serverBinary(), 'serve']]
    : [serverBinary(), ['serve']];
  const child = spawn(cmd, args, {
    env: { ...process.env, ...opts.env, PORT: '0', DATA_DIR: dataDir, WEB_DIR: path.join(ROOT, 'web', 'dist') },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr += d));
  const appUrl = await new Promise<string>((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`server did not start in 30 s:\n${out}\n${stderr}`)), 30_000);
    child.stdout!.on('data', (d) => {
      out += d;
      const m = /Open (http:\/\/\S+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`server exited with ${code}:\n${out}\n${stderr}`));
    });
  });
  const u = new URL(appUrl);
  const token = new URLSearchParams(u.hash.slice(1)).get('token') ?? '';
  return {
    url: u.origin,
    token,
    dataDir,
    process: child,
    delta: (opts.env?.DITTO_DELTA ?? process.env.DITTO_DELTA) !== '0',
    appUrl,
    async stop({ keepData = false, signal = 'SIGTERM' } = {}) {
      // A process ended by a signal has no exit code, only a signal code.
      if (child.exitCode === null && child.signalCode === null) {
        const exited = new Promise((r) => child.once('exit', r));
        child.kill(signal);
        await exited;
      }
      if (!keepData && !opts.dataDir) rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** GET `p` under the default repository with the server's token; expects 200 and JSON. */
export async function repoJson<T>(server: RunningServer, p: string): Promise<T> {
  const res = await fetch(`${server.url}/api/v1/repos/default${p}`, {
    headers: { Authorization: `Bearer ${server.token}` },
  });
  expect(res.status, p).toBe(200);
  return (await res.json()) as T;
}

/**
 * Waits until the server's HiDeStore mover and delta pass, which a commit starts in the
 * background, have finished (a dry-run prune runs it to the end and deletes nothing), so that container
 * figures and chunk places read next stay put. With `readsDone`, also until the search
 * cache's warm-up, which follows them, has covered the newest version: it reads the chunks
 * too, and a test that damages one on disk must find it where the warm-up did not set it
 * aside first.
 */
export async function settleLayout(server: RunningServer, { readsDone = false } = {}): Promise<void> {
  const { versions } = await repoJson<{ versions: { id: number }[] }>(server, '/versions');
  const newest = Math.max(0, ...versions.map((v) => v.id));
  /** Waits until the background step `/stats` names as `step` has handled the newest version. */
  const handled = (step: 'delta_pass' | 'search_warm', message: string) =>
    expect
      .poll(async () => (await repoJson<Record<string, { version: number } | null>>(server, '/stats'))[step]?.version, {
        timeout: 60_000,
        message,
      })
      .toBeGreaterThanOrEqual(newest);
  // The delta pass follows the mover in the same background thread and re-stores chunks:
  // wait until it has handled the newest version (unless the server runs without it).
  if (newest > 0 && server.delta) await handled('delta_pass', 'the delta pass handles the newest version');
  if (newest > 0 && readsDone) await handled('search_warm', "the search cache's warm-up covers the newest version");
  const res = await fetch(`${server.url}/api/v1/repos/default/prune`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${server.token}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ dry_run: true }),
  });
  expect(res.status, 'prune (dry run)').toBe(200);
}
