import { useEffect, useState } from 'react';
import { ApiError, type Api, type TokenInfo } from '../api/client';

const SCOPE_WORDS: Record<TokenInfo['scope'], string> = {
  full: 'Full access',
  backup: 'Backup only',
  read: 'Read only',
};

/** What this token cannot do, in the words of the page's actions. */
function limits(t: TokenInfo): string {
  const no: string[] = [];
  if (!t.can.backup) no.push('back up');
  if (!t.can.restore) no.push('restore or search');
  if (!t.can.delete) no.push('delete');
  if (!t.can.browse) no.push("see other tokens' versions");
  return no.length ? `cannot ${no.join(', ')}` : 'may do everything in this repository';
}

/**
 * The token is checked as soon as the page loads, so that a revoked or mistyped token is
 * reported at once rather than when Back up or Versions is clicked, and a scoped token says
 * what it may do (docs/API.md, Authentication).
 */
export function TokenBadge({ api }: { api: Api }) {
  const [state, setState] = useState<{ info?: TokenInfo; error?: string }>({});
  useEffect(() => {
    let live = true;
    api.tokenInfo().then(
      (info) => live && setState({ info }),
      (e: unknown) => {
        if (!live) return;
        const refused = e instanceof ApiError && (e.status === 401 || e.status === 403);
        setState({
          error: refused
            ? 'The server refused this access token (revoked or mistyped): open the link that `npm start` printed.'
            : `Cannot check the access token: ${e instanceof Error ? e.message : String(e)}`,
        });
      },
    );
    return () => {
      live = false;
    };
  }, [api]);
  if (state.error)
    return (
      <p className="error" role="alert" data-testid="token-error">
        {state.error}
      </p>
    );
  if (!state.info) return null;
  const t = state.info;
  return (
    <p className="muted" data-testid="token-scope" data-scope={t.scope}>
      Token {t.id}: {SCOPE_WORDS[t.scope]} — {limits(t)}.
    </p>
  );
}
