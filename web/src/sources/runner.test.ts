import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Api } from '../api/client';
import type { JobStore } from '../backup/jobstore';
import type { PickedFolder } from '../input/folder';
import type { CorePool } from '../worker/pool';
import { BackupRunner, refusedMessage, type RunRequest } from './runner';

// The job itself is not under test: only what the runner does around it. A job ends as `ends.next` says.
const ends = vi.hoisted(() => ({ next: {} as Record<string, unknown> }));
vi.mock('../backup/backup', () => ({
  BackupJob: class {
    progress = null;
    run = async () => ends.next;
  },
  folderName: () => undefined,
}));

function runner() {
  const deps = { api: { repo: 'r', base: 'http://s' } as Api, pool: {} as CorePool, jobs: {} as JobStore };
  return new BackupRunner({ ...deps, openIndex: async () => null });
}

function request(source: string, extra: Partial<RunRequest> = {}): RunRequest {
  const picked = { root: source, files: [], dirs: [], skipped: [] } as unknown as PickedFolder;
  return { picked, source, settings: { excludes: [], sampleRate: 0, readAll: false } as never, ...extra };
}

/** A promise and its resolve, to hold a run at its `stillWanted` step (before any job). */
function gate() {
  let open!: (v: boolean) => void;
  const p = new Promise<boolean>((r) => (open = r));
  return { p, open };
}

describe('BackupRunner busy in this tab', () => {
  afterEach(() => vi.restoreAllMocks());

  it('is busy from run() on, before the job exists, and says why a click then did not start', async () => {
    vi.spyOn(console, 'warn').mockImplementation(() => {});
    const r = runner();
    const g = gate();
    // A scheduled backup, still taking the lock and looking again whether it is due.
    const first = r.run(request('Photos', { background: true, stillWanted: () => g.p }));
    expect(r.state.job).toBeNull();
    expect(r.state.active).toEqual({ source: 'Photos' });
    expect(r.running).toBe(true);

    // A click that finished reading its folder meanwhile.
    expect(await r.run(request('Documents'))).toBeNull();
    expect(r.state.refused).toEqual({ source: 'Documents', running: 'Photos' });
    expect(refusedMessage(r.state.refused!)).toContain('“Documents” was not backed up');

    // Another scheduled one waits for its next tick without a word.
    expect(await r.run(request('Music', { background: true }))).toBeNull();
    expect(r.state.refused).toEqual({ source: 'Documents', running: 'Photos' });

    g.open(false);
    expect(await first).toBeNull();
    expect(r.state.active).toBeNull();
    expect(r.running).toBe(false);
    // Still shown until the user starts another backup.
    expect(r.state.refused).not.toBeNull();
    const g2 = gate();
    const next = r.run(request('Documents', { stillWanted: () => g2.p }));
    expect(r.state.refused).toBeNull();
    g2.open(false);
    await next;
  });

  it('tells its subscribers when it becomes busy, so buttons disable from the start', async () => {
    vi.spyOn(console, 'warn').mockImplementation(() => {});
    const r = runner();
    const seen: (string | null)[] = [];
    r.subscribe(() => seen.push(r.state.active?.source ?? null));
    const g = gate();
    const first = r.run(request('Photos', { stillWanted: () => g.p }));
    expect(seen[0]).toBe('Photos');
    g.open(false);
    await first;
    expect(seen.at(-1)).toBeNull();
  });
});

describe('BackupRunner committed', () => {
  afterEach(() => {
    vi.restoreAllMocks();
    vi.unstubAllGlobals();
  });

  it('counts the versions its backups commit, not those that fail, and tells its subscribers', async () => {
    vi.spyOn(console, 'warn').mockImplementation(() => {});
    vi.stubGlobal('document', { title: 'Ditto', visibilityState: 'visible' });
    vi.stubGlobal('addEventListener', () => {});
    vi.stubGlobal('removeEventListener', () => {});
    const r = runner();
    const seen: number[] = [];
    r.subscribe(() => seen.push(r.state.committed));
    expect(r.state.committed).toBe(0);
    ends.next = { phase: 'done', version: { id: 7 } };
    await r.run(request('Photos'));
    expect(r.state.committed).toBe(1);
    expect(seen).toContain(1);
    ends.next = { phase: 'failed', error: 'the server is gone' };
    await r.run(request('Photos'));
    expect(r.state.committed).toBe(1);
    ends.next = { phase: 'done', version: { id: 8 } };
    await r.run(request('Photos'));
    expect(r.state.committed).toBe(2);
  });
});
