import { useId } from 'react';
import { PRESETS, type ExcludedFiles } from '../input/excludes';
import { bytes } from './format';

/**
 * A source's exclude patterns (gitignore syntax) with the presets as checkboxes, and what
 * they leave out of the picked folder, before the backup starts.
 */
export function ExcludesEditor({
  patterns,
  onChange,
  excluded,
}: {
  patterns: string[];
  onChange: (patterns: string[]) => void;
  excluded: ExcludedFiles;
}) {
  const id = useId();
  const has = (p: string[]) => p.every((x) => patterns.includes(x));
  const toggle = (p: string[], on: boolean) =>
    onChange(on ? [...patterns, ...p.filter((x) => !patterns.includes(x))] : patterns.filter((x) => !p.includes(x)));
  const n = excluded.files.length;
  return (
    <fieldset className="excludes" data-testid="excludes">
      <legend>Leave out</legend>
      {PRESETS.map((p) => (
        <label key={p.id}>
          <input
            type="checkbox"
            data-testid={`exclude-preset-${p.id}`}
            checked={has(p.patterns)}
            onChange={(e) => toggle(p.patterns, e.target.checked)}
          />{' '}
          {p.label}
        </label>
      ))}
      <label htmlFor={`${id}-patterns`}>Patterns, one a line (gitignore syntax: *, **, leading /, trailing /, !)</label>
      <textarea
        id={`${id}-patterns`}
        data-testid="exclude-patterns"
        rows={Math.min(10, Math.max(3, patterns.length + 1))}
        spellCheck={false}
        value={patterns.join('\n')}
        onChange={(e) => onChange(e.target.value.split('\n'))}
      />
      <p data-testid="picked-excluded" data-files={n} data-bytes={excluded.bytes} aria-live="polite">
        {n === 0
          ? 'Nothing excluded.'
          : `${n} file${n === 1 ? '' : 's'} excluded (${bytes(excluded.bytes)}): not read, not backed up.`}
      </p>
      {n > 0 && (
        <details>
          <summary>Show the excluded files</summary>
          <ul data-testid="excluded-list">
            {excluded.files.slice(0, 500).map((f) => (
              <li key={f.path} data-testid="excluded-file" data-path={f.path}>
                {f.path} ({bytes(f.size)})
              </li>
            ))}
            {n > 500 && <li>… and {n - 500} more</li>}
          </ul>
        </details>
      )}
    </fieldset>
  );
}
