/**
 * The page's heavy work in progress (a restore, with its check of a folder's files, and a
 * backup), so that work done only to prepare for later keeps off the cores meanwhile.
 *
 * On a machine of two cores a restore or a backup uses both: the search's first-search
 * warm-up (search/workers.ts), run beside one, takes from it what it saves a later search,
 * and the browser's compiling of what the warm-up ran shares the same cores
 * (docs/BENCHMARKS.md, "The restore's code optimised before the click"). Such work runs
 * through [`runWhenQuiet`]: once no heavy work has run for a while, stopped when some begins,
 * and run again once it ends.
 */

let running = 0;
const onBegin = new Set<() => void>();
const onQuiet = new Set<() => void>();

/** Marks heavy work begun; the function returned marks it ended (once, however often called). */
export function beginHeavyWork(): () => void {
  running++;
  for (const listener of [...onBegin]) listener();
  let ended = false;
  return () => {
    if (ended) return;
    ended = true;
    running--;
    if (running === 0) for (const listener of [...onQuiet]) listener();
  };
}

/** Whether some heavy work is in progress. */
export function heavyWorkRunning(): boolean {
  return running > 0;
}

/**
 * Runs `task` once the page has done no heavy work for `delayMs` (counted again after each
 * heavy work ends). `stop` is aborted when heavy work begins while the task runs; the task
 * then ends early and resolves `false`, and it is run again the same way. Resolves once a run
 * resolves `true`; rejects with a run's error.
 */
export function runWhenQuiet(task: (stop: AbortSignal) => Promise<boolean>, delayMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    let timer: ReturnType<typeof setTimeout> | undefined;
    /** The run in progress, if any. */
    let run: AbortController | null = null;
    const arm = () => {
      clearTimeout(timer);
      if (!running && !run) timer = setTimeout(start, delayMs);
    };
    const begun = () => {
      clearTimeout(timer);
      run?.abort();
    };
    onQuiet.add(arm);
    onBegin.add(begun);
    const start = () => {
      run = new AbortController();
      task(run.signal).then(
        (finished) => {
          run = null;
          if (!finished) return arm();
          onQuiet.delete(arm);
          onBegin.delete(begun);
          resolve();
        },
        (e: unknown) => {
          run = null;
          onQuiet.delete(arm);
          onBegin.delete(begun);
          reject(e);
        },
      );
    };
    arm();
  });
}
