/**
 * The notification at the end of a backup the user did not watch (the tab hidden, or the
 * schedule started it). Off until the user turns it on; turning it on is what asks the
 * browser's permission, so the prompt never comes out of nowhere.
 */
import type { BackupProgress } from '../backup/backup';
import { withStorage } from '../ui/storage';

const KEY = 'ditto-notify';
/** What `withStorage` warns of: where site data is blocked, notifications stay off. */
const WHAT = 'notification setting';

export function notificationsSupported(): boolean {
  return typeof Notification !== 'undefined';
}

/** On: the user turned it on here and the browser allows it. */
export function notificationsOn(): boolean {
  return (
    notificationsSupported() &&
    withStorage(WHAT, (s) => s.getItem(KEY), null) === 'on' &&
    Notification.permission === 'granted'
  );
}

/** Turns notifications on (asking the browser, from the click that calls this) or off. */
export async function setNotifications(on: boolean): Promise<NotificationPermission | 'unsupported'> {
  if (!notificationsSupported()) return 'unsupported';
  if (!on) {
    withStorage(WHAT, (s) => s.removeItem(KEY), undefined);
    return Notification.permission;
  }
  const permission = Notification.permission === 'granted' ? 'granted' : await Notification.requestPermission();
  if (permission === 'granted') withStorage(WHAT, (s) => s.setItem(KEY, 'on'), undefined);
  return permission;
}

/** What a notification says of a backup that ended. */
export function endedText(p: BackupProgress): { title: string; body: string } {
  if (p.phase === 'done' && p.version) {
    const missing = p.skipped.length ? `, ${p.skipped.length} files could not be read` : '';
    return {
      title: `Backup of “${p.source}” done`,
      body: `Version #${p.version.id}: ${p.version.stats.files} files${missing}.`,
    };
  }
  if (p.phase === 'cancelled') return { title: `Backup of “${p.source}” cancelled`, body: p.message ?? '' };
  return { title: `Backup of “${p.source}” failed`, body: p.message ?? 'Open the page to see why.' };
}

export function notifyEnded(p: BackupProgress) {
  if (!notificationsOn()) return;
  const { title, body } = endedText(p);
  try {
    new Notification(title, { body, tag: `ditto-backup-${p.source}` });
  } catch (e) {
    // Some browsers only show notifications from a service worker: the page still says it.
    console.warn('notification not shown:', e);
  }
}
