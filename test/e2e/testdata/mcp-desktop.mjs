// An MCP client made with the official TypeScript SDK, for TestDesktop:
// over streamable HTTP (/mcp) it drives the desktop of a sandbox showing
// the test's page with the computer tools (a screenshot, a triple click
// selecting the field's text, typing over it, Enter with a screenshot
// after, the pointer's place) and prints what each call answered as one
// JSON object: its text, whether it failed, and its images' types and
// sizes.
//
//   node mcp-desktop.mjs URL SANDBOX_ID
//
// HUTCH_API_KEY comes from the environment.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, id] = process.argv.slice(2);
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${process.env.HUTCH_API_KEY}` } },
});
const client = new Client({ name: "hutch-e2e-desktop", version: "1.0.0" });
await client.connect(transport);
const call = async (name, args) => {
  console.error(`calling ${name}`);
  const res = await client.callTool({ name, arguments: { sandbox_id: id, ...args } });
  return {
    isError: !!res.isError,
    text: res.content.filter((c) => c.type === "text").map((c) => c.text).join("\n"),
    images: res.content.filter((c) => c.type === "image").map((c) => ({ mimeType: c.mimeType, bytes: String(c.data.length) })),
  };
};

const out = {};
out.screenshot = await call("sandbox_computer_screenshot", {});
out.select = await call("sandbox_computer_click", { x: 300, y: 220, count: 3 });
out.type = await call("sandbox_computer_type", { text: "mcp" });
out.key = await call("sandbox_computer_key", { keys: "Return", screenshot: true });
out.cursor = await call("sandbox_computer_cursor_position", {});
await client.close();
console.log(JSON.stringify(out));
