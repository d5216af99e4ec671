import { useCallback, useEffect, useState } from 'react';
import { ApiError, type Api, type TokenInfo } from '../api/client';
import { cleanToken } from '../api/token';
import { Button } from '../ui/Button';
import { Notice } from '../ui/Notice';

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

export type TokenCheck =
  | { state: 'checking' }
  | { state: 'ok'; info: TokenInfo }
  /** The server answered and said no: no view can work with this token. */
  | { state: 'refused'; message: string }
  /** The server could not be asked: the views may work once it answers. */
  | { state: 'failed'; message: string };

/**
 * Asks the server what the token may do as soon as the page loads, so that a revoked or
 * mistyped token is reported at once rather than when Back up or Versions is clicked
 * (docs/API.md, Authentication). `recheck` asks again.
 */
export function useTokenCheck(api: Api | null): [TokenCheck, () => void] {
  const [check, setCheck] = useState<TokenCheck>({ state: 'checking' });
  const [round, setRound] = useState(0);
  useEffect(() => {
    if (!api) return;
    let live = true;
    setCheck({ state: 'checking' });
    api.tokenInfo().then(
      (info) => live && setCheck({ state: 'ok', info }),
      (e: unknown) => {
        if (!live) return;
        const message = e instanceof Error ? e.message : String(e);
        const refused = e instanceof ApiError && (e.status === 401 || e.status === 403);
        setCheck(refused ? { state: 'refused', message } : { state: 'failed', message });
      },
    );
    return () => {
      live = false;
    };
  }, [api, round]);
  return [check, useCallback(() => setRound((n) => n + 1), [])];
}

/** The token's scope in one line, once the server has confirmed it. */
export function TokenBadge({ check }: { check: TokenCheck }) {
  if (check.state !== 'ok') return null;
  const t = check.info;
  return (
    <p className="muted" data-testid="token-scope" data-scope={t.scope}>
      Token {t.id}: {SCOPE_WORDS[t.scope]} — {limits(t)}.
    </p>
  );
}

/**
 * What to do when there is no usable token: open the link the server printed, or paste a
 * token here (it is kept in this browser like one from the link).
 */
export function TokenProblem({
  check,
  hasToken,
  onToken,
  onRetry,
}: {
  check: TokenCheck;
  hasToken: boolean;
  onToken: (token: string) => void;
  onRetry: () => void;
}) {
  const [typed, setTyped] = useState('');
  if (hasToken && check.state === 'failed')
    return (
      <Notice tone="error" title="Cannot check the access token" data-testid="token-error">
        <p>
          {check.message} When the server runs again, <Button onClick={onRetry}>Try again</Button>
        </p>
      </Notice>
    );
  if (hasToken && check.state !== 'refused') return null;
  return (
    <Notice
      tone="error"
      title={hasToken ? 'The server refused this access token' : 'No access token'}
      data-testid={hasToken ? 'token-error' : 'no-token'}
    >
      <p>
        {hasToken
          ? 'It was revoked or mistyped, or it belongs to another server. '
          : 'This page needs an access token to reach your backups. '}
        Open the link that <code>npm start</code> printed (the token is in it after <code>#token=</code>), or create a
        token with <code>ditto-server token create default</code> and paste it here.
      </p>
      <form
        className="plan"
        onSubmit={(e) => {
          e.preventDefault();
          if (cleanToken(typed)) onToken(cleanToken(typed));
        }}
      >
        <label>
          Access token{' '}
          <input
            data-testid="token-input"
            value={typed}
            onChange={(e) => setTyped(e.target.value)}
            autoComplete="off"
            spellCheck={false}
            size={40}
          />
        </label>
        <button type="submit" disabled={!cleanToken(typed)}>
          Use this token
        </button>
      </form>
    </Notice>
  );
}
