import { describe, expect, it } from 'vitest';
import { duration } from './format';

describe('duration', () => {
  it('rounds up to whole seconds before it splits minutes off', () => {
    expect(duration(0.2)).toBe('1 s');
    expect(duration(59.5)).toBe('1 min 0 s');
    expect(duration(60)).toBe('1 min 0 s');
    expect(duration(119.5)).toBe('2 min 0 s');
    expect(duration(125.1)).toBe('2 min 6 s');
    expect(duration(null)).toBe('—');
    expect(duration(Infinity)).toBe('—');
  });
});
