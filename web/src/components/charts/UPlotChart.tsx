/**
 * A small React wrapper around uPlot (Canvas 2D): one chart per mount, rebuilt when its data
 * changes, sized to its container. The x axis is a category index (versions, histogram bins),
 * labelled through `xLabels`; labels are thinned so that they never overlap. Colours are the
 * design tokens (styles.css), read when the chart is drawn, so both colour schemes apply.
 */
import { useEffect, useRef, type ReactNode } from 'react';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';

export interface ChartSeries {
  label: string;
  values: (number | null)[];
  /** A colour token of styles.css, e.g. `--chart-1`. */
  color: string;
}

interface Props {
  title: string;
  xLabels: string[];
  series: ChartSeries[];
  kind: 'bars' | 'lines';
  yFormat: (v: number) => string;
  testId: string;
  /** A logarithmic y axis: values spanning several orders of magnitude stay readable. */
  logY?: boolean;
  /** A sentence under the chart: what it leaves out, or how to read it. */
  note?: ReactNode;
  height?: number;
}

/** Width in pixels of the axis font's widest digit-like character, with a margin. */
const CHAR_PX = 7.5;

/** Blanks a label equal to the one below it: small ranges round several ticks to one value. */
function distinct(labels: string[]): string[] {
  return labels.map((l, i) => (i > 0 && l === labels[i - 1] ? '' : l));
}

export function UPlotChart({ title, xLabels, series, kind, yFormat, testId, logY, note, height = 220 }: Props) {
  const box = useRef<HTMLDivElement>(null);

  useEffect(() => {
    const el = box.current;
    if (!el) return;
    const css = getComputedStyle(el);
    const token = (name: string) => css.getPropertyValue(name).trim() || '#888';
    const text = token('--color-muted');
    const grid = token('--color-border');
    const n = xLabels.length;
    const xs = Array.from({ length: n }, (_, i) => i);
    // uPlot puts ticks at the smallest step whose spacing is at least `space`: the longest
    // label plus a gap keeps every shown label clear of its neighbours.
    const longest = xLabels.reduce((m, l) => Math.max(m, l.length), 1);
    // Bars of several series overlap: the larger ones are drawn first (callers order them).
    const bars = kind === 'bars' ? uPlot.paths.bars!({ size: [0.7, 60] }) : undefined;
    const opts: uPlot.Options = {
      width: Math.max(280, el.clientWidth || 480),
      height,
      scales: {
        x: { time: false, range: () => [-0.6, Math.max(0, n - 1) + 0.6] },
        y: logY
          ? {
              distr: 3,
              log: 10,
              range: (_u, min, max) => uPlot.rangeLog(min > 0 ? min : 1, max > 0 ? max : 10, 10, true),
            }
          : { range: (_u, _min, max) => [0, max > 0 ? max * 1.1 : 1] },
      },
      axes: [
        {
          stroke: text,
          grid: { stroke: grid, width: 1 },
          ticks: { stroke: grid, width: 1 },
          space: longest * CHAR_PX + 12,
          incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000],
          values: (_u, splits) => splits.map((s) => (Number.isInteger(s) ? (xLabels[s] ?? '') : '')),
        },
        {
          stroke: text,
          // On a log axis, a grid line per power of ten: the ones between are noise.
          grid: {
            stroke: grid,
            width: 1,
            ...(logY && {
              filter: (_u: uPlot, splits: number[]) => splits.map((s) => (Number.isInteger(Math.log10(s)) ? s : null)),
            }),
          },
          ticks: { stroke: grid, width: 1 },
          size: 72,
          // A log axis hides the splits it has no room for as nulls.
          values: (_u, splits) => distinct(splits.map((s) => (s == null ? '' : yFormat(s)))),
        },
      ],
      legend: { live: false },
      cursor: { drag: { x: false, y: false } },
      series: [
        { label: 'x', value: (_u, v) => (v == null ? '' : (xLabels[v] ?? '')) },
        ...series.map((s) => {
          const color = token(s.color);
          return {
            label: s.label,
            stroke: color,
            fill: kind === 'bars' ? color : undefined,
            width: kind === 'bars' ? 1 : 2,
            paths: bars,
            points: { show: kind === 'lines' },
            value: (_u: uPlot, v: number | null) => (v == null ? '—' : yFormat(v)),
          };
        }),
      ],
    };
    const plot = new uPlot(opts, [xs, ...series.map((s) => s.values)] as uPlot.AlignedData, el);
    return () => plot.destroy();
  }, [xLabels, series, kind, yFormat, height, logY]);

  return (
    <figure className="chart" data-testid={testId}>
      <figcaption>{title}</figcaption>
      <div ref={box} />
      {note && <p className="chart-note">{note}</p>}
    </figure>
  );
}
