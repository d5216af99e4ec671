import 'fake-indexeddb/auto';
import { beforeEach, describe, expect, it, vi } from 'vitest';
import type { PickedFolder } from '../input/folder';
import type { BackupRunner, RunRequest } from './runner';
import { runDue, scheduleProblems } from './schedule';
import { sourceFolders } from './store';

/** The folder scan, slower than a tick's other steps, as a real folder's is. */
const scans = vi.hoisted(() => ({ count: 0, ms: 40, files: 1 as number }));
vi.mock('./again', () => ({
  folderAgain: async (): Promise<PickedFolder> => {
    scans.count++;
    await new Promise((r) => setTimeout(r, scans.ms));
    const file = new File(['x'], 'a.txt');
    return {
      root: 'Folder',
      files: Array.from({ length: scans.files }, () => ({ path: 'Folder/a.txt', file })),
      dirs: [],
      skipped: [],
    } as unknown as PickedFolder;
  },
}));

/**
 * Tabs of one browser: their runners share one lock (as the Web Lock of the repository, a
 * run that finds it held does nothing) and the IndexedDB store; a backup takes `ms` and, as
 * the real runner does, records the source's folder (its `usedAt`) when it starts.
 */
function tabs(n: number, repo: string, ms = 30) {
  const lock = { held: false };
  const runs: string[] = [];
  const runner = () => {
    const r = {
      repo,
      running: false,
      busyAnywhere: async () => lock.held,
      async run(req: RunRequest) {
        if (lock.held) return null;
        lock.held = r.running = true;
        try {
          if (req.stillWanted && !(await req.stillWanted())) return null;
          await (await sourceFolders()).remember(repo, req.source, 'Folder', {} as FileSystemDirectoryHandle);
          runs.push(req.source);
          await new Promise((res) => setTimeout(res, ms));
          return { phase: 'done', skipped: [], version: { id: runs.length } };
        } finally {
          lock.held = r.running = false;
        }
      },
    };
    return r as unknown as BackupRunner;
  };
  return { runners: Array.from({ length: n }, runner), runs };
}

let seq = 0;
/** A repository with one source due for a scheduled backup (last backed up two minutes ago). */
async function dueSource(): Promise<string> {
  const repo = `repo-${++seq}`;
  const folders = await sourceFolders();
  await folders.remember(repo, 'S', 'Folder', {} as FileSystemDirectoryHandle);
  await folders.setEvery(repo, 'S', 1);
  const row = (await folders.get(repo, 'S'))!;
  // Aged through the store's own write path: remembered, then its time set back.
  const spy = vi.spyOn(Date, 'now').mockReturnValue(row.usedAt - 120_000);
  await folders.remember(repo, 'S', 'Folder', {} as FileSystemDirectoryHandle);
  spy.mockRestore();
  return repo;
}

describe('runDue', () => {
  beforeEach(() => {
    scans.count = 0;
    scans.files = 1;
  });

  it('backs a due source up once when two ticks of one tab overlap', async () => {
    const repo = await dueSource();
    const { runners, runs } = tabs(1, repo);
    await Promise.all([runDue(runners[0]), runDue(runners[0])]);
    expect(runs).toEqual(['S']);
    expect(scans.count).toBe(1);
  });

  it('backs a due source up once when two tabs tick together', async () => {
    const repo = await dueSource();
    const { runners, runs } = tabs(2, repo, 5);
    // The second tab's scan ends after the first tab's backup: it finds the source not due.
    scans.ms = 40;
    const first = runDue(runners[0]);
    await new Promise((r) => setTimeout(r, 10));
    await Promise.all([first, runDue(runners[1])]);
    expect(runs).toEqual(['S']);
    // Nothing is due any more: later ticks neither scan nor back up.
    await runDue(runners[1]);
    expect(runs).toEqual(['S']);
    expect(scans.count).toBeLessThanOrEqual(2);
  });

  it('does not back up a folder whose every file is excluded, and says why', async () => {
    const repo = await dueSource();
    const { runners, runs } = tabs(1, repo);
    const { sourceSettings } = await import('../backup/sourcesettings');
    const store = await sourceSettings();
    await store.put(repo, 'S', { ...(await store.get(repo, 'S')), excludes: ['*.txt'] });
    await runDue(runners[0]);
    expect(runs).toEqual([]);
    expect(scheduleProblems.get().get('S')).toMatch(/^Every file of the folder “Folder” is excluded/);
  });
});
