// The console's health page in Chromium, driven by playwright-core (test/e2e's
// TestConsole runs it, as an unprivileged user with Chromium's own sandbox
// on). Signed in with the daemon's own key, it opens #/health and checks
// that runc shows as usable with the version the API reports, that the
// disk and the recent errors (the daemon's own key's only) are shown, that
// the nodes' table shows the daemon, a single box, as its one node (and a
// key's 403 hides it), that the page reads the health again by itself,
// and that it stops once left.
// It saves screenshots at 1280x800 and 390x844 into $SHOTS. Any console
// error after signing in fails it. It prints one JSON line last:
// {"screenshots": [...]}.
import { check, key, signIn, start, url } from "./lib.mjs";

const run = await start();

try {
  // What the API says, to hold the page up against.
  const res = await fetch(new URL("v1/health", url), { headers: { Authorization: `Bearer ${key}` } });
  check(res.ok, `GET /v1/health: ${res.status}`);
  const health = await res.json();
  const runc = health.backends.find((b) => b.name === "runc");
  check(runc?.usable, `the API says runc is not usable: ${JSON.stringify(runc)}`);
  check(Array.isArray(health.recent_errors) && health.disk, "the daemon's own key is not told the disk and recent errors");
  const nodesRes = await fetch(new URL("v1/nodes", url), { headers: { Authorization: `Bearer ${key}` } });
  check(nodesRes.ok, `GET /v1/nodes: ${nodesRes.status}`);
  const nodes = await nodesRes.json();
  check(nodes.length === 1 && nodes[0].role === "all" && nodes[0].state === "up", `GET /v1/nodes of a single box: ${JSON.stringify(nodes)}`);
  const self = nodes[0];

  const page = await run.page();
  let healthReads = 0;
  page.on("request", (r) => new URL(r.url()).pathname === "/v1/health" && healthReads++);

  await page.goto(url);
  await signIn(page, key);
  run.watch();

  await page.goto(new URL("#/health", url).href);
  await page.getByRole("heading", { name: "Health", level: 2 }).waitFor();
  for (const title of ["Daemon", "Runtimes", "Warm pools", "Nodes", "Disk", "Recent errors"]) {
    await page.getByRole("heading", { name: title, level: 3 }).waitFor();
  }

  // runc: usable, with its version.
  const runtimes = page.getByRole("table", { name: "Runtimes" });
  const runcRow = runtimes.getByRole("row").filter({ has: page.getByRole("rowheader", { name: "runc", exact: true }) });
  await runcRow.waitFor();
  const usable = (await runcRow.locator('td[data-label="Usable"]').textContent()).trim();
  check(usable === "usable", `runc shows as "${usable}"`);
  const version = (await runcRow.locator('td[data-label="Version"]').textContent()).trim();
  check(version === runc.version, `runc's version shows as "${version}", the API says "${runc.version}"`);
  check((await page.locator("#health-default").textContent()).includes(health.default_runtime), "the default runtime is not shown");

  // The daemon as its one node: up, role all, at its URL, its version.
  const nodeRows = page.getByRole("table", { name: "Nodes" }).locator("tbody tr");
  const selfRow = nodeRows.filter({ has: page.getByRole("rowheader", { name: self.id, exact: true }) });
  await selfRow.waitFor();
  check((await nodeRows.count()) === 1, `${await nodeRows.count()} rows of nodes, want the daemon's one`);
  for (const [label, want] of [["Role", "all"], ["State", "up"], ["Address", self.url], ["Version", self.version]]) {
    const got = (await selfRow.locator(`td[data-label="${label}"]`).textContent()).trim();
    check(got === want, `the node's ${label} shows as "${got}", the API says "${want}"`);
  }

  // The version, the pools, the disk and the recent errors.
  check((await page.locator(".facts").textContent()).includes(health.version), "the daemon's version is not shown");
  await page.getByRole("table", { name: "Warm pools" }).waitFor();
  await page.getByRole("meter", { name: /^Disk used: / }).waitFor();
  const recent = page.getByRole("table", { name: "Recent errors" });
  await recent.waitFor();
  const rows = await recent.locator("tbody tr").count();
  check(rows >= 1, "the recent errors' table has no row, not even none");
  await run.shot(page, "health-1280x800");

  // It reads the health again by itself.
  const updated = page.locator("#health-updated");
  const first = await updated.textContent();
  await page.waitForFunction((before) => document.getElementById("health-updated")?.textContent !== before, first, { timeout: 15_000 });

  await page.setViewportSize({ width: 390, height: 844 });
  await recent.waitFor();
  await run.shot(page, "health-390x844");

  // Once left, it reads it no more.
  await page.getByRole("link", { name: "Sandboxes" }).click();
  await page.getByRole("table", { name: "Sandboxes" }).waitFor();
  const reads = healthReads;
  await page.waitForTimeout(6_000);
  check(healthReads === reads, `the health was read ${healthReads - reads} times after the page was left`);

  // Recent errors, as the page shows them (the API's answer stood in
  // for, as the daemon under test may have logged none): newest first,
  // with their attributes; and a key's answer, which has none of them.
  const records = [
    { time: "2026-01-02T03:04:05Z", level: "WARN", message: "backend not usable", attrs: { backend: "gvisor", reason: "runsc not found" } },
    { time: "2026-01-02T03:04:06Z", level: "ERROR", message: "restart process", attrs: { sandbox_id: "s1", error: "exit status 1" } },
  ];
  let answer = { ...health, recent_errors: records };
  await page.route("**/v1/health", (r) => r.fulfill({ json: answer }));
  await page.getByRole("link", { name: "Health" }).click();
  const shown = page.getByRole("table", { name: "Recent errors" }).locator("tbody tr");
  await shown.filter({ hasText: "restart process" }).waitFor();
  check((await shown.count()) === 2, `${await shown.count()} rows of recent errors, want 2`);
  check((await shown.first().textContent()).includes("ERROR"), "the newest record is not first");
  const attrs = await shown.first().locator('td[data-label="Attributes"]').textContent();
  check(attrs.includes("sandbox_id=s1") && attrs.includes("error=exit status 1"), `the attributes shown: ${attrs}`);
  answer = { ...health, recent_errors: undefined, disk: undefined };
  await page.getByText("Only the daemon's own key is told the daemon's recent errors").waitFor({ timeout: 15_000 });
  check((await page.getByRole("table", { name: "Recent errors" }).count()) === 0, "a key's page has a table of recent errors");
  await page.unroute("**/v1/health");

  run.noErrors();

  // A key's page: GET /v1/nodes answers 403 (stood in for), and the
  // nodes are not shown; the rest is. The browser logs the 403 itself as
  // a failed load, and nothing else may be.
  await page.route("**/v1/nodes", (r) =>
    r.fulfill({ status: 403, json: { error: { code: "permission_denied", message: "key app may not list the nodes: use the daemon's own key (api.key)" } } }),
  );
  await page.getByRole("link", { name: "Sandboxes" }).click();
  await page.getByRole("table", { name: "Sandboxes" }).waitFor();
  await page.getByRole("link", { name: "Health" }).click();
  await page.getByRole("table", { name: "Runtimes" }).waitFor();
  await page.getByRole("heading", { name: "Nodes", level: 3 }).waitFor({ state: "hidden" });
  check(!(await page.getByRole("table", { name: "Nodes" }).isVisible()), "a key's page shows the nodes' table");
  check(!(await page.content()).includes("may not list the nodes"), "a key's page shows the 403's message");
  await page.unroute("**/v1/nodes");
  const others = run.errors.filter((e) => !e.includes("status of 403"));
  check(others.length === 0, `console errors: ${JSON.stringify(others)}`);

  console.log(JSON.stringify({ screenshots: run.saved }));
} finally {
  await run.close();
}
