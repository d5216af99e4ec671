/** A labelled progress bar: `value` of `max`, or indeterminate when `value` is null. */
export function Progress({
  label,
  value,
  max = 1,
  detail,
}: {
  label: string;
  value: number | null;
  max?: number;
  /** Shown at the right of the label, e.g. "12 of 40 files". */
  detail?: string;
}) {
  return (
    <div className="meter">
      <span className="meter-label">
        <span>{label}</span>
        {detail && <span className="muted">{detail}</span>}
      </span>
      <progress aria-label={label} value={value ?? undefined} max={max} />
    </div>
  );
}
