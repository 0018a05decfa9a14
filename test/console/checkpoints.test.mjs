// A sandbox's checkpoints on its page, in Chromium, driven by
// playwright-core (test/e2e's TestConsole runs it): a checkpoint is taken
// from the page, a file changed through the API shows in the diff with
// its unified diff, and the rollback button (confirmed) brings the file
// back, which the API then reads. It fails on any console error after
// signing in, deletes its sandbox (also when it fails), and prints one
// JSON line: {"screenshots": []}.
import { api, check, key, signIn, start, url } from "./lib.mjs";

const run = await start();
let id = "";
let page;
try {
  id = (await api("POST", "/v1/sandboxes", {})).id;
  const file = "/home/user/workspace/notes.txt";
  await api("POST", `/v1/sandboxes/${id}/exec`, { command: "printf 'one\\ntwo\\n' > notes.txt" });
  page = await run.page();
  page.on("dialog", (d) => d.accept());
  await page.goto(url);
  await signIn(page, key);
  run.watch();
  await page.getByRole("link", { name: id }).click();
  await page.getByRole("heading", { name: `Sandbox ${id}` }).waitFor();

  const panel = page.getByRole("region", { name: "Checkpoints" });
  await panel.getByLabel("Name").fill("from the console");
  await panel.getByRole("button", { name: "Take a checkpoint" }).click();
  await page.locator("#checkpoints-status").filter({ hasText: /^Took c\d+\.$/ }).waitFor();
  const cp = (await page.locator("#checkpoints-status").textContent()).match(/c\d+/)[0];
  const row = panel.getByRole("table", { name: "Checkpoints" }).getByRole("row").filter({ hasText: "from the console" });
  await row.waitFor();

  await api("POST", `/v1/sandboxes/${id}/exec`, { command: "printf 'one\\nTWO\\n' > notes.txt" });
  await row.getByRole("button", { name: "Diff" }).click();
  const changed = page.getByRole("list", { name: `Changed since ${cp}` });
  await changed.getByText(`M ${file}`).waitFor();
  await changed.getByRole("button", { name: "diff" }).click();
  await page.getByLabel("Unified diff").filter({ hasText: "+TWO" }).waitFor();
  check((await page.getByLabel("Unified diff").textContent()).includes("-two\n+TWO"), "the unified diff");

  await row.getByRole("button", { name: "Roll back" }).click();
  await page.locator("#checkpoints-status").filter({ hasText: `Rolled back to ${cp}: running.` }).waitFor({ timeout: 60_000 });
  const after = await api("POST", `/v1/sandboxes/${id}/exec`, { command: "cat notes.txt" });
  check(after.stdout === "one\ntwo\n", `after the rollback the file holds ${JSON.stringify(after.stdout)}`);
  run.noErrors();
  console.log(JSON.stringify({ screenshots: run.saved }));
} catch (err) {
  const said = await page?.evaluate(() => [...document.querySelectorAll("[role=status]")].map((e) => `${e.id || e.className}: ${e.textContent}`)).catch(() => []);
  console.error(JSON.stringify({ statuses: said, errors: run.errors }, null, 1));
  throw err;
} finally {
  await run.close();
  if (id) await api("DELETE", `/v1/sandboxes/${id}`);
}
