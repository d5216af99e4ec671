/**
 * "Back up every N minutes while this tab is open": a timer in the page (no service worker,
 * so nothing runs once every tab is closed). A due source is backed up from its kept folder
 * handle when the browser still grants reading it; one that needs the permission again waits
 * for a click on "Back up again" (a timer cannot ask), and the Sources view says so
 * (`scheduleProblems`). Several tabs share the work through the runner's lock: a tab that
 * finds it held skips the tick.
 */
import { useEffect } from 'react';
import { ExternalStore } from '../ui/externalStore';
import { sourceSettings } from '../backup/sourcesettings';
import { Excludes } from '../input/excludes';
import { folderAgain } from './again';
import { nothingToBackUp, type BackupRunner } from './runner';
import { sourceFolders, type SourceFolder } from './store';

/** How often the page looks for due sources (one IndexedDB read when none is due). */
export const TICK_MS = 10_000;

/**
 * Why a due source's scheduled backup did not run, per source, until one runs: what the
 * Sources view shows beside the source. Kept in the page (a reload forgets it, and the next
 * tick finds the same problem again).
 */
export const scheduleProblems = (() => {
  const problems = new ExternalStore<ReadonlyMap<string, string>>(new Map());
  return {
    get: problems.get,
    subscribe: problems.subscribe,
    set(source: string, problem: string | null) {
      const now = problems.get();
      if ((now.get(source) ?? null) === problem) return;
      const next = new Map(now);
      if (problem === null) next.delete(source);
      else next.set(source, problem);
      problems.set(next);
    },
  };
})();

/** Whether `row` is due at `now`: a schedule set and its last backup at least that long ago. */
export function due(row: SourceFolder, now: number): boolean {
  return row.everyMinutes !== null && row.everyMinutes > 0 && now - row.usedAt >= row.everyMinutes * 60_000;
}

/** The runners whose tick is under way: a tick that finds its runner here skips. */
const ticking = new WeakSet<BackupRunner>();

/**
 * Runs the due sources' backups, one at a time; what blocked one is kept for the view, not
 * thrown. One tick at a time per runner, and none while a backup of the repository runs in
 * any tab: a tick's folder scan can outlast the next tick. A source is looked at again before
 * its folder is scanned and once the lock is held, so one another tab (or tick) backed up
 * meanwhile is not backed up twice.
 */
export async function runDue(runner: BackupRunner, now = Date.now()) {
  if (ticking.has(runner)) return;
  ticking.add(runner);
  try {
    if (!(await runner.busyAnywhere())) await runDueSources(runner, now);
  } finally {
    ticking.delete(runner);
  }
}

async function runDueSources(runner: BackupRunner, now: number) {
  const folders = await sourceFolders();
  const stillDue = async (source: string) => {
    const row = await folders.get(runner.repo, source);
    return !!row?.handle && due(row, Date.now());
  };
  const rows = (await folders.list(runner.repo)).filter((r) => due(r, now) && r.handle);
  for (const row of rows.sort((a, b) => a.usedAt - b.usedAt)) {
    if (runner.running) return;
    try {
      if (!(await stillDue(row.source))) continue;
      const settings = await (await sourceSettings()).get(runner.repo, row.source);
      const picked = await folderAgain(row, false, new Excludes(settings.excludes).leaveOut);
      if (!picked || picked === 'pick') continue;
      const nothing = nothingToBackUp(picked, settings);
      if (nothing) {
        scheduleProblems.set(row.source, `${nothing}: the scheduled backup did not run.`);
        continue;
      }
      const end = await runner.run({
        picked,
        source: row.source,
        settings,
        background: true,
        stillWanted: () => stillDue(row.source),
      });
      scheduleProblems.set(
        row.source,
        !end
          ? null
          : end.phase !== 'done'
            ? `The scheduled backup ${end.phase}: ${end.message ?? 'no reason given'}.`
            : end.skipped.length
              ? `The scheduled backup is incomplete: ${end.skipped.length} of the picked files are not in version #${end.version?.id}.`
              : null,
      );
    } catch (e) {
      scheduleProblems.set(row.source, e instanceof Error ? e.message : String(e));
    }
  }
}

/** Keeps the schedule running while the page is open. */
export function useSchedule(runner: BackupRunner | null) {
  useEffect(() => {
    if (!runner) return;
    const timer = setInterval(() => void runDue(runner), TICK_MS);
    return () => clearInterval(timer);
  }, [runner]);
}
