import type { ButtonHTMLAttributes } from 'react';

type Variant = 'default' | 'primary' | 'danger' | 'link';

/**
 * A button in one of the design's variants. Bare `<button>` already looks like the default
 * variant (styles.css); this component only names the others and defaults `type` to
 * "button", so that a button inside a form never submits it by accident.
 */
export function Button({
  variant = 'default',
  className,
  type = 'button',
  ...rest
}: ButtonHTMLAttributes<HTMLButtonElement> & { variant?: Variant }) {
  const classes = [variant === 'default' ? '' : variant, className ?? ''].filter(Boolean).join(' ');
  return <button type={type} className={classes || undefined} {...rest} />;
}
