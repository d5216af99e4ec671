/**
 * Per-source backup settings, kept in IndexedDB (database `ditto-sources`) by repository and
 * source label: how much of the files that look unchanged each backup reads anyway, and which
 * files it leaves out (exclude patterns, gitignore syntax: input/excludes.ts).
 */
import { openDB, type IDBPDatabase } from 'idb';
import { normalizePatterns } from '../input/excludes';
import { DEFAULT_SAMPLE_RATE } from './change';

export interface SourceSettings {
  /** Share (0..1) of the files trusted as unchanged that are read anyway and compared. */
  sampleRate: number;
  /** Read every file, trusting no size and mtime. */
  readAll: boolean;
  /** Exclude patterns, one gitignore line each. */
  excludes: string[];
}

export const DEFAULT_SETTINGS: SourceSettings = { sampleRate: DEFAULT_SAMPLE_RATE, readAll: false, excludes: [] };

interface Row extends SourceSettings {
  key: string;
}

/** Settings as stored, made safe to use (a rate outside 0..1 or not a number is the default). */
export function normalizeSettings(s: Partial<SourceSettings> | undefined): SourceSettings {
  const rate = s?.sampleRate;
  return {
    sampleRate: typeof rate === 'number' && rate >= 0 && rate <= 1 ? rate : DEFAULT_SETTINGS.sampleRate,
    readAll: s?.readAll === true,
    excludes: Array.isArray(s?.excludes)
      ? normalizePatterns(s.excludes.filter((l): l is string => typeof l === 'string'))
      : [],
  };
}

export class SourceSettingsStore {
  private constructor(private db: IDBPDatabase) {}

  static async open(name = 'ditto-sources'): Promise<SourceSettingsStore> {
    const db = await openDB(name, 1, {
      upgrade(db) {
        db.createObjectStore('settings', { keyPath: 'key' });
      },
      blocking() {
        db.close();
      },
    });
    return new SourceSettingsStore(db);
  }

  static key(repo: string, source: string) {
    return `${repo}\u0000${source}`;
  }

  async get(repo: string, source: string): Promise<SourceSettings> {
    const row: Row | undefined = await this.db.get('settings', SourceSettingsStore.key(repo, source));
    return normalizeSettings(row);
  }

  async put(repo: string, source: string, s: SourceSettings) {
    const row: Row = { key: SourceSettingsStore.key(repo, source), ...normalizeSettings(s) };
    await this.db.put('settings', row);
  }

  close() {
    this.db.close();
  }
}

let shared: Promise<SourceSettingsStore> | null = null;

/** The page's settings store, opened once. */
export function sourceSettings(): Promise<SourceSettingsStore> {
  shared ??= SourceSettingsStore.open();
  return shared;
}
