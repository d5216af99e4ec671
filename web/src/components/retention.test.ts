import { describe, expect, it } from 'vitest';
import { policyOf } from './RetentionPanel';

const form = (f: Partial<Parameters<typeof policyOf>[0]>) => ({
  keep_last: '',
  keep_hourly: '',
  keep_daily: '',
  keep_weekly: '',
  keep_monthly: '',
  keep_yearly: '',
  keep_within: '',
  ...f,
});

describe('policyOf', () => {
  it('sends only the rules filled in, counts as numbers', () => {
    expect(policyOf(form({ keep_last: ' 2 ', keep_daily: '7', keep_within: ' 30d ' }))).toEqual({
      policy: { keep_last: 2, keep_daily: 7, keep_within: '30d' },
    });
    expect(policyOf(form({ keep_yearly: '0', keep_last: '1' }))).toEqual({ policy: { keep_yearly: 0, keep_last: 1 } });
  });

  it('refuses an empty policy (it would keep everything) and counts that are not whole numbers', () => {
    expect(policyOf(form({ keep_within: '  ' }))).toHaveProperty('problem');
    // Every rule 0 keeps nothing; the server refuses it, so the form does too.
    expect(policyOf(form({ keep_last: '0', keep_daily: '0' }))).toHaveProperty('problem', expect.stringContaining('0'));
    expect(policyOf(form({ keep_last: '0', keep_within: '1d' }))).toEqual({
      policy: { keep_last: 0, keep_within: '1d' },
    });
    expect(policyOf(form({ keep_last: '1.5' }))).toHaveProperty('problem', expect.stringContaining('Keep last'));
    expect(policyOf(form({ keep_weekly: '-1' }))).toHaveProperty('problem', expect.stringContaining('Weekly'));
    expect(policyOf(form({ keep_monthly: '1000001' }))).toHaveProperty('problem');
  });
});
