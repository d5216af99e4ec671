/**
 * A value kept outside React's state, whose changes reach the components that read it with
 * `useSyncExternalStore(store.subscribe, store.get)`: only those render again, not the tree
 * that holds the value (a restore's progress, the backup runner's state, the schedule's
 * problems). `get` and `subscribe` are bound, so they can be handed over as they are.
 */
export class ExternalStore<T> {
  private listeners = new Set<() => void>();

  constructor(private value: T) {}

  get = (): T => this.value;

  /** Calls `fn` after every `set`; returns the unsubscribe. */
  subscribe = (fn: () => void): (() => void) => {
    this.listeners.add(fn);
    return () => void this.listeners.delete(fn);
  };

  /** Replaces the value (or derives it from the current one) and tells every listener. */
  set = (next: T | ((current: T) => T)): void => {
    this.value = typeof next === 'function' ? (next as (current: T) => T)(this.value) : next;
    for (const fn of this.listeners) fn();
  };
}
