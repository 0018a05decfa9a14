// A sandbox's live desktop on its page, in Chromium: test/e2e's
// TestDesktop runs it (the daemon needs the desktop template), with a
// sandbox ($SANDBOX) whose desktop runs. The panel's frame (noVNC, in the
// sandbox's own origin) draws the desktop on a canvas that is not blank;
// an action sent through the API (a right click, which opens the
// desktop's menu) changes the canvas and shows in the recent actions;
// "Take control" loads the control stream. It prints one JSON line:
// {"values": {"colours": N, "changed": true}}.
import { api, check, key, start, url } from "./lib.mjs";

const { SANDBOX: id } = process.env;
const run = await start();
try {
  const page = await run.page();
  await page.context().addInitScript((k) => sessionStorage.setItem("hutch.apiKey", k), key);
  page.setDefaultTimeout(60_000);
  run.watch();
  await page.goto(`${url}#/sandboxes/${id}`);
  const panel = page.getByRole("region", { name: "Desktop" });
  await page.locator("#desktop-status").filter({ hasText: "View only." }).waitFor();
  check(!(await panel.getByRole("switch", { name: "Take control" }).isChecked()), "the view starts with control on");
  const src = await page.locator('iframe[title="Live desktop"]').getAttribute("src");
  check(/^http:\/\/6091-/.test(src) && src.includes("view_only=true"), `the view-only frame loads ${src}`);

  // The canvas noVNC draws on, read inside its frame.
  const frame = () => page.frames().find((f) => f.url().includes(`6091-${id}.`) || f.url().includes(`6090-${id}.`));
  const canvas = async () =>
    (await frame()?.evaluate(() => {
      const c = [...document.querySelectorAll("canvas")].find((c) => c.width > 100);
      if (!c) return null;
      const data = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
      const colours = new Set();
      let sum = 0;
      for (let i = 0; i < data.length; i += 4 * 97) {
        colours.add((data[i] << 16) | (data[i + 1] << 8) | data[i + 2]);
        sum = (sum * 31 + data[i] + data[i + 1] * 7 + data[i + 2] * 13) % 1_000_000_007;
      }
      return { width: c.width, colours: colours.size, sum };
    }).catch(() => null)) ?? null;
  let before = null;
  for (let i = 0; i < 120 && !(before?.colours > 3); i++) {
    await page.waitForTimeout(250);
    before = await canvas();
  }
  check(before?.colours > 3, `the live view's canvas is blank: ${JSON.stringify(before)}`);
  await run.shot(page, "desktop");

  await api("POST", `/v1/sandboxes/${id}/desktop/actions`, { actions: [{ type: "click", x: 500, y: 400, button: "right" }] });
  let after = before;
  for (let i = 0; i < 120 && after?.sum === before.sum; i++) {
    await page.waitForTimeout(250);
    after = await canvas();
  }
  check(after && after.sum !== before.sum, "the canvas did not change after the action");
  await panel.getByRole("list", { name: "Recent actions" }).getByText("click at 500,400 (right)").waitFor();

  await panel.getByRole("switch", { name: "Take control" }).check();
  await page.locator("#desktop-status").filter({ hasText: "You have control" }).waitFor();
  const control = await page.locator('iframe[title="Live desktop"]').getAttribute("src");
  check(/^http:\/\/6090-/.test(control) && !control.includes("view_only=true"), `the control frame loads ${control}`);
  run.noErrors();
  console.log(JSON.stringify({ screenshots: run.saved, values: { colours: before.colours, changed: true } }));
} finally {
  await run.close();
  await api("POST", `/v1/sandboxes/${id}/desktop/actions`, { actions: [{ type: "key", keys: "Escape" }] }).catch(() => {});
}
