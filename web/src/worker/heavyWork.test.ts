import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { beginHeavyWork, heavyWorkRunning, runWhenQuiet } from './heavyWork';

/** A task that runs until stopped or until `finish()`; records its starts. */
function controllable() {
  const starts: number[] = [];
  let finish: (() => void) | null = null;
  const task = (stop: AbortSignal) =>
    new Promise<boolean>((resolve) => {
      starts.push(Date.now());
      finish = () => resolve(true);
      stop.addEventListener('abort', () => resolve(false));
    });
  return { starts, task, finish: () => finish?.() };
}

describe('heavy work', () => {
  beforeEach(() => vi.useFakeTimers({ now: 0 }));
  afterEach(() => vi.useRealTimers());

  it('counts what runs; an end is counted once', () => {
    const a = beginHeavyWork();
    const b = beginHeavyWork();
    a();
    a();
    expect(heavyWorkRunning()).toBe(true);
    b();
    expect(heavyWorkRunning()).toBe(false);
  });

  it('runs a task once the page has been quiet for the delay', async () => {
    const t = controllable();
    const done = runWhenQuiet(t.task, 2000);
    await vi.advanceTimersByTimeAsync(1999);
    expect(t.starts).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(t.starts).toEqual([2000]);
    t.finish();
    await done;
  });

  it('waits for heavy work to end, then for the delay again', async () => {
    const t = controllable();
    const done = runWhenQuiet(t.task, 2000);
    await vi.advanceTimersByTimeAsync(1000);
    const end = beginHeavyWork();
    await vi.advanceTimersByTimeAsync(5000);
    expect(t.starts).toEqual([]);
    end();
    await vi.advanceTimersByTimeAsync(2000);
    expect(t.starts).toEqual([8000]);
    t.finish();
    await done;
  });

  it('stops a running task when heavy work begins and runs it again after', async () => {
    const t = controllable();
    let settled = false;
    const done = runWhenQuiet(t.task, 2000).then(() => (settled = true));
    await vi.advanceTimersByTimeAsync(2500);
    expect(t.starts).toEqual([2000]);
    const end = beginHeavyWork();
    await vi.advanceTimersByTimeAsync(10_000);
    expect(t.starts).toEqual([2000]);
    expect(settled).toBe(false);
    end();
    await vi.advanceTimersByTimeAsync(2000);
    expect(t.starts).toEqual([2000, 14_500]);
    t.finish();
    await done;
    expect(settled).toBe(true);
    // Finished: later heavy work starts nothing.
    beginHeavyWork()();
    await vi.advanceTimersByTimeAsync(10_000);
    expect(t.starts).toHaveLength(2);
  });

  it("rejects with the task's error and runs it no more", async () => {
    let runs = 0;
    const done = runWhenQuiet(() => {
      runs++;
      return Promise.reject(new Error('pool ended'));
    }, 100);
    const failed = expect(done).rejects.toThrow('pool ended');
    await vi.advanceTimersByTimeAsync(100);
    await failed;
    beginHeavyWork()();
    await vi.advanceTimersByTimeAsync(1000);
    expect(runs).toBe(1);
  });
});
