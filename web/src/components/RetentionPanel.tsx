import { useEffect, useMemo, useState } from 'react';
import type { Api, ForgetResult, KeepReason, RetentionPolicy } from '../api/client';
import { bytes } from './format';
import './retention.css';

/** Version ids the server forgets per request at most (`MAX_FORGET_IDS`). */
const FORGET_IDS = 10_000;

type CountRule = 'keep_last' | 'keep_hourly' | 'keep_daily' | 'keep_weekly' | 'keep_monthly' | 'keep_yearly';
type Form = Record<CountRule | 'keep_within', string>;

const COUNT_RULES: { key: CountRule; label: string; hint: string }[] = [
  { key: 'keep_last', label: 'Keep last', hint: 'the newest N versions' },
  { key: 'keep_hourly', label: 'Hourly', hint: 'the newest version in each of the last N hours that have one' },
  { key: 'keep_daily', label: 'Daily', hint: 'the newest version in each of the last N days that have one' },
  { key: 'keep_weekly', label: 'Weekly', hint: 'the newest version in each of the last N ISO weeks that have one' },
  { key: 'keep_monthly', label: 'Monthly', hint: 'the newest version in each of the last N months that have one' },
  { key: 'keep_yearly', label: 'Yearly', hint: 'the newest version in each of the last N years that have one' },
];

const EMPTY: Form = {
  keep_last: '',
  keep_hourly: '',
  keep_daily: '',
  keep_weekly: '',
  keep_monthly: '',
  keep_yearly: '',
  keep_within: '',
};

const REASON_WORDS: Record<KeepReason, string> = {
  last: 'last',
  hourly: 'hourly',
  daily: 'daily',
  weekly: 'weekly',
  monthly: 'monthly',
  yearly: 'yearly',
  within: 'within',
};

/**
 * The last policy is remembered per repository and source in localStorage: it is a few
 * bytes read while the form renders, so a synchronous store fills the inputs at once, and
 * nothing about it needs IndexedDB's transactions. The key holds no server address because
 * localStorage is already per origin, and the page is served by the server it talks to.
 */
const storageKey = (repo: string, source: string) => `ditto-retention:${repo}:${source}`;

function loadForm(repo: string, source: string): Form {
  try {
    const saved = JSON.parse(localStorage.getItem(storageKey(repo, source)) ?? 'null') as Partial<Form> | null;
    if (!saved || typeof saved !== 'object') return EMPTY;
    const form = { ...EMPTY };
    for (const k of Object.keys(EMPTY) as (keyof Form)[]) if (typeof saved[k] === 'string') form[k] = saved[k];
    return form;
  } catch {
    return EMPTY; // storage disabled or an unreadable entry: start empty
  }
}

function saveForm(repo: string, source: string, form: Form) {
  try {
    localStorage.setItem(storageKey(repo, source), JSON.stringify(form));
  } catch {
    // storage disabled or full: the policy is only not remembered
  }
}

/** The policy the form describes, or why it cannot be sent. Empty inputs are rules not used. */
export function policyOf(form: Form): { policy: RetentionPolicy } | { problem: string } {
  const policy: RetentionPolicy = {};
  for (const { key, label } of COUNT_RULES) {
    const text = form[key].trim();
    if (text === '') continue;
    if (!/^\d+$/.test(text) || Number(text) > 1_000_000)
      return { problem: `${label}: a whole number from 0 to 1 000 000, or empty` };
    policy[key] = Number(text);
  }
  const within = form.keep_within.trim();
  if (within !== '') policy.keep_within = within;
  if (Object.keys(policy).length === 0)
    return { problem: 'Fill in at least one rule: an empty policy keeps every version.' };
  // The server refuses a policy that can keep nothing (docs/API.md, forget): said here, before a preview.
  if (policy.keep_within === undefined && COUNT_RULES.every(({ key }) => !policy[key]))
    return {
      problem:
        'Every rule is 0, so no version would be kept: give one rule above 0 (to remove every version, delete them in the list).',
    };
  return { policy };
}

/** `pruneError`: why freeing the removed versions' storage failed (they are removed all the same). */
type Applied = { removed: number[]; reclaimed: number; pruneError: string | null };

/**
 * Retention: choose which versions to keep by a policy (as `restic forget`: a version is kept
 * if any rule keeps it, per source), preview what goes and what it frees, then apply.
 */
