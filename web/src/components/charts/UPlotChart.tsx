/**
 * A small React wrapper around uPlot (Canvas 2D): one chart per mount, rebuilt when its data
 * changes, sized to its container. The x axis is a category index (versions, histogram bins),
 * labelled through `xLabels`.
 */
import { useEffect, useRef } from 'react';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';

export interface ChartSeries {
  label: string;
  values: (number | null)[];
  color: string;
}

interface Props {
  title: string;
  xLabels: string[];
  series: ChartSeries[];
  kind: 'bars' | 'lines';
  yFormat: (v: number) => string;
  testId: string;
  height?: number;
}

export function UPlotChart({ title, xLabels, series, kind, yFormat, testId, height = 220 }: Props) {
  const box = useRef<HTMLDivElement>(null);

  useEffect(() => {
    const el = box.current;
    if (!el) return;
    const n = xLabels.length;
    const xs = Array.from({ length: n }, (_, i) => i);
    // Bars overlap when there are several series: draw the larger ones first (callers order them).
    const bars = kind === 'bars' ? uPlot.paths.bars!({ size: [0.7, 60] }) : undefined;
    const opts: uPlot.Options = {
      title,
      width: Math.max(280, el.clientWidth || 480),
      height,
      scales: {
        x: { time: false, range: () => [-0.6, Math.max(0, n - 1) + 0.6] },
        y: { range: (_u, _min, max) => [0, max > 0 ? max * 1.1 : 1] },
      },
      axes: [
        {
          incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500],
          values: (_u, splits) => splits.map((s) => (Number.isInteger(s) ? (xLabels[s] ?? '') : '')),
        },
        { size: 72, values: (_u, splits) => splits.map((s) => yFormat(s)) },
      ],
      legend: { live: false },
      cursor: { drag: { x: false, y: false } },
      series: [
        { label: 'x', value: (_u, v) => (v == null ? '' : (xLabels[v] ?? '')) },
        ...series.map((s) => ({
          label: s.label,
          stroke: s.color,
          fill: kind === 'bars' ? s.color + 'cc' : undefined,
          width: kind === 'bars' ? 1 : 2,
          paths: bars,
          points: { show: kind === 'lines' },
          value: (_u: uPlot, v: number | null) => (v == null ? '—' : yFormat(v)),
        })),
      ],
    };
    const plot = new uPlot(opts, [xs, ...series.map((s) => s.values)] as uPlot.AlignedData, el);
    return () => plot.destroy();
  }, [title, xLabels, series, kind, yFormat, height]);

  return <div className="chart" data-testid={testId} ref={box} />;
}
