import { afterEach, describe, expect, it, vi } from 'vitest';
import { notificationsOn, setNotifications } from './notify';
import { blockSiteData, unblockSiteData } from '../ui/blockedStorage.testkit';

describe('notifications where the browser blocks site data', () => {
  afterEach(() => {
    vi.unstubAllGlobals();
    vi.restoreAllMocks();
    unblockSiteData();
  });

  it('are off, and turning them on or off does not throw', async () => {
    vi.spyOn(console, 'warn').mockImplementation(() => {});
    vi.stubGlobal('Notification', { permission: 'granted', requestPermission: async () => 'granted' });
    blockSiteData();
    expect(notificationsOn()).toBe(false);
    await expect(setNotifications(true)).resolves.toBe('granted');
    await expect(setNotifications(false)).resolves.toBe('granted');
    expect(notificationsOn()).toBe(false);
  });
});
