import { useId, type InputHTMLAttributes, type ReactNode, type SelectHTMLAttributes } from 'react';

interface FieldProps {
  label: ReactNode;
  /** A sentence under the control, tied to it with aria-describedby. */
  hint?: ReactNode;
}

/** A labelled text or number input; the label is the control's accessible name. */
export function Input({ label, hint, className, ...rest }: FieldProps & InputHTMLAttributes<HTMLInputElement>) {
  const id = useId();
  return (
    <label className={['field', className].filter(Boolean).join(' ')}>
      <span>{label}</span>
      <input aria-describedby={hint ? id : undefined} {...rest} />
      {hint && (
        <span className="hint" id={id}>
          {hint}
        </span>
      )}
    </label>
  );
}

/** A labelled select. */
export function Select({
  label,
  hint,
  className,
  children,
  ...rest
}: FieldProps & SelectHTMLAttributes<HTMLSelectElement>) {
  const id = useId();
  return (
    <label className={['field', className].filter(Boolean).join(' ')}>
      <span>{label}</span>
      <select aria-describedby={hint ? id : undefined} {...rest}>
        {children}
      </select>
      {hint && (
        <span className="hint" id={id}>
          {hint}
        </span>
      )}
    </label>
  );
}
