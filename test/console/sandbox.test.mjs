// One sandbox's page in Chromium, driven by playwright-core (test/e2e's
// TestConsole runs it, as an unprivileged user with Chromium's own sandbox
// on). With a sandbox made through the API (an allow-list policy, so that
// a lookup is refused), it signs in and opens the sandbox's page: its use
// charts (of the daemon's samples) show figures and lines that grow as
// samples come; a background process that prints a line a second
// is started and its log shows "tick 3" while it still runs; python in the
// code pad prints 6*7 and gives a PNG, a second cell sees the first one's
// variable and gives HTML, shown in a frame that runs no scripts, and a
// restarted kernel has forgotten it; a refused lookup shows in the network
// events. It saves the page at 1280x800 and 390x844 into
// $SHOTS, fails on any console error after signing in, deletes its
// sandbox (also when it fails), and prints one JSON line:
// {"screenshots": [...]}.
import { api, check, key, signIn, start, url } from "./lib.mjs";

const run = await start();
let id = "";
let page;
try {
  id = (await api("POST", "/v1/sandboxes", { network: { mode: "allowlist", allow: ["allowed.test"] } })).id;
  page = await run.page();

  await page.goto(url);
  await signIn(page, key);
  run.watch();
  await page.getByRole("link", { name: id }).click();
  await page.getByRole("heading", { name: `Sandbox ${id}` }).waitFor();

  // The charts of the daemon's samples (TestConsole's daemon takes one
  // every 500 ms): CPU in percent of its limit, memory up to its limit,
  // network once two samples give a rate; each drawn, and drawn further
  // as new samples come, asked for after the last one the page has.
  const stats = page.getByRole("region", { name: "Stats" });
  const cpu = stats.getByRole("img", { name: /^CPU over time, in percent of (its limit of [\d.]+ CPUs?|one CPU \(it has no limit\)): \d+\.\d % now$/ });
  const memory = stats.getByRole("img", { name: /^Memory over time, (up to its limit of [\d.]+ (KiB|MiB|GiB)|with no limit): [\d.]+ (B|KiB|MiB|GiB) used now$/ });
  await cpu.waitFor();
  await memory.waitFor();
  await stats.getByRole("img", { name: /^Network over time: in [\d.]+ \w+\/s, out [\d.]+ \w+\/s now$/ }).waitFor();
  check(/^\d+\.\d %$/.test(await stats.locator("figure").first().locator("strong").textContent()), "the CPU figure");
  await stats.getByText(/^(1 sample|\d+ samples over \d+ (s|min)), one every 0\.5 s while it runs\.$/).waitFor();
  const asked = [];
  page.on("request", (r) => r.url().includes(`/v1/sandboxes/${id}/metrics`) && asked.push(new URL(r.url()).searchParams.get("since")));
  // points are a chart's points drawn, in the chart's box (300x60).
  const points = (chart) =>
    chart.evaluate((svg) =>
      [...svg.querySelectorAll("polyline")].flatMap((l) => l.getAttribute("points").trim().split(/\s+/).map((p) => p.split(",").map(Number))),
    );
  for (const chart of [cpu, memory]) {
    const drawn = await points(chart);
    check(drawn.length >= 2 && drawn.every(([x, y]) => x >= 0 && x <= 300 && y >= 0 && y <= 60), `a chart's points: ${JSON.stringify(drawn)}`);
  }
  const before = (await points(cpu)).length;
  for (let i = 0; (await points(cpu)).length <= before; i++) {
    check(i < 50, `no sample drawn after the first ${before} points in 10 s`);
    await page.waitForTimeout(200);
  }
  check(asked.length > 0 && asked.every((since) => since && !Number.isNaN(Date.parse(since))), `the samples asked for after the first: since=${asked}`);

  // A background process, its log followed while it runs.
  await page.getByLabel("Process name").fill("ticker");
  await page.getByLabel("Process command").fill("for i in 1 2 3 4 5 6; do echo tick $i; sleep 1; done");
  await page.getByRole("button", { name: "Start process" }).click();
  const log = page.getByRole("log", { name: "Log of ticker" });
  await log.filter({ hasText: "tick 3" }).waitFor();
  check(!(await log.textContent()).includes("tick 6"), `the log came all at once: ${await log.textContent()}`);
  const processes = page.getByRole("table", { name: "Processes" });
  await processes.getByRole("row").filter({ hasText: "ticker" }).filter({ hasText: "running" }).waitFor({ timeout: 5_000 });
  await log.filter({ hasText: "tick 6" }).waitFor();
  await processes.getByRole("row").filter({ hasText: "ticker" }).filter({ hasText: "exited" }).waitFor();
  await page.getByRole("button", { name: "Delete process ticker" }).click();
  await processes.getByText("No background processes.").waitFor();

  // Python in a kernel: printed text and an image, then state kept from
  // one cell to the next, then forgotten by a restart.
  const code = page.getByRole("textbox", { name: "Code", exact: true });
  const result = page.getByLabel("Result", { exact: true });
  await page.getByLabel("Language").selectOption("python");
  // The PNG is made by hand: in the host template matplotlib finds no
  // matplotlibrc (the host's is in /etc).
  await code.fill(
    [
      "import struct, zlib",
      "from IPython.display import Image",
      "n = 6 * 7",
      "print(n)",
      "def chunk(kind, data):",
      '    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))',
      'rows = b"".join(b"\\0" + bytes([200, 60, 60]) * 160 for _ in range(80))',
      'Image(b"\\x89PNG\\r\\n\\x1a\\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 160, 80, 8, 2, 0, 0, 0)) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))',
    ].join("\n"),
  );
  await page.getByRole("button", { name: "Execute" }).click();
  await result.locator("pre").filter({ hasText: /^42\n$/ }).waitFor({ timeout: 90_000 });
  const image = result.locator("img");
  await image.waitFor();
  check(/^data:image\/png;base64,/.test(await image.getAttribute("src")), "the image is no PNG");
  check(await image.evaluate((img) => img.complete && img.naturalWidth === 160), "the PNG does not load");
  await code.fill('from IPython.display import HTML\nHTML(f"<p>n is <b>{n}</b></p>")');
  await code.press("Control+Enter");
  const frame = result.locator("iframe");
  await frame.waitFor();
  check((await frame.getAttribute("sandbox")) === "", "the HTML's frame may run scripts");
  await page.frameLocator(".code-result iframe").getByText("n is 42").waitFor();
  await page.getByRole("button", { name: "Restart kernel" }).click();
  await page.locator("#code-status").filter({ hasText: "The kernel was restarted" }).waitFor();
  await code.fill('print(globals().get("n"))');
  await code.press("Control+Enter");
  await result.locator("pre").filter({ hasText: /^None\n$/ }).waitFor();

  // A lookup the policy refuses, listed in the network events.
  await page.getByRole("textbox", { name: "Command", exact: true }).fill("getent hosts refused.test || echo refused");
  await page.getByRole("button", { name: "Run", exact: true }).click();
  await page.getByLabel("Output").filter({ hasText: "[exit 0]" }).waitFor();
  const events = page.getByRole("table", { name: "Network events" });
  await events.getByRole("row").filter({ hasText: "refused.test" }).filter({ hasText: "dns" }).first().waitFor({ timeout: 15_000 });

  await page.getByLabel("Process name").fill("sleeper");
  await page.getByLabel("Process command").fill("while :; do date; sleep 1; done");
  await page.getByRole("button", { name: "Start process" }).click();
  await page.getByRole("log", { name: "Log of sleeper" }).waitFor();
  await page.evaluate(() => window.scrollTo(0, 0));
  await run.shot(page, "sandbox-1280x800");

  await page.setViewportSize({ width: 390, height: 844 });
  await page.waitForTimeout(500);
  const wide = await page.evaluate(() => document.documentElement.scrollWidth);
  check(wide <= 390, `the page is ${wide} px wide on a phone`);
  await run.shot(page, "sandbox-390x844");
  await page.getByRole("button", { name: "Delete process sleeper" }).click();
  await processes.getByText("No background processes.").waitFor();

  // Its settings: what it was made with, and a new network policy and
  // idle timer, which the API then reports.
  const settings = page.getByRole("region", { name: "Settings" });
  await settings.getByText("every secret of its workspace").waitFor();
  check((await page.locator("#policy-allow").inputValue()) === "allowed.test", "the policy's allow-list in the form");
  await page.locator("#policy-mode").selectOption("none");
  await page.getByRole("button", { name: "Set network policy" }).click();
  await page.locator("#sandbox-settings-status").filter({ hasText: "Network policy: done." }).waitFor();
  await page.getByLabel("Idle timeout (s), from now").fill("600");
  await page.locator("#idle-then").selectOption("stop");
  await page.getByRole("button", { name: "Set idle timer" }).click();
  await page.locator("#sandbox-settings-status").filter({ hasText: "Idle timer: done." }).waitFor();
  const changed = await api("GET", `/v1/sandboxes/${id}`);
  check(changed.network.mode === "none" && changed.idle_timeout_s === 600 && changed.idle_action === "stop", `after the settings: ${JSON.stringify(changed)}`);

  // Leaving the page closes what it opened: nothing polls after. (Not
  // for the list, which asks for each sandbox's stats itself.)
  await page.getByRole("link", { name: "Keys" }).click();
  await page.getByRole("heading", { name: "API keys" }).waitFor();
  const polled = [];
  page.on("request", (r) => /\/v1\/sandboxes\/[^/]+\/(stats|metrics|processes|network)/.test(r.url()) && polled.push(`${r.method()} ${r.url()}`));
  await page.waitForTimeout(4_000);
  check(polled.length === 0, `polls after the page was left: ${polled}`);
  run.noErrors();
  console.log(JSON.stringify({ screenshots: run.saved }));
} catch (err) {
  // What the page said, to tell why.
  const said = await page?.evaluate(() => [...document.querySelectorAll("[role=status], .code-result")].map((e) => `${e.id || e.className}: ${e.textContent}`)).catch(() => []);
  console.error(JSON.stringify({ statuses: said, errors: run.errors }, null, 1));
  throw err;
} finally {
  await run.close();
  if (id) await api("DELETE", `/v1/sandboxes/${id}`);
}
