import { afterEach, describe, expect, it, vi } from 'vitest';
import { notificationsOn, setNotifications } from './notify';

describe('notifications where the browser blocks site data', () => {
  afterEach(() => {
    vi.unstubAllGlobals();
    vi.restoreAllMocks();
    delete (globalThis as { localStorage?: Storage }).localStorage;
  });

  it('are off, and turning them on or off does not throw', async () => {
    vi.spyOn(console, 'warn').mockImplementation(() => {});
    vi.stubGlobal('Notification', { permission: 'granted', requestPermission: async () => 'granted' });
    Object.defineProperty(globalThis, 'localStorage', {
      configurable: true,
      get() {
        throw new DOMException('The operation is insecure.', 'SecurityError');
      },
    });
    expect(notificationsOn()).toBe(false);
    await expect(setNotifications(true)).resolves.toBe('granted');
    await expect(setNotifications(false)).resolves.toBe('granted');
    expect(notificationsOn()).toBe(false);
  });
});
