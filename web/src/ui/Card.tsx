import type { HTMLAttributes, ReactNode } from 'react';

/** A surface that groups one thing (a form, a result, a table) with an optional heading. */
export function Card({ title, className, children, ...rest }: { title?: ReactNode } & HTMLAttributes<HTMLElement>) {
  return (
    <section className={['card', className].filter(Boolean).join(' ')} {...rest}>
      {title && <h2>{title}</h2>}
      {children}
    </section>
  );
}
