/**
 * The order in which a search worker decodes its jobs (docs/SEARCH.md, "Work split by
 * chain"): in the order they came, their ranges downloading side by side, so that the links
 * an earlier job decodes are in the cache before a later job, whose chains run through
 * them, looks for its bases. A job that waits for bases from the server yields its turn,
 * and the next one goes on as far as its bases are at hand; what a job still lacks then it
 * fetches once every job before it has ended, since those may have been about to decode it.
 */
export interface Turn {
  /** Resolves once every earlier job waits for the server's bases or has ended. */
  yielded: Promise<void>;
  /** Resolves once every earlier job has ended. */
  done: Promise<void>;
  /** Lets the jobs after this one go on while it waits for the server. */
  yieldTurn(): void;
}

export class Turns {
  private last: { yielded: Promise<void>; done: Promise<void> } = {
    yielded: Promise.resolve(),
    done: Promise.resolve(),
  };

  /**
   * Runs `job` in the next turn, which is taken at once (the jobs' order is the order of
   * the calls). The turn is yielded and ended however `job` ends, a throw before its first
   * `await` included: a turn never released would hold every later job of the worker.
   */
  async run<T>(job: (turn: Turn) => Promise<T>): Promise<T> {
    const prev = this.last;
    let yieldTurn = () => {};
    let endTurn = () => {};
    const yielded = new Promise<void>((resolve) => (yieldTurn = resolve));
    const ended = new Promise<void>((resolve) => (endTurn = resolve));
    // Done once this job and every one before it have ended: a job that ends without
    // waiting for the ones before it (it needed nothing of theirs) does not end their turns.
    this.last = { yielded, done: Promise.all([prev.done, ended]).then(() => {}) };
    try {
      return await job({ yielded: prev.yielded, done: prev.done, yieldTurn });
    } finally {
      yieldTurn();
      endTurn();
    }
  }
}
