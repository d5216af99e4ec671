import type { HTMLAttributes, ReactNode } from 'react';

type Tone = 'info' | 'ok' | 'warn' | 'error';

/**
 * A message about the state of things, with what to do next. Errors and warnings are
 * announced to screen readers as they appear (role alert), the rest politely (role status).
 */
export function Notice({
  tone = 'info',
  title,
  className,
  children,
  ...rest
}: { tone?: Tone; title?: ReactNode } & HTMLAttributes<HTMLDivElement>) {
  return (
    <div
      role={tone === 'error' || tone === 'warn' ? 'alert' : 'status'}
      className={['notice', `notice-${tone}`, className].filter(Boolean).join(' ')}
      {...rest}
    >
      {title && <strong>{title}</strong>}
      {children}
    </div>
  );
}

/** What an empty view shows: what would be here, and the step that puts it there. */
export function EmptyState({
  title,
  action,
  children,
  ...rest
}: { title: ReactNode; action?: ReactNode } & HTMLAttributes<HTMLDivElement>) {
  return (
    <div className="empty-state" {...rest}>
      <h2>{title}</h2>
      {children}
      {action && <p>{action}</p>}
    </div>
  );
}
