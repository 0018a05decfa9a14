// A region of a service's preview shot from the console: the region drawn
// with the mouse over the preview frame, the PNG downloaded. test/e2e's
// TestBrowser runs it (the daemon needs the browser template), with a
// sandbox ($SANDBOX) whose service ($SERVICE) serves a page whose left half
// is red and right half blue. It draws a region across the middle of the
// frame and prints one JSON line: {"values": {"region": path, "clip":
// {x, y, w, h}, "frame": {w, h}}}; the Go test checks the PNG's pixels.
import { check, key, start, url } from "./lib.mjs";

const { SHOTS: shots, SANDBOX: id, SERVICE: service } = process.env;
const run = await start();


try {
  const page = await run.page({ acceptDownloads: true });
  await page.context().addInitScript((k) => sessionStorage.setItem("hutch.apiKey", k), key);
  page.setDefaultTimeout(60_000);
  run.watch();

  await page.goto(`${url}#/sandboxes/${id}`);
  await page.getByRole("button", { name: `Preview ${service}` }).click();
  await page.locator("#preview-status").filter({ hasText: `${service}: running` }).waitFor();
  const frame = page.locator('iframe[title="Preview"]');
  await page.waitForFunction(() => document.querySelector('iframe[title="Preview"]')?.getAttribute("src"));

  // The region: 200x100 across the frame's middle, from 40 px down.
  await page.getByRole("button", { name: "Screenshot a region" }).click();
  const box = await frame.boundingBox();
  const inner = await frame.evaluate((f) => ({ left: f.clientLeft, top: f.clientTop, w: f.clientWidth, h: f.clientHeight }));
  const x0 = box.x + inner.left + Math.round(inner.w / 2) - 100;
  const y0 = box.y + inner.top + 40;
  const downloaded = page.waitForEvent("download");
  await page.mouse.move(x0, y0);
  await page.mouse.down();
  await page.mouse.move(x0 + 100, y0 + 50, { steps: 5 });
  await page.mouse.move(x0 + 200, y0 + 100, { steps: 5 });
  await page.mouse.up();
  const download = await downloaded;
  const region = `${shots}/region.png`;
  await download.saveAs(region);
  await page.locator("#screenshot-status").filter({ hasText: "Saved a 200×100 region as a PNG." }).waitFor();
  check(/\.png$/.test(download.suggestedFilename()), `the download's name: ${download.suggestedFilename()}`);
  run.noErrors();
  const clip = { x: Math.round(inner.w / 2) - 100, y: 40, w: 200, h: 100 };
  console.log(JSON.stringify({ values: { region, clip, frame: { w: inner.w, h: inner.h } } }));
} finally {
  await run.close();
}
