// What the scripts of test/console share: Chromium launched as the tests
// run it (Debian's, with its own sandbox on), pages that collect console
// errors once told to, screenshots into $SHOTS, and signing in and out.
import { chromium } from "playwright-core";

export const url = process.env.HUTCH_URL;
export const key = process.env.HUTCH_API_KEY;

export function check(ok, what) {
  if (!ok) throw new Error(what);
}

/** A browser for one script. errors holds every console error and page
 * error after watch() (before signing in, a refused key's 401 is one);
 * saved, the screenshots taken. */
export async function start() {
  const browser = await chromium.launch({ executablePath: process.env.CHROMIUM, chromiumSandbox: true });
  const saved = [];
  const errors = [];
  let watching = false;
  return {
    browser,
    saved,
    errors,
    /** A page in a context of its own, 1280x800 unless opts say. */
    async page(opts = {}) {
      const context = await browser.newContext({ viewport: { width: 1280, height: 800 }, ...opts });
      const page = await context.newPage();
      page.setDefaultTimeout(30_000);
      page.on("console", (m) => watching && m.type() === "error" && errors.push(m.text()));
      page.on("pageerror", (e) => watching && errors.push(String(e)));
      return page;
    },
    watch() {
      watching = true;
    },
    noErrors() {
      check(errors.length === 0, `console errors: ${JSON.stringify(errors)}`);
    },
    /** shot saves a screenshot of the page, after checking that every
     * control on it has a name a screen reader can say. */
    async shot(page, name) {
      const unnamed = await page.evaluate(() =>
        [...document.querySelectorAll("input, select, textarea, button")]
          .filter((el) => el.type !== "hidden" && el.checkVisibility())
          .filter((el) => !(el.getAttribute("aria-label") || el.getAttribute("aria-labelledby") || el.labels?.length || el.title || (el.tagName === "BUTTON" && el.textContent.trim())))
          .map((el) => el.outerHTML.slice(0, 160)),
      );
      check(unnamed.length === 0, `${name}: controls without a name: ${unnamed.join(" ")}`);
      const path = `${process.env.SHOTS}/${name}.png`;
      await page.screenshot({ path, fullPage: true });
      saved.push(path);
    },
    close: () => browser.close(),
  };
}

/** api calls the daemon with its own key and returns the answer's JSON.
 * A thing already gone (404) is no failure: cleanups call it. */
export async function api(method, path, body) {
  const res = await fetch(new URL(path, url), {
    method,
    headers: { Authorization: `Bearer ${key}`, ...(body === undefined ? {} : { "Content-Type": "application/json" }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  if (!res.ok && res.status !== 404) throw new Error(`${method} ${path}: ${res.status} ${text}`);
  return res.ok && text ? JSON.parse(text) : undefined;
}

export async function signIn(page, k) {
  await page.getByLabel("API key").fill(k);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("table", { name: "Sandboxes" }).waitFor();
}

export async function signOut(page) {
  await page.getByRole("button", { name: "Sign out" }).click();
  await page.getByLabel("API key").waitFor();
}
