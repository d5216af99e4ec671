import { useCallback, useEffect, useRef, useState, useSyncExternalStore } from 'react';
import './sources.css';
import type { Api } from '../api/client';
import { sourceSettings } from '../backup/sourcesettings';
import { Excludes } from '../input/excludes';
import { fromFileList, type PickedFolder } from '../input/folder';
import { permitted } from '../input/permission';
import { AgainError, canKeepFolders, folderAgain } from '../sources/again';
import { notificationsOn, notificationsSupported, setNotifications } from '../sources/notify';
import { ELSEWHERE_MESSAGE, nothingToBackUp, refusedMessage, type BackupRunner } from '../sources/runner';
import { scheduleProblems } from '../sources/schedule';
import { sourceFolders } from '../sources/store';
import { summarize, type Health, type SourceSummary } from '../sources/summary';
import { bytes } from './format';
import { Button } from '../ui/Button';

/** Every source with its last backup, size, versions and health; back one up again in a click. */
export function SourcesPanel({ api, runner }: { api: Api; runner: BackupRunner }) {
  const [list, setList] = useState<SourceSummary[] | null>(null);
  /** Why the list could not be read (each read clears it). */
  const [error, setError] = useState<string | null>(null);
  /** Why notifications could not be turned on (apart from the list's error, which a read clears). */
  const [notifyProblem, setNotifyProblem] = useState<string | null>(null);
  const [note, setNote] = useState<{ source: string; text: string; kind: 'error' | 'ok' } | null>(null);
  const [notify, setNotify] = useState(notificationsOn);
  /** Sources whose kept folder the browser will not let the page read without asking again. */
  const [lapsed, setLapsed] = useState<ReadonlySet<string>>(new Set());
  const problems = useSyncExternalStore(scheduleProblems.subscribe, scheduleProblems.get);
  const run = useSyncExternalStore(runner.subscribe, () => runner.state);
  /** The source whose folder the file input is picking (browsers without the API). */
  const picking = useRef<string | null>(null);
  const input = useRef<HTMLInputElement>(null);

  /** Counts reads: one that ends a backup may be answered before an older one, which is dropped. */
  const reads = useRef(0);
  const load = useCallback(async () => {
    const read = ++reads.current;
    try {
      const [versions, kept] = await Promise.all([api.versions(), sourceFolders().then((s) => s.list(api.repo))]);
      if (read !== reads.current) return;
      setList(summarize(versions, kept));
      setError(null);
      // Only read, never asked: a prompt needs the click on "Back up again".
      const states = await Promise.all(
        kept.map(async (k) => [k.source, !!k.handle && !(await permitted(k.handle, 'read', false))] as const),
      );
      if (read !== reads.current) return;
      setLapsed(new Set(states.filter(([, l]) => l).map(([source]) => source)));
    } catch (e) {
      if (read === reads.current) setError(e instanceof Error ? e.message : String(e));
    }
  }, [api]);
  useEffect(() => void load(), [load]);
  // A backup that ends (here, in Back up, or by the schedule) changes the figures. Busy from
  // the runner's start, so that a click is not taken while the lock is being taken.
  const running = run.active !== null;
  useEffect(() => {
    if (!running) void load();
  }, [running, load]);

  const backUp = async (source: string, picked: PickedFolder) => {
    const settings = await (await sourceSettings()).get(api.repo, source);
    const nothing = nothingToBackUp(picked, settings);
    if (nothing) {
      setNote({ source, kind: 'error', text: `${nothing}: nothing was backed up.` });
      return;
    }
    const end = await runner.run({ picked, source, settings });
    const refused = runner.state.refused;
    if (!end && refused?.source === source) setNote({ source, kind: 'error', text: refusedMessage(refused) });
    else if (end?.phase === 'done' && end.version && end.skipped.length) {
      // Not "stored": some picked files are not in it (docs/BACKUP.md, incomplete versions).
      setNote({
        source,
        kind: 'error',
        text: `Version #${end.version.id} is incomplete: ${end.skipped.length} of the picked files are not in it.`,
      });
    } else if (end?.phase === 'done' && end.version) {
      scheduleProblems.set(source, null);
      setNote({ source, kind: 'ok', text: `Version #${end.version.id} stored.` });
    } else if (end) setNote({ source, kind: 'error', text: end.message ?? `The backup ${end.phase}.` });
  };

  const again = async (s: SourceSummary) => {
    setNote(null);
    const row = s.kept ?? {
      key: '',
      repo: api.repo,
      source: s.source,
      folder: s.folder ?? s.source,
      usedAt: 0,
      everyMinutes: null,
    };
    try {
      // The click's activation, which the permission prompt needs, outlasts this read.
      const settings = await (await sourceSettings()).get(api.repo, s.source);
      const picked = await folderAgain(row, true, new Excludes(settings.excludes).leaveOut);
      if (picked === 'pick') {
        picking.current = s.source;
        input.current?.click();
      } else if (picked) await backUp(s.source, picked);
    } catch (e) {
      setNote({ source: s.source, kind: 'error', text: e instanceof AgainError ? e.message : String(e) });
    }
  };

  /** Saves the source's schedule; false (and the reason shown) when the store was not written. */
  const setEvery = async (s: SourceSummary, minutes: number | null): Promise<boolean> => {
    try {
      await (await sourceFolders()).setEvery(api.repo, s.source, minutes);
    } catch (e) {
      setNote({ source: s.source, kind: 'error', text: `The schedule was not saved: ${message(e)}` });
      return false;
    }
    // Why a scheduled backup did not run is no news once there is no schedule.
    if (minutes === null) scheduleProblems.set(s.source, null);
    await load();
    return true;
  };

  const toggleNotify = async (on: boolean) => {
    const got = await setNotifications(on);
    setNotify(notificationsOn());
    setNotifyProblem(
      !on || got === 'granted'
        ? null
        : got === 'unsupported'
          ? 'This browser shows no notifications.'
          : 'The browser did not allow notifications: allow them in the site settings, then turn this on again.',
    );
  };

  const p = run.progress;
  return (
    <section className="sources" data-testid="sources-panel" aria-labelledby="sources-title">
      <h2 id="sources-title">Sources</h2>
      {!canKeepFolders() && (
        <p className="warn" data-testid="sources-no-fsa">
          This browser cannot keep a folder between visits (it lacks the File System Access API): “Back up again” asks
          you to choose the folder each time, and backups every N minutes are not available.
        </p>
      )}
      {error && (
        <p className="error" data-testid="sources-error" role="alert">
          Reading the sources failed: {error} <Button onClick={() => void load()}>Try again</Button>
        </p>
      )}
      {notifyProblem && (
        <p className="error" data-testid="sources-notify-problem" role="alert">
          {notifyProblem}
        </p>
      )}
      {run.elsewhere && !running && (
        <p className="warn" data-testid="backup-elsewhere" role="alert">
          “{run.elsewhere.source}” was not backed up: {ELSEWHERE_MESSAGE}
        </p>
      )}
      {running && p && (
        <p className="muted" data-testid="sources-running" data-source={p.source} aria-live="polite">
          Backing up “{p.source}”: {p.phase}, {p.filesDone} of {p.filesTotal} files.
        </p>
      )}
      {notificationsSupported() && (
        <label className="sources-notify">
          <input
            type="checkbox"
            data-testid="sources-notify"
            checked={notify}
            onChange={(e) => void toggleNotify(e.target.checked)}
          />{' '}
          Notify me when a backup ends while this tab is in the background
        </label>
      )}
      {list && list.length === 0 && (
        <p data-testid="sources-empty">No sources yet: back up a folder in “Back up” and it is listed here.</p>
      )}
      {list && list.length > 0 && (
        <table className="files sources-table">
          <thead>
            <tr>
              <th scope="col">Source</th>
              <th scope="col">Folder</th>
              <th scope="col">Last backup</th>
              <th scope="col">Size</th>
              <th scope="col">Versions</th>
              <th scope="col">Health</th>
              <th scope="col">Back up</th>
            </tr>
          </thead>
          <tbody>
            {list.map((s, i) => (
              <tr key={s.source} data-testid="source-row" data-source={s.source}>
                <th scope="row">{s.source}</th>
                <td data-testid="source-folder">{s.folder ?? <span className="muted">unknown</span>}</td>
                <td data-testid="source-last" data-version={s.last?.id ?? ''}>
                  {s.last ? new Date(s.last.time).toLocaleString() : 'never'}
                </td>
                <td className="num" data-testid="source-size" data-value={s.last?.stats.logical_bytes ?? ''}>
                  {s.last ? `${bytes(s.last.stats.logical_bytes)}, ${s.last.stats.files} files` : '–'}
                </td>
                <td className="num" data-testid="source-versions" data-value={s.versions}>
                  {s.versions}
                </td>
                <td data-testid="source-health" data-state={s.health.state}>
                  {healthText(s.health)}
                </td>
                <td className="actions">
                  <button
                    type="button"
                    data-testid="source-again"
                    disabled={running}
                    onClick={() => void again(s)}
                    aria-describedby={note?.source === s.source ? `source-note-${i}` : undefined}
                  >
                    Back up again
                  </button>
                  {canKeepFolders() && s.kept?.handle && (
                    <Every value={s.kept.everyMinutes} onChange={(m) => setEvery(s, m)} source={s.source} />
                  )}
                  {lapsed.has(s.source) && (
                    <p className="warn" data-testid="source-permission">
                      The browser asks again before this page reads “{s.folder ?? s.source}”: “Back up again” shows its
                      prompt{s.kept?.everyMinutes ? '; scheduled backups wait until then' : ''}.
                    </p>
                  )}
                  {problems.has(s.source) && (
                    <p className="error" data-testid="source-scheduled-problem" role="alert">
                      Scheduled backup not run: {problems.get(s.source)}
                    </p>
                  )}
                  {note?.source === s.source && (
                    <p
                      id={`source-note-${i}`}
                      className={note.kind}
                      data-testid="source-note"
                      role={note.kind === 'error' ? 'alert' : 'status'}
                    >
                      {note.text}
                    </p>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <input
        ref={input}
        type="file"
        data-testid="sources-folder-input"
        hidden
        // @ts-expect-error non-standard attribute, supported by every current browser
        webkitdirectory=""
        multiple
        onChange={(e) => {
          const source = picking.current;
          if (source && e.target.files)
            void backUp(source, fromFileList(e.target.files)).catch((err: unknown) =>
              setNote({ source, kind: 'error', text: message(err) }),
            );
          picking.current = null;
          e.target.value = '';
        }}
      />
    </section>
  );
}

function message(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

function healthText(h: Health): string {
  switch (h.state) {
    case 'healthy':
      return 'healthy';
    case 'incomplete':
      return `incomplete: ${h.files} file${h.files === 1 ? '' : 's'} not backed up`;
    case 'damaged':
      return `damaged: ${h.chunks} chunk${h.chunks === 1 ? '' : 's'} missing on the server; back up again to heal it`;
    case 'none':
      return 'no version yet';
  }
}

/** "Back up every N minutes while this tab is open": off, or a number of minutes. */
function Every({
  value,
  onChange,
  source,
}: {
  value: number | null;
  /** Saves the schedule; resolves to whether it was stored. */
  onChange: (m: number | null) => Promise<boolean>;
  source: string;
}) {
  const [minutes, setMinutes] = useState(value ?? 60);
  // What the field shows while it is edited: written to the store once it leaves the field
  // (or on Enter) and only if it is 1 to 1440 whole minutes, so that clearing it to type
  // another number does not save and run a schedule of 1 minute.
  const [text, setText] = useState(String(value ?? 60));
  const valid = (t: string) => {
    const n = Number(t);
    return t.trim() !== '' && Number.isInteger(n) && n >= 1 && n <= 1440 ? n : null;
  };
  const commit = () => {
    const m = valid(text);
    if (m === null) return setText(String(minutes));
    setMinutes(m);
    if (on && m !== minutes)
      void onChange(m).then((stored) => {
        // The field shows what the schedule runs by, not a number that was not saved.
        if (stored) return;
        setMinutes(minutes);
        setText(String(minutes));
      });
  };
  // Shown at once, the store written behind it; a failed write turns it back, so that the box
  // does not say "every N minutes" while nothing is scheduled.
  const [on, setOn] = useState(value !== null);
  return (
    <span className="sources-every">
      <label>
        <input
          type="checkbox"
          data-testid="source-every"
          aria-label={`Back up ${source} every so many minutes while this tab is open`}
          checked={on}
          onChange={(e) => {
            const m = valid(text) ?? minutes;
            setMinutes(m);
            setText(String(m));
            const want = e.target.checked;
            setOn(want);
            void onChange(want ? m : null).then((stored) => stored || setOn(!want));
          }}
        />{' '}
        every
      </label>{' '}
      <input
        type="number"
        data-testid="source-every-minutes"
        aria-label={`Minutes between backups of ${source}`}
        min={1}
        max={1440}
        value={text}
        aria-invalid={valid(text) === null}
        onChange={(e) => setText(e.target.value)}
        onBlur={commit}
        onKeyDown={(e) => {
          if (e.key === 'Enter') commit();
        }}
      />{' '}
      minutes while this tab is open
    </span>
  );
}
