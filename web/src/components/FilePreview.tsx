import { useEffect, useMemo, useState } from 'react';
import type { Api } from '../api/client';
import { highlightRuns, looksLikeText, previewKind } from '../restore/preview';
import { restoreHead } from '../restore/head';
import type { RestoreItem } from '../restore/restore';
import { bytes } from './format';

interface Props {
  api: Api;
  version: number;
  item: RestoreItem;
  /** Terms to highlight in a text preview (the search's keywords, or typed here). */
  highlight?: readonly string[];
  onClose: () => void;
}

type Loaded =
  { kind: 'text'; text: string; truncated: boolean } | { kind: 'image'; url: string } | { kind: 'none'; why: string };

/**
 * One file of a version shown in the page, restored (verified chunk by chunk) into memory
 * up to a limit rather than downloaded: text with its search terms highlighted, or an image.
 */
export function FilePreview({ api, version, item, highlight, onClose }: Props) {
  const [loaded, setLoaded] = useState<Loaded | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [terms, setTerms] = useState((highlight ?? []).join(' '));

  useEffect(() => {
    const how = previewKind(item.name, item.size);
    if (how.kind === 'none') {
      setLoaded(how);
      return;
    }
    let url: string | null = null;
    const abort = new AbortController();
    (async () => {
      const { bytes: all, truncated } = await restoreHead(api, version, item, how.limit, abort.signal);
      if (how.kind === 'image') {
        url = URL.createObjectURL(new Blob([all], { type: how.mime }));
        setLoaded({ kind: 'image', url });
      } else if (!looksLikeText(all)) {
        setLoaded({ kind: 'none', why: 'binary file: download it to open it' });
      } else {
        setLoaded({ kind: 'text', text: new TextDecoder().decode(all), truncated });
      }
    })().catch((e: unknown) => {
      if (!abort.signal.aborted) setError(e instanceof Error ? e.message : String(e));
    });
    return () => {
      abort.abort();
      if (url) URL.revokeObjectURL(url);
    };
  }, [api, version, item]);

  const runs = useMemo(
    () => (loaded?.kind === 'text' ? highlightRuns(loaded.text, terms.split(/\s+/)) : []),
    [loaded, terms],
  );

  return (
    <section className="preview" data-testid="file-preview" data-path={item.path}>
      <h4>
        {item.path} · {bytes(item.size)}{' '}
        <button type="button" data-testid="preview-close" onClick={onClose}>
          Close
        </button>
      </h4>
      {error && (
        <p className="error" data-testid="preview-error">
          {error}
        </p>
      )}
      {!loaded && !error && <p>Loading…</p>}
      {loaded?.kind === 'none' && <p data-testid="preview-none">{loaded.why}</p>}
      {loaded?.kind === 'image' && <img data-testid="preview-image" src={loaded.url} alt={item.name} />}
      {loaded?.kind === 'text' && (
        <>
          <label>
            Highlight <input data-testid="preview-highlight" value={terms} onChange={(e) => setTerms(e.target.value)} />
          </label>
          <pre data-testid="preview-text" data-hits={runs.filter((r) => r.hit).length}>
            {runs.map((r, i) => (r.hit ? <mark key={i}>{r.text}</mark> : r.text))}
          </pre>
          {loaded.truncated && <p>Showing the first {bytes(loaded.text.length)}; download the file for the rest.</p>}
        </>
      )}
    </section>
  );
}
