import AxeBuilder from '@axe-core/playwright';
import { expect, test, type Page, type TestInfo } from '@playwright/test';
import { writeFileSync } from 'node:fs';
import { npmVersions } from '../datasets';
import { startServer, type RunningServer } from '../server';

// Every view of the page, empty and with data backed up, in both colour schemes: axe-core
// finds no serious or critical accessibility violation, and a screenshot of each is attached.
const PKG = process.env.DITTO_E2E_PACKAGE ?? 'preact';

let server: RunningServer;
let folders: string[];

test.describe.configure({ mode: 'serial' });

test.beforeAll(async () => {
  folders = npmVersions(PKG, 2);
  server = await startServer();
});
test.afterAll(async () => {
  await server?.stop();
});

/** What each known view shows once it has loaded; a view not listed here is waited for generically. */
const READY: Record<string, string> = {
  'tab-backup': 'dropzone',
  'tab-versions': 'versions-panel',
  'tab-dashboard': 'dashboard',
  'tab-search': 'search-panel',
};
const EMPTY_READY: Record<string, string> = {
  ...READY,
  'tab-versions': 'versions-empty',
  'tab-dashboard': 'dash-empty',
  'tab-search': 'search-no-versions',
};

/**
 * Axe in both colour schemes; soft assertions, so that every view is checked and reported.
 * With reduced motion, so that a scheme switch does not leave a control mid-transition
 * (axe would measure the contrast of colours on their way).
 */
