import { afterEach, describe, expect, it, vi } from 'vitest';
import { deviceCacheOn, setDeviceCache } from './search';
import { blockSiteData, unblockSiteData } from '../ui/blockedStorage.testkit';

describe('the "Keep on this device" setting where the browser blocks site data', () => {
  afterEach(() => {
    vi.unstubAllGlobals();
    vi.restoreAllMocks();
    unblockSiteData();
  });

  it('reads as on, and turning it off or on does not throw', async () => {
    vi.spyOn(console, 'warn').mockImplementation(() => {});
    // No device cache to delete either: the browser keeps no site data.
    vi.stubGlobal('navigator', { storage: { getDirectory: () => Promise.reject(new Error('blocked')) } });
    blockSiteData();
    expect(deviceCacheOn()).toBe(true);
    await expect(setDeviceCache(false, null)).resolves.toBeUndefined();
    await expect(setDeviceCache(true, null)).resolves.toBeUndefined();
  });

  it('is remembered where site data is kept', async () => {
    const kept = new Map<string, string>();
    vi.stubGlobal('navigator', { storage: { getDirectory: () => Promise.reject(new Error('none')) } });
    vi.stubGlobal('localStorage', {
      getItem: (k: string) => kept.get(k) ?? null,
      setItem: (k: string, v: string) => kept.set(k, v),
      removeItem: (k: string) => kept.delete(k),
    });
    expect(deviceCacheOn()).toBe(true);
    await setDeviceCache(false, null);
    expect(deviceCacheOn()).toBe(false);
    await setDeviceCache(true, null);
    expect(deviceCacheOn()).toBe(true);
  });
});
