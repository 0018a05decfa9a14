// The console's secrets, keys and settings, driven in Chromium by
// playwright-core (test/e2e's TestConsole runs it as console.test.mjs is
// run). It sets a personal secret and a workspace one (injected by the
// proxy) and checks that neither value is ever on the page after, also
// after a reload, then deletes both; makes a key of its own workspace
// with modes other than the defaults, sees it once and its modes in the
// list, signs in with it and sees its modes on the settings page and no
// quota form; signs in again with the daemon's own key, sets the quota of
// that workspace and sees it beside the usage; saves screenshots of the
// settings page at 1280x800 and 390x844 into $SHOTS. Any console error
// after signing in fails it. What it made is removed at the end, also
// when it fails. It prints one JSON line: {"screenshots": [...]}.
import { api, check, key, signIn, signOut, start, url } from "./lib.mjs";

const run = await start();
let quotaSet = false; // so that the cleanup makes no workspace of its own

const stamp = Date.now();
const personalValue = `settings-personal-${stamp}`;
const workspaceValue = `settings-workspace-${stamp}`;
const secretName = "SETTINGS_TEST_TOKEN";
const secretUser = "settings-test-user";
const keyName = "settings-test-key";
const workspace = "settings-test";






try {
  const page = await run.page();

  await page.goto(url);
  await signIn(page, key);
  run.watch();

  // Two secrets of one name: the workspace's, swapped in by the proxy, and
  // a user's own. Neither value is on the page after it is set.
  const shown = async () =>
    page.evaluate(
      (values) => {
        const html = document.documentElement.outerHTML + document.body.innerText;
        const inputs = [...document.querySelectorAll("input")].map((i) => i.value).join("\n");
        return values.filter((v) => html.includes(v) || inputs.includes(v));
      },
      [personalValue, workspaceValue],
    );
  await page.getByRole("link", { name: "Secrets" }).click();
  await page.getByRole("table", { name: "Secrets" }).waitFor();
  await page.getByLabel("Name").fill(secretName);
  await page.getByLabel("Value").fill(workspaceValue);
  await page.getByLabel("Inject as").selectOption("proxy");
  await page.getByLabel("Hosts").fill("api.example.com");
  await page.getByLabel("Description").fill("the workspace's, set by the settings test");
  await page.getByRole("button", { name: "Set secret" }).click();
  await page.locator("#secrets-status").filter({ hasText: `Set ${secretName}. It is for workspace default` }).waitFor();
  check((await page.locator("#secret-value").inputValue()) === "", "the value field is not emptied after a set");

  await page.getByLabel("Name").fill(secretName);
  await page.getByLabel("Value").fill(personalValue);
  await page.getByLabel("Scope").selectOption("user");
  await page.getByLabel("User", { exact: true }).fill(secretUser);
  await page.getByLabel("Inject as").selectOption("env");
  await page.getByLabel("Description").fill("a user's own, set by the settings test");
  await page.getByRole("button", { name: "Set secret" }).click();
  await page.locator("#secrets-status").filter({ hasText: `Set ${secretName}. It is personal, for ${secretUser}` }).waitFor();
  check((await page.locator("#secret-value").inputValue()) === "", "the value field is not emptied after a set");

  const secrets = page.getByRole("table", { name: "Secrets" });
  const personalRow = secrets.getByRole("row").filter({ hasText: `personal: ${secretUser}` });
  const workspaceRow = secrets.getByRole("row").filter({ hasText: "api.example.com" });
  await personalRow.waitFor();
  await workspaceRow.waitFor();
  check((await workspaceRow.textContent()).includes("workspace"), "the workspace secret's row does not say workspace");
  check((await personalRow.textContent()).includes("environment variable"), "the personal secret's row does not say how it is injected");
  let leaked = await shown();
  check(leaked.length === 0, `a secret's value is on the page after it was set: ${leaked}`);
  await page.reload();
  await personalRow.waitFor();
  await workspaceRow.waitFor();
  leaked = await shown();
  check(leaked.length === 0, `a secret's value is on the page after a reload: ${leaked}`);
  await page.getByRole("button", { name: `Delete secret ${secretName} of ${secretUser}` }).click();
  await page.locator("#secrets-status").filter({ hasText: `Deleted ${secretName} of ${secretUser}.` }).waitFor();
  await personalRow.waitFor({ state: "detached" });
  await page.getByRole("button", { name: `Delete secret ${secretName}`, exact: true }).click();
  await page.locator("#secrets-status").filter({ hasText: `Deleted ${secretName}.` }).waitFor();
  await workspaceRow.waitFor({ state: "detached" });
  leaked = await shown();
  check(leaked.length === 0, `a secret's value is on the page after its deletion: ${leaked}`);

  // A key with modes other than the defaults, shown once, its modes listed.
  await page.getByRole("link", { name: "Keys" }).click();
  await page.getByLabel("Key name").fill(keyName);
  await page.getByLabel("Workspace").fill(workspace);
  await page.getByLabel("Tools mode").selectOption("selective");
  await page.getByLabel("Network mode").selectOption("none");
  await page.getByRole("button", { name: "Make key" }).click();
  const field = page.getByRole("textbox", { name: `The key ${keyName}` });
  await field.waitFor();
  const made = await field.inputValue();
  check(/^hutch_[0-9a-f]+$/.test(made), `the key shown: ${made}`);
  const keyRow = page.getByRole("table", { name: "API keys" }).getByRole("row").filter({ has: page.getByRole("cell", { name: keyName, exact: true }) });
  await keyRow.getByRole("cell", { name: "selective", exact: true }).waitFor();
  await keyRow.getByRole("cell", { name: "none", exact: true }).waitFor();
  await page.reload();
  await keyRow.getByRole("cell", { name: "selective", exact: true }).waitFor();
  check(!(await page.content()).includes(made), "the key is shown again after a reload");

  // Signed in with that key, the settings page shows its modes as its own
  // and no quota form: only the daemon's own key may set one.
  await signOut(page);
  await signIn(page, made);
  await page.getByRole("link", { name: "Settings" }).click();
  await page.locator("#settings-who").filter({ hasText: `key ${keyName} of workspace ${workspace}` }).waitFor();
  await page.getByRole("table", { name: `Usage and quota of workspace ${workspace}` }).getByRole("row", { name: /Memory/ }).waitFor();
  const own = await page.getByRole("table", { name: "Sandbox modes" }).locator("tr.own").allTextContents();
  check(own.length === 2 && own[0].includes("selective") && own[1].includes("none"), `the key's own modes: ${JSON.stringify(own)}`);
  check((await page.getByRole("button", { name: "Set quota" }).count()) === 0, "a key is offered the quota form");
  await page.getByText("Only the daemon's own key").waitFor();
  await signOut(page);

  // The daemon's own key sets that workspace's quota and sees it.
  await signIn(page, key);
  await page.getByRole("link", { name: "Settings" }).click();
  await page.locator("#settings-who").filter({ hasText: "the daemon's own key" }).waitFor();
  await page.locator("#quota-workspace").selectOption(workspace);
  const usage = page.getByRole("table", { name: `Usage and quota of workspace ${workspace}` });
  await usage.waitFor();
  await page.getByLabel("Running sandboxes", { exact: true }).fill("3");
  await page.getByLabel("Memory (MiB)").fill("2048");
  await page.getByLabel("Sandbox hours a day").fill("12.5");
  quotaSet = true;
  await page.getByRole("button", { name: "Set quota" }).click();
  await page.locator("#quota-status").filter({ hasText: `Set the quota of ${workspace}.` }).waitFor();
  await usage.getByRole("row", { name: /Memory/ }).getByRole("cell", { name: "2048 MiB", exact: true }).waitFor();
  await page.locator('[role="meter"][aria-label="Memory: 0 MiB of 2048 MiB"]').waitFor();
  await page.locator('[role="meter"][aria-label="Running sandboxes: 0 of 3"]').waitFor();
  await page.reload();
  await page.locator("#quota-workspace").selectOption(workspace);
  await usage.getByRole("row", { name: /Sandbox hours/ }).getByRole("cell", { name: "12.5 h", exact: true }).waitFor();
  check((await page.getByLabel("Memory (MiB)").inputValue()) === "2048", "the quota form does not show the quota set");
  await page.getByRole("table", { name: "Defaults of a new sandbox" }).waitFor();
  await run.shot(page, "settings-1280x800");
  await page.setViewportSize({ width: 390, height: 844 });
  await page.getByRole("heading", { name: "Sandbox modes" }).waitFor();
  await run.shot(page, "settings-390x844");
  await page.setViewportSize({ width: 1280, height: 800 });

  await page.getByRole("link", { name: "Keys" }).click();
  await page.getByRole("button", { name: `Delete key ${keyName}` }).click();
  await page.locator("#keys-status").filter({ hasText: `Deleted ${keyName}.` }).waitFor();
  run.noErrors();
  console.log(JSON.stringify({ screenshots: run.saved }));
} finally {
  await run.close();
  await api("DELETE", `v1/secrets/${secretName}?scope=user&user=${secretUser}`);
  await api("DELETE", `v1/secrets/${secretName}`);
  await api("DELETE", `v1/keys/${keyName}`);
  if (quotaSet) await api("PUT", `v1/workspaces/${workspace}/quota`, {});
}
