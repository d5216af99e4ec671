/**
 * "Back up every N minutes while this tab is open": a timer in the page (no service worker,
 * so nothing runs once every tab is closed). A due source is backed up from its kept folder
 * handle when the browser still grants reading it; one that needs the permission again waits
 * for a click on "Back up again" (a timer cannot ask), and the Sources view says so
 * (`scheduleProblems`). Several tabs share the work through the runner's lock: a tab that
 * finds it held skips the tick.
 */
import { useEffect } from 'react';
import { sourceSettings } from '../backup/sourcesettings';
import { Excludes } from '../input/excludes';
import { folderAgain } from './again';
import type { BackupRunner } from './runner';
import { sourceFolders, type SourceFolder } from './store';

/** How often the page looks for due sources (one IndexedDB read when none is due). */
export const TICK_MS = 10_000;

/**
 * Why a due source's scheduled backup did not run, per source, until one runs: what the
 * Sources view shows beside the source. Kept in the page (a reload forgets it, and the next
 * tick finds the same problem again).
 */
export const scheduleProblems = (() => {
  let problems: ReadonlyMap<string, string> = new Map();
  const listeners = new Set<() => void>();
  const set = (source: string, problem: string | null) => {
    if ((problems.get(source) ?? null) === problem) return;
    const next = new Map(problems);
    if (problem === null) next.delete(source);
    else next.set(source, problem);
    problems = next;
    for (const fn of listeners) fn();
  };
  return {
    get: () => problems,
    set,
    subscribe(fn: () => void) {
      listeners.add(fn);
      return () => void listeners.delete(fn);
    },
  };
})();

/** Whether `row` is due at `now`: a schedule set and its last backup at least that long ago. */
export function due(row: SourceFolder, now: number): boolean {
  return row.everyMinutes !== null && row.everyMinutes > 0 && now - row.usedAt >= row.everyMinutes * 60_000;
}

/** Runs the due sources' backups, one at a time; what blocked one is kept for the view, not thrown. */
export async function runDue(runner: BackupRunner, now = Date.now()) {
  if (runner.running) return;
  const rows = (await (await sourceFolders()).list(runner.repo)).filter((r) => due(r, now) && r.handle);
  for (const row of rows.sort((a, b) => a.usedAt - b.usedAt)) {
    if (runner.running) return;
    try {
      const settings = await (await sourceSettings()).get(runner.repo, row.source);
      const picked = await folderAgain(row, false, new Excludes(settings.excludes).leaveOut);
      if (!picked || picked === 'pick') continue;
      if (picked.files.length === 0) {
        scheduleProblems.set(
          row.source,
          `The folder “${row.folder}” holds no files: the scheduled backup did not run.`,
        );
        continue;
      }
      const end = await runner.run({ picked, source: row.source, settings, background: true });
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
