import { useEffect, useMemo, useState } from 'react';
import type { Api } from '../api/client';
import {
  highlightRuns,
  looksLikeText,
  markedRuns,
  previewKind,
  rangesWithin,
  type ByteRange,
} from '../restore/preview';
import { restoreHead } from '../restore/head';
import type { RestoreItem } from '../restore/restore';
import '../restore/restore.css';
import { bytes } from './format';

interface Props {
  api: Api;
  version: number;
  item: RestoreItem;
  /**
   * A search's hits in this file, as byte ranges: marked in a text preview until terms are
   * typed into its highlight field.
   */
  hits?: readonly ByteRange[];
  onClose: () => void;
}

type Loaded =
  | { kind: 'text'; bytes: Uint8Array; text: string; truncated: boolean }
  | { kind: 'image'; url: string }
  | { kind: 'none'; why: string };

/**
 * One file of a version shown in the page, restored (verified chunk by chunk) into memory
 * up to a limit rather than downloaded: text with a search's hits or typed terms highlighted,
 * or an image.
 */
export function FilePreview({ api, version, item, hits, onClose }: Props) {
  const [loaded, setLoaded] = useState<Loaded | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [terms, setTerms] = useState('');

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
        setLoaded({ kind: 'text', bytes: all, text: new TextDecoder().decode(all), truncated });
      }
    })().catch((e: unknown) => {
      if (!abort.signal.aborted) setError(e instanceof Error ? e.message : String(e));
    });
    return () => {
      abort.abort();
      if (url) URL.revokeObjectURL(url);
    };
  }, [api, version, item]);

  // The search's own hits (exact bytes, hex keywords too) until terms are typed.
  const bySearch = !!hits && terms.trim() === '';
  const runs = useMemo(() => {
    if (loaded?.kind !== 'text') return [];
    return bySearch ? markedRuns(loaded.bytes, hits) : highlightRuns(loaded.text, terms.split(/\s+/));
  }, [loaded, terms, hits, bySearch]);
  const marked =
    loaded?.kind !== 'text' ? 0 : bySearch ? rangesWithin(hits, loaded.bytes.length) : runs.filter((r) => r.hit).length;

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
          {bySearch && (
            <p className="muted" data-testid="preview-search-hits">
              Marked: the search&apos;s {marked} hit{marked === 1 ? '' : 's'}
              {loaded.truncated ? ' in the part shown' : ''}; type terms to mark those instead.
            </p>
          )}
          {/* A scrolling region: reachable by the keyboard, named for a screen reader. */}
          <pre
            data-testid="preview-text"
            data-hits={marked}
            data-marked-by={bySearch ? 'search' : 'terms'}
            tabIndex={0}
            role="region"
            aria-label={`${item.path}, as text`}
          >
            {runs.map((r, i) => (r.hit ? <mark key={i}>{r.text}</mark> : r.text))}
          </pre>
          {loaded.truncated && <p>Showing the first {bytes(loaded.bytes.length)}; download the file for the rest.</p>}
        </>
      )}
    </section>
  );
}