async function audit(page: Page, testInfo: TestInfo, name: string) {
  for (const scheme of ['light', 'dark'] as const) {
    await page.emulateMedia({ colorScheme: scheme, reducedMotion: 'reduce' });
    const { violations } = await new AxeBuilder({ page }).analyze();
    const bad = violations
      .filter((v) => v.impact === 'serious' || v.impact === 'critical')
      .map((v) => `${v.id} (${v.impact}): ${v.help} — ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
    expect.soft(bad, `${name}, ${scheme} scheme`).toEqual([]);
    // The lesser findings too, for whoever polishes the view next.
    const all = violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.length }));
    const base = testInfo.outputPath(`${name}-${scheme}`.replace(/[^\w.-]+/g, '-'));
    writeFileSync(`${base}.json`, JSON.stringify(all, null, 1));
    await testInfo.attach(`${name} (${scheme}) axe findings`, {
      path: `${base}.json`,
      contentType: 'application/json',
    });
    const shot = `${base}.png`;
    await page.screenshot({ path: shot, fullPage: true });
    await testInfo.attach(`${name} (${scheme})`, { path: shot, contentType: 'image/png' });
  }
  await page.emulateMedia({ colorScheme: 'light' });
}

/** Visits every tab the page offers (found in its tablist, so views added later are covered). */
async function auditTabs(page: Page, testInfo: TestInfo, when: string, ready: Record<string, string>) {
  const tabs = page.getByRole('tablist').getByRole('tab');
  const n = await tabs.count();
  expect(n).toBeGreaterThanOrEqual(4);
  for (let i = 0; i < n; i++) {
    const tab = tabs.nth(i);
    const id = (await tab.getAttribute('data-testid')) ?? `tab-${i}`;
    await tab.click();
    await expect(tab).toHaveAttribute('aria-selected', 'true');
    const panel = page.getByRole('tabpanel');
    if (ready[id]) await expect(panel.getByTestId(ready[id]).first()).toBeVisible();
    else await expect(panel.getByText(/Loading/)).toHaveCount(0);
    await audit(page, testInfo, `${when} ${(await tab.textContent())?.trim()}`);
  }
}

test('a wrong token is explained with the next step, and a pasted token opens the page', async ({ page }, testInfo) => {
  await page.goto(`${server.url}/#token=${'0'.repeat(48)}`);
  await expect(page.getByTestId('token-error')).toContainText('refused this access token');
  await expect(page.getByTestId('token-error')).toContainText('npm start');
  // Nothing that cannot work with this token is offered.
  await expect(page.getByRole('tablist')).toHaveCount(0);
  await audit(page, testInfo, 'wrong token');
  // Pasted as a copy from a chat brings it: a zero-width space inside, a line break after
  // (invalid in a request header: every request failed before it was sent).
  const t = server.token;
  await page.getByTestId('token-input').fill(`${t.slice(0, 8)}\u200B${t.slice(8)}\n`);
  await page.getByRole('button', { name: 'Use this token' }).click();
  await expect(page.getByTestId('token-scope')).toHaveAttribute('data-scope', 'full');
  await expect(page.getByTestId('token-error')).toHaveCount(0);
  await expect(page.getByTestId('tab-backup')).toBeVisible();
  // Kept for the next visit, like a token from the link.
  await page.goto(server.url);
  await expect(page.getByTestId('token-scope')).toHaveAttribute('data-scope', 'full');
});

test('the tabs are a tablist worked by the keyboard', async ({ page }) => {
  await page.goto(server.appUrl);
  const tabs = page.getByRole('tablist', { name: 'Views' }).getByRole('tab');
  await expect(tabs.first()).toHaveAttribute('aria-selected', 'true');
  await tabs.first().focus();
  await page.keyboard.press('ArrowRight');
  await expect(tabs.nth(1)).toHaveAttribute('aria-selected', 'true');
  await expect(tabs.nth(1)).toBeFocused();
  await expect(page.getByRole('tabpanel')).toHaveAttribute('aria-labelledby', (await tabs.nth(1).getAttribute('id'))!);
  await page.keyboard.press('End');
  await expect(tabs.last()).toHaveAttribute('aria-selected', 'true');
  await page.keyboard.press('ArrowRight');
  await expect(tabs.first()).toHaveAttribute('aria-selected', 'true');
  await expect(tabs.first()).toBeFocused();
  // Only the selected tab is in the Tab order.
  await expect(tabs.nth(1)).toHaveAttribute('tabindex', '-1');
});

test('every view, empty and with two versions backed up, has no serious accessibility violation', async ({
  page,
}, testInfo) => {
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(e.message));
  await page.setViewportSize({ width: 1280, height: 900 });
  await page.goto(server.appUrl);
  await expect(page.getByTestId('engine-ready')).toBeVisible();
  await auditTabs(page, testInfo, 'empty', EMPTY_READY);
  // An empty view's next step leads to it.
  await page.getByTestId('tab-dashboard').click();
  await page.getByTestId('dash-empty').getByRole('button', { name: 'Back up a folder' }).click();
  await expect(page.getByTestId('tab-backup')).toHaveAttribute('aria-selected', 'true');
  await page.getByTestId('tab-versions').click();
  await page.getByTestId('versions-empty').getByRole('button', { name: 'Back up a folder' }).click();
  await expect(page.getByTestId('tab-backup')).toHaveAttribute('aria-selected', 'true');

  await page.getByTestId('tab-backup').click();
  for (const f of folders) {
    await page.getByTestId('folder-input').setInputFiles(f);
    await page.getByTestId('backup-start').click();
    await expect(page.getByTestId('backup-done')).toBeVisible({ timeout: 120_000 });
  }
  await auditTabs(page, testInfo, 'with data', READY);

  // The states inside views: a version's tree, search results with their details.
  await page.getByTestId('tab-versions').click();
  await page.getByTestId('version-browse').first().click();
  await expect(page.getByTestId('version-browser')).toBeVisible();
  // The tree opens below every version row: it comes into view with the focus on its heading.
  const heading = page.getByTestId('version-browser').getByRole('heading').first();
  await expect(heading).toBeFocused();
  await expect(heading).toBeInViewport();
  // A file previewed in the page, inside the tree.
  await page.getByTestId('preview-file').first().click();
  await expect(page.getByTestId('file-preview').locator('pre, img, [data-testid=preview-none]')).toBeVisible();
  await audit(page, testInfo, 'version browser');

  await page.getByTestId('tab-search').click();
  // In the page: `auto` would send this page's first search to the server, whose answer has
  // no index records to show.
  await page.getByTestId('search-where').selectOption('page');
  await page.getByTestId('search-keywords').fill('createElement');
  await page.getByTestId('search-start').click();
  await expect(page.getByTestId('search-done')).toBeVisible({ timeout: 60_000 });
  // Plain words first; the index's record types only on demand.
  const done = page.getByTestId('search-done');
  await expect(done.getByTestId('search-summary')).toContainText(/^Found \d+ matches in \d+ of \d+ files/);
  await expect(done.getByTestId('search-summary')).not.toContainText(/tiny|infix|DedupSearch/);
  await expect(done.getByText(/Index records/)).toBeHidden();
  await done.getByText('How the search ran').click();
  await expect(done.getByText(/Index records/)).toBeVisible();
  // A result's file previewed with the search's hits marked.
  await page.getByTestId('search-preview').first().click();
  await expect(page.getByTestId('preview-text')).toHaveAttribute('data-marked-by', 'search');
  await audit(page, testInfo, 'search results');
  expect(errors).toEqual([]);
});