export function RetentionPanel({
  api,
  sources,
  revision,
  onApplied,
}: {
  api: Api;
  sources: string[];
  /** The repository's versions as the page last read them (their ids): a preview of others is stale. */
  revision: string;
  /** Called with the removed versions' ids after an apply. */
  onApplied: (removed: number[]) => void;
}) {
  const [source, setSource] = useState(''); // '' = every source, each on its own
  const [form, setForm] = useState<Form>(() => loadForm(api.repo, ''));
  const [preview, setPreview] = useState<{ key: string; revision: string; result: ForgetResult } | null>(null);
  const [confirming, setConfirming] = useState(false);
  const [busy, setBusy] = useState<'preview' | 'apply' | null>(null);
  const [applied, setApplied] = useState<Applied | null>(null);
  const [error, setError] = useState<string | null>(null);

  // A source that disappeared (its last version removed) falls back to every source.
  useEffect(() => {
    if (source && !sources.includes(source)) {
      setSource('');
      setForm(loadForm(api.repo, ''));
    }
  }, [api, source, sources]);

  const parsed = useMemo(() => policyOf(form), [form]);
  const key = 'policy' in parsed ? JSON.stringify({ policy: parsed.policy, source }) : null;
  const current = preview && preview.key === key && preview.revision === revision ? preview.result : null;

  const chooseSource = (s: string) => {
    setSource(s);
    setForm(loadForm(api.repo, s));
    setConfirming(false);
  };
  const edit = (k: keyof Form, v: string) => {
    setForm((f) => ({ ...f, [k]: v }));
    setConfirming(false);
  };

  const runPreview = async () => {
    if (!('policy' in parsed) || !key) return;
    setBusy('preview');
    setError(null);
    setApplied(null);
    setConfirming(false);
    try {
      const result = await api.forget({ policy: parsed.policy, ...(source ? { source } : {}), dry_run: true });
      setPreview({ key, revision, result });
      saveForm(api.repo, source, form);
    } catch (e) {
      setPreview(null);
      setError(e instanceof Error ? e.message : String(e));
    }
    setBusy(null);
  };

  const apply = async () => {
    if (!current || !('policy' in parsed)) return;
    setConfirming(false);
    setBusy('apply');
    setError(null);
    // Exactly the previewed versions go, by id (the confirmation named them; the policy
    // evaluated again now could select others if a backup committed since the preview), and
    // each only while the policy still removes it: if versions were deleted since (another
    // tab, another device), the server refuses rather than remove one the policy keeps now.
    const ids = current.remove.map((v) => v.id);
    const removed: number[] = [];
    let reclaimed = 0;
    let pruneError: string | null = null;
    try {
      // The server takes at most FORGET_IDS ids per request (docs/API.md).
      for (let at = 0; at < ids.length; at += FORGET_IDS) {
        const result = await api.forget({
          policy: parsed.policy,
          ...(source ? { source } : {}),
          versions: ids.slice(at, at + FORGET_IDS),
        });
        removed.push(...result.remove.map((v) => v.id));
        reclaimed += result.reclaimed_bytes;
        pruneError ??= result.prune_error;
      }
      setApplied({ removed, reclaimed, pruneError });
    } catch (e) {
      setError(e instanceof Error ? e.message : String(e));
    }
    // Also after a failure: versions may be gone although their request failed (they are
    // deleted before the storage is freed), so the page reads again what the server holds.
    setPreview(null);
    onApplied(removed);
    setBusy(null);
  };

  const when = (t: number) => new Date(t).toLocaleString();
  const many = sources.length > 1 && !source;

  return (
    <details className="retention" data-testid="retention">
      <summary>Retention: remove old versions by a policy</summary>
      <div className="retention-body">
        <label className="retention-source">
          Apply to{' '}
          <select data-testid="retention-source" value={source} onChange={(e) => chooseSource(e.target.value)}>
            <option value="">every source (each on its own)</option>
            {sources.map((s) => (
              <option key={s} value={s}>
                source “{s}”
              </option>
            ))}
          </select>
        </label>
        <p className="muted">
          A version is kept if any rule keeps it; the rest are removed, with the storage only they use. Leave a rule
          empty to not use it. Hours, days, weeks, months and years are counted in UTC, by when each backup started.
        </p>
        <div className="retention-form">
          {COUNT_RULES.map(({ key: k, label, hint }) => (
            <label key={k} title={hint}>
              <span>{label}</span>
              <input
                type="number"
                min={0}
                max={1_000_000}
                step={1}
                inputMode="numeric"
                data-testid={`retention-${k}`}
                value={form[k]}
                onChange={(e) => edit(k, e.target.value)}
              />
            </label>
          ))}
          <label title="every version within this long of the source's newest (e.g. 30d, 36h, 2w, 1y6m; m = months)">
            <span>Within</span>
            <input
              type="text"
              placeholder="e.g. 30d"
              data-testid="retention-keep_within"
              value={form.keep_within}
              onChange={(e) => edit('keep_within', e.target.value)}
            />
          </label>
        </div>
        <div className="retention-actions">
          <button
            type="button"
            data-testid="retention-preview"
            disabled={!('policy' in parsed) || busy !== null}
            onClick={runPreview}
          >
            {busy === 'preview' ? 'Previewing…' : 'Preview'}
          </button>
          {'problem' in parsed && (
            <span className="muted" data-testid="retention-problem">
              {parsed.problem}
            </span>
          )}
          {preview && !current && (
            <span className="muted" data-testid="retention-stale">
              {preview.revision === revision ? 'The policy' : 'The versions'} changed since the preview: preview again.
            </span>
          )}
          {error && (
            <span className="error" data-testid="retention-error">
              {error}
            </span>
          )}
        </div>

        {applied && (
          <p
            className="ok"
            data-testid="retention-reclaimed"
            data-value={applied.reclaimed}
            data-removed={applied.removed.join(',')}
          >
            Removed {applied.removed.length} version{applied.removed.length === 1 ? '' : 's'};{' '}
            {bytes(applied.reclaimed)} reclaimed on the server's disk (the chunks, and whole container files they leave
            empty).
            {applied.pruneError && (
              <span className="error" data-testid="retention-prune-error">
                {' '}
                Freeing their storage failed ({applied.pruneError}); the next prune frees it.
              </span>
            )}
          </p>
        )}

        {current && (
          <div className="retention-preview" data-testid="retention-result">
            <p>
              {current.remove.length === 0 ? (
                <span data-testid="retention-nothing">This policy keeps every version: nothing to remove.</span>
              ) : (
                <>
                  Removes{' '}
                  <strong data-testid="retention-remove-count" data-value={current.remove.length}>
                    {current.remove.length} version{current.remove.length === 1 ? '' : 's'}
                  </strong>{' '}
                  and keeps {current.keep.length}; frees{' '}
                  <strong data-testid="retention-freed" data-value={current.freed_bytes}>
                    {bytes(current.freed_bytes)}
                  </strong>{' '}
                  of stored chunks ({current.freed_chunks.toLocaleString('en')} chunk
                  {current.freed_chunks === 1 ? '' : 's'}).
                </>
              )}
            </p>
            <div className="retention-lists">
              <table className="files">
                <caption>To remove</caption>
                <thead>
                  <tr>
                    <th>Version</th>
                    {many && <th>Source</th>}
                    <th>Time</th>
                  </tr>
                </thead>
                <tbody>
                  {current.remove.map((v) => (
                    <tr key={v.id} data-testid="retention-remove" data-version={v.id}>
                      <td>{v.id}</td>
                      {many && <td>{v.source}</td>}
                      <td>{when(v.time)}</td>
                    </tr>
                  ))}
                  {current.remove.length === 0 && (
                    <tr>
                      <td colSpan={many ? 3 : 2} className="muted">
                        none
                      </td>
                    </tr>
                  )}
                </tbody>
              </table>
              <table className="files">
                <caption>To keep</caption>
                <thead>
                  <tr>
                    <th>Version</th>
                    {many && <th>Source</th>}
                    <th>Time</th>
                    <th>Kept by</th>
                  </tr>
                </thead>
                <tbody>
                  {current.keep.map((v) => (
                    <tr
                      key={v.id}
                      data-testid="retention-keep"
                      data-version={v.id}
                      data-reasons={(v.reasons ?? []).join(',')}
                    >
                      <td>{v.id}</td>
                      {many && <td>{v.source}</td>}
                      <td>{when(v.time)}</td>
                      <td>{(v.reasons ?? []).map((r) => REASON_WORDS[r] ?? r).join(', ')}</td>
                    </tr>
                  ))}
                  {current.keep.length === 0 && (
                    <tr>
                      <td colSpan={many ? 4 : 3} className="warn">
                        none: every version of {source ? 'this source' : 'every source'} would be removed
                      </td>
                    </tr>
                  )}
                </tbody>
              </table>
            </div>
            {current.remove.length > 0 && (
              <div className="retention-actions">
                {confirming ? (
                  <>
                    <button
                      type="button"
                      className="danger"
                      data-testid="retention-apply-confirm"
                      disabled={busy !== null}
                      onClick={apply}
                    >
                      Remove {current.remove.length} version{current.remove.length === 1 ? '' : 's'} for good?
                    </button>
                    <button type="button" data-testid="retention-apply-cancel" onClick={() => setConfirming(false)}>
                      Keep them
                    </button>
                  </>
                ) : (
                  <button
                    type="button"
                    data-testid="retention-apply"
                    disabled={busy !== null}
                    onClick={() => setConfirming(true)}
                  >
                    {busy === 'apply' ? 'Removing…' : 'Apply'}
                  </button>
                )}
              </div>
            )}
          </div>
        )}
      </div>
    </details>
  );
}
