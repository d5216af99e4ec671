import { describe, expect, it } from 'vitest';
import { Turns } from './turns';

/** Lets every callback queued so far run. */
const settle = () => new Promise((r) => setTimeout(r, 0));

/** A promise and the function that resolves it. */
function gate() {
  let open = () => {};
  const opened = new Promise<void>((r) => (open = r));
  return { opened, open };
}

describe("a search worker's turns (the order its jobs decode in)", () => {
  it('a job waits for every earlier job to end, not only the one just before it', async () => {
    const turns = new Turns();
    const log: string[] = [];
    const a = gate();
    // A waits for the server's bases, yielding its turn; B needs nothing and ends; C lacks
    // a base A is fetching, so it waits for the jobs before it to end.
    const jobs = [
      turns.run(async (t) => {
        t.yieldTurn();
        await a.opened;
        log.push('A ended');
      }),
      turns.run(async (t) => {
        await t.yielded;
        log.push('B ended');
      }),
      turns.run(async (t) => {
        await t.yielded;
        log.push('C goes on');
        await t.done;
        log.push('C after the jobs before it');
      }),
    ];
    await settle();
    expect(log).toEqual(['B ended', 'C goes on']);
    a.open();
    await Promise.all(jobs);
    expect(log).toEqual(['B ended', 'C goes on', 'A ended', 'C after the jobs before it']);
  });

  it('a job that has not yielded holds the next one back until it yields', async () => {
    const turns = new Turns();
    const log: string[] = [];
    const a = gate();
    const first = turns.run(async (t) => {
      await a.opened;
      log.push('A yields');
      t.yieldTurn();
      await settle();
      log.push('A ended');
    });
    const second = turns.run(async (t) => {
      await t.yielded;
      log.push('B goes on');
      await t.done;
      log.push('B after A');
    });
    await settle();
    expect(log).toEqual([]);
    a.open();
    await Promise.all([first, second]);
    expect(log).toEqual(['A yields', 'B goes on', 'A ended', 'B after A']);
  });

  it('a job that throws, even before its first await, releases its turn', async () => {
    const turns = new Turns();
    const failed = turns.run(() => {
      throw new Error('set-up failed');
    });
    const rejected = turns.run(async () => {
      await Promise.resolve();
      throw new Error('decode failed');
    });
    const next = turns.run(async (t) => {
      await t.yielded;
      await t.done;
      return 'ran';
    });
    await expect(failed).rejects.toThrow('set-up failed');
    await expect(rejected).rejects.toThrow('decode failed');
    await expect(next).resolves.toBe('ran');
  });
});
