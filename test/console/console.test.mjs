// The web console driven in Chromium by playwright-core (test/e2e's
// TestConsole runs it, as an unprivileged user with Chromium's own sandbox
// on). It signs in, is refused a wrong key, creates a sandbox, runs a
// command in it, deletes it, and saves screenshots of the main views at
// 1280x800 and 390x844, light and dark, into $SHOTS. Any console error after signing in
// fails it. Then it times a list of 500 sandboxes, from its data arriving
// to its last row painted, and from opening the page. It prints one JSON
// line: {"screenshots": [...], "render500Ms": N, "open500Ms": N}.
import { check, key, signIn, signOut, start, url } from "./lib.mjs";

const run = await start();



try {
  const page = await run.page();

  await page.goto(url);
  // From the keyboard: the key's field has the focus, Enter signs in.
  await page.keyboard.type("hutch_not_a_key");
  await page.keyboard.press("Enter");
  await page.getByRole("alert").filter({ hasText: /refused/ }).waitFor();

  await signIn(page, key);
  run.watch();
  check(!(await page.evaluate(() => location.href)).includes(key), "the key is in the URL");
  await run.shot(page, "sandboxes-empty-1280x800");

  await page.getByRole("button", { name: "Create sandbox" }).click();
  const status = page.getByRole("status");
  await status.filter({ hasText: /^Created / }).waitFor();
  const id = (await status.textContent()).match(/Created (\w+)/)[1];
  await page.getByRole("link", { name: id }).waitFor();
  const row = page.locator(`tr[data-id="${id}"]`);
  await row.locator("td.idle").filter({ hasText: /^(suspend in \d+:\d\d|awake)/ }).waitFor();
  await row.locator("td.usage").filter({ hasText: /MiB/ }).waitFor();
  // Read again while on screen: two readings give the CPU's share.
  await row.locator("td.usage").filter({ hasText: /^\d+% CPU · \d+ MiB/ }).waitFor();
  await run.shot(page, "sandboxes-1280x800");

  // The list's filters, and the actions behind More.
  const listed = page.getByRole("table", { name: "Sandboxes" });
  await page.getByLabel("Filter", { exact: true }).fill("no-such-sandbox");
  await listed.getByText("No sandbox matches the filter.").waitFor();
  await page.getByLabel("Filter", { exact: true }).fill(id);
  await page.getByRole("link", { name: id }).waitFor();
  await page.locator("#filter-state").selectOption("suspended");
  await listed.getByText("No sandbox matches the filter.").waitFor();
  await page.locator("#filter-state").selectOption("");
  await page.getByLabel("Filter", { exact: true }).fill("");
  const more = async (action) => {
    await page.getByLabel(`More actions for ${id}`, { exact: true }).first().click();
    await page.getByRole("button", { name: `${action} ${id}` }).click();
    await status.filter({ hasText: new RegExp(`^${action} ${id}: (?!…)`) }).waitFor();
    return (await status.textContent()).slice(`${action} ${id}: `.length);
  };
  check((await more("Pause")) === "done.", "pause");
  await row.locator("td.state").filter({ hasText: "paused" }).waitFor();
  await page.getByRole("button", { name: `Resume ${id}` }).click();
  await row.locator("td.state").filter({ hasText: "running" }).waitFor();
  check((await more("Keep alive")) === "the idle timer starts again.", "keep alive");
  const forked = (await more("Fork")).match(/^made (\w+)\.$/);
  check(forked, `fork: ${await status.textContent()}`);
  await page.getByRole("button", { name: `Delete ${forked[1]}` }).click();
  await status.filter({ hasText: `Delete ${forked[1]}: done.` }).waitFor();
  const snapshot = (await more("Snapshot")).match(/^saved as template (\S+)\.$/);
  check(snapshot, `snapshot: ${await status.textContent()}`);
  const removed = await page.evaluate(
    async ([k, name]) => (await fetch(`/v1/templates/${name}`, { method: "DELETE", headers: { Authorization: `Bearer ${k}` } })).status,
    [key, snapshot[1]],
  );
  check(removed === 204 || removed === 200, `delete the snapshot's template: ${removed}`);

  // A create with options: limits, no network, for a user.
  await page.getByText("More options").click();
  await page.getByLabel("Memory (MiB)").fill("256");
  await page.locator("#network").selectOption("none");
  await page.getByLabel("For user").fill("alice");
  await page.getByRole("button", { name: "Create sandbox" }).click();
  await status.filter({ hasText: /^Created / }).waitFor();
  const withOptions = (await status.textContent()).match(/Created (\w+)/)[1];
  await page.locator(`tr[data-id="${withOptions}"] td`).filter({ hasText: /^alice$/ }).waitFor();
  const made = await page.evaluate(
    async ([k, sid]) => (await fetch(`/v1/sandboxes/${sid}`, { headers: { Authorization: `Bearer ${k}` } })).json(),
    [key, withOptions],
  );
  check(made.memory_mb === 256 && made.network.mode === "none" && made.user === "alice", `created with options: ${JSON.stringify(made)}`);
  await page.getByRole("button", { name: `Delete ${withOptions}` }).click();
  await status.filter({ hasText: `Delete ${withOptions}: done.` }).waitFor();
  await page.getByText("More options").click();

  await page.getByRole("link", { name: id }).click();
  await page.getByRole("button", { name: "Open a terminal" }).click();
  await page.locator("#terminal-status").filter({ hasText: /^Connected/ }).waitFor();
  const terminal = page.getByRole("region", { name: "Terminal" });
  await terminal.click();
  await page.keyboard.type("echo hi $((6*7))\n");
  await page.waitForFunction(
    () => /^hi 42$/m.test(document.querySelector(".xterm-rows")?.innerText ?? ""),
    undefined,
    { timeout: 20_000 },
  );
  // A new file, edited and saved in the editor, then read with cat.
  await page.getByRole("textbox", { name: "New file" }).fill("hello.txt");
  await page.getByRole("button", { name: "Create" }).click();
  await page.getByText("Editing /home/user/workspace/hello.txt").waitFor();
  await page.locator(".cm-content").click();
  await page.keyboard.type("written in the console");
  await page.getByRole("button", { name: "Save" }).click();
  await page.locator("#files-status").filter({ hasText: "Saved /home/user/workspace/hello.txt (22 bytes)." }).waitFor();
  await page.getByRole("textbox", { name: "Command", exact: true }).fill("cat hello.txt");
  await page.getByRole("button", { name: "Run" }).click();
  await page.getByLabel("Output").filter({ hasText: "[exit 0]" }).waitFor();
  check((await page.getByLabel("Output").textContent()).startsWith("written in the console"), "cat of the file saved");

  // A service, previewed in the frame (its own origin), status running.
  await page.getByRole("textbox", { name: "Command", exact: true }).fill("mkdir -p site && echo '<h1>preview works</h1>' > site/index.html");
  await page.getByRole("button", { name: "Run" }).click();
  await page.getByLabel("Output").filter({ hasText: "[exit 0]" }).waitFor();
  await page.locator("#service-name").fill("web");
  await page.locator("#service-command").fill("cd site && exec python3 -m http.server 8000");
  await page.getByRole("button", { name: "Start service" }).click();
  await page.getByRole("button", { name: "Preview web" }).click();
  await page.frameLocator('iframe[title="Preview"]').getByRole("heading", { name: "preview works" }).waitFor();
  await page.locator("#preview-status").filter({ hasText: "web: running" }).waitFor();
  // Its log, followed: the frame's request is in it.
  await page.getByRole("button", { name: "Logs web" }).click();
  await page.locator(".service-log").getByRole("log", { name: "Log of web" }).filter({ hasText: '"GET / HTTP/1.1" 200' }).waitFor();
  check(
    await page.evaluate(() => {
      try {
        return document.querySelector("iframe").contentWindow.sessionStorage === undefined;
      } catch {
        return true; // another origin: the console's storage is out of its reach
      }
    }),
    "the preview frame shares the console's origin",
  );

  await page.getByRole("textbox", { name: "Command", exact: true }).fill("echo hi");
  await page.getByRole("button", { name: "Run" }).click();
  const output = page.getByLabel("Output");
  await output.filter({ hasText: "[exit 0]" }).waitFor();
  check((await output.textContent()).startsWith("hi\n"), `the command's output: ${await output.textContent()}`);
  await run.shot(page, "sandbox-1280x800");

  // Suspend and resume from the list.
  await page.getByRole("link", { name: "Sandboxes" }).click();
  await page.getByRole("button", { name: `Suspend ${id}` }).click();
  await page.getByRole("button", { name: `Resume ${id}` }).waitFor({ timeout: 60_000 });
  await page.getByRole("button", { name: `Resume ${id}` }).click();
  await page.getByRole("button", { name: `Suspend ${id}` }).waitFor({ timeout: 60_000 });

  // A secret: set, listed, its value never on the page again.
  const secret = `console-secret-${Date.now()}`;
  await page.getByRole("link", { name: "Secrets" }).click();
  await page.getByLabel("Name").fill("CONSOLE_TEST_TOKEN");
  await page.getByLabel("Value").fill(secret);
  await page.getByLabel("Description").fill("set by the console's test");
  await page.getByRole("button", { name: "Set secret" }).click();
  await page.locator("#secrets-status").filter({ hasText: "Set CONSOLE_TEST_TOKEN." }).waitFor();
  await page.getByRole("cell", { name: "CONSOLE_TEST_TOKEN", exact: true }).waitFor();
  const shown = async () =>
    page.evaluate(
      (v) => document.documentElement.outerHTML.includes(v) || [...document.querySelectorAll("input")].some((i) => i.value.includes(v)),
      secret,
    );
  check(!(await shown()), "the secret's value is on the page after it was set");
  await run.shot(page, "secrets-1280x800");
  await page.reload();
  await page.getByRole("cell", { name: "CONSOLE_TEST_TOKEN", exact: true }).waitFor();
  check(!(await shown()), "the secret's value is on the page after a reload");
  await page.getByRole("button", { name: "Delete secret CONSOLE_TEST_TOKEN" }).click();
  await page.locator("#secrets-status").filter({ hasText: "Deleted CONSOLE_TEST_TOKEN." }).waitFor();

  // A key of another workspace, made on the Keys page (shown once), never
  // sees this sandbox.
  await page.getByRole("link", { name: "Keys" }).click();
  await page.getByLabel("Key name").fill("console-test-other");
  await page.getByLabel("Workspace").fill("console-other");
  await page.getByRole("button", { name: "Make key" }).click();
  const field = page.getByRole("textbox", { name: "The key console-test-other" });
  await field.waitFor();
  const other = await field.inputValue();
  check(/^hutch_[0-9a-f]+$/.test(other), `the key shown: ${other}`);
  await run.shot(page, "keys-1280x800");
  await page.reload();
  await page.getByRole("cell", { name: "console-test-other", exact: true }).waitFor();
  check(!(await page.content()).includes(other), "the key is shown again after a reload");
  await page.getByRole("button", { name: "Sign out" }).click();
  await page.getByLabel("API key").fill(other);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("table", { name: "Sandboxes" }).getByText("No sandboxes yet.").waitFor();
  check((await page.getByRole("link", { name: id }).count()) === 0, "another workspace's key sees the sandbox");
  await page.getByRole("button", { name: "Sign out" }).click();
  await page.getByLabel("API key").fill(key);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("link", { name: id }).waitFor();
  await page.getByRole("link", { name: "Keys" }).click();
  await page.getByRole("button", { name: "Delete key console-test-other" }).click();
  await page.locator("#keys-status").filter({ hasText: "Deleted console-test-other." }).waitFor();

  await page.getByRole("link", { name: "Health" }).click();
  await page.getByRole("table", { name: "Runtimes" }).getByRole("rowheader", { name: "runc", exact: true }).waitFor();
  await run.shot(page, "health-1280x800");

  await page.setViewportSize({ width: 390, height: 844 });
  await page.getByRole("link", { name: "Sandboxes" }).click();
  await page.getByRole("link", { name: id }).waitFor();
  await run.shot(page, "sandboxes-390x844");
  await page.getByRole("link", { name: id }).click();
  await page.getByRole("button", { name: "Run" }).waitFor();
  await run.shot(page, "sandbox-390x844");

  // Dark, as the system asks: the page's own colours change.
  const background = () => page.evaluate(() => getComputedStyle(document.documentElement).backgroundColor);
  check((await background()) === "rgb(255, 255, 255)", `light background: ${await background()}`);
  await page.emulateMedia({ colorScheme: "dark" });
  check((await background()) === "rgb(13, 17, 23)", `dark background: ${await background()}`);
  await run.shot(page, "sandbox-dark-390x844");
  await page.setViewportSize({ width: 1280, height: 800 });
  await page.getByRole("link", { name: "Sandboxes" }).click();
  await page.getByRole("link", { name: id }).waitFor();
  await run.shot(page, "sandboxes-dark-1280x800");
  await page.emulateMedia({ colorScheme: "light" });

  await page.getByRole("link", { name: "Sandboxes" }).click();
  await page.getByRole("button", { name: `Delete ${id}` }).click();
  await status.filter({ hasText: `Delete ${id}: done.` }).waitFor();
  await page.getByRole("link", { name: id }).waitFor({ state: "detached" });
  run.noErrors();

  // A list of 500 sandboxes (the API's answer stood in for, so as not to
  // make 500), timed in the page from the list's answer arriving to its
  // last row painted, and, for the record, from opening the page.
  const many = await run.browser.newContext({ viewport: { width: 1280, height: 800 } });
  await many.addInitScript((k) => sessionStorage.setItem("hutch.apiKey", k), key);
  await many.addInitScript((last) => {
    const fetched = window.fetch;
    window.fetch = async (...args) => {
      const resp = await fetched(...args);
      if (String(args[0]).endsWith("/v1/sandboxes") && window.__listArrived === undefined) {
        window.__listArrived = performance.now();
      }
      return resp;
    };
    new MutationObserver((_, observer) => {
      if (window.__listArrived === undefined || !document.querySelector(`a[href$="${last}"]`)) return;
      observer.disconnect();
      requestAnimationFrame(() => (window.__lastRowPainted = performance.now()));
    }).observe(document, { childList: true, subtree: true });
  }, "s00000000499");
  const now = Date.now();
  const sandboxes = Array.from({ length: 500 }, (_, i) => ({
    id: `s${String(i).padStart(11, "0")}`,
    state: i % 7 ? "running" : "suspended",
    runtime: i % 2 ? "runc" : "gvisor",
    template: "base",
    created_at: new Date(now - i * 60_000).toISOString(),
  }));
  await many.route("**/v1/sandboxes", (r) =>
    r.request().method() === "GET" ? r.fulfill({ json: { sandboxes } }) : r.continue(),
  );
  const list = await many.newPage();
  const began = Date.now();
  await list.goto(`${url}#/sandboxes`);
  await list.getByRole("link", { name: sandboxes[499].id }).waitFor();
  const openMs = Date.now() - began;
  await list.waitForFunction(() => window.__lastRowPainted !== undefined);
  const renderMs = await list.evaluate(() => window.__lastRowPainted - window.__listArrived);
  check((await list.locator("table tbody tr").count()) === 500, "500 rows");
  await many.close();
  console.log(JSON.stringify({ screenshots: run.saved, render500Ms: Math.round(renderMs), open500Ms: openMs }));
} finally {
  await run.close();
}
