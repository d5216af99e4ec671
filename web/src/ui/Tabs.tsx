import { useRef, type KeyboardEvent, type ReactNode } from 'react';

export interface TabDef<Id extends string> {
  id: Id;
  label: ReactNode;
  /** The tab button's data-testid (e2e specs click tabs by it). */
  testId?: string;
}

/**
 * A WAI-ARIA tablist with automatic activation: arrow keys move between tabs and select
 * them, Home and End go to the ends, only the selected tab is in the Tab order. The panel
 * of the selected tab is `children`.
 */
export function Tabs<Id extends string>({
  tabs,
  selected,
  onSelect,
  label,
  children,
}: {
  tabs: TabDef<Id>[];
  selected: Id;
  onSelect: (id: Id) => void;
  /** The tablist's accessible name. */
  label: string;
  children: ReactNode;
}) {
  const refs = useRef(new Map<Id, HTMLButtonElement>());
  const onKeyDown = (e: KeyboardEvent) => {
    const i = tabs.findIndex((t) => t.id === selected);
    const next =
      e.key === 'ArrowRight'
        ? (i + 1) % tabs.length
        : e.key === 'ArrowLeft'
          ? (i - 1 + tabs.length) % tabs.length
          : e.key === 'Home'
            ? 0
            : e.key === 'End'
              ? tabs.length - 1
              : -1;
    if (next < 0) return;
    e.preventDefault();
    onSelect(tabs[next].id);
    refs.current.get(tabs[next].id)?.focus();
  };
  return (
    <>
      <div role="tablist" aria-label={label} className="tablist" onKeyDown={onKeyDown}>
        {tabs.map((t) => (
          <button
            key={t.id}
            ref={(el) => {
              if (el) refs.current.set(t.id, el);
              else refs.current.delete(t.id);
            }}
            type="button"
            role="tab"
            id={`tab-${t.id}`}
            aria-selected={t.id === selected}
            aria-controls={`panel-${t.id}`}
            tabIndex={t.id === selected ? 0 : -1}
            data-testid={t.testId}
            onClick={() => onSelect(t.id)}
          >
            {t.label}
          </button>
        ))}
      </div>
      <div role="tabpanel" id={`panel-${selected}`} aria-labelledby={`tab-${selected}`} tabIndex={0}>
        {children}
      </div>
    </>
  );
}
