// A sandbox's files: a directory listing to walk, a file open in an
// editor (CodeMirror) to change and save, new files, downloads, and
// uploads by dropping files on the listing. Everything goes through the
// API's file calls, which the sandbox's agent serves inside it.

import type { Extension } from "@codemirror/state";
import { basicSetup, EditorView } from "codemirror";

import type { FileEntry, Hutch } from "../../sdk/typescript/src/index";
import { h, message } from "./dom";

const WORKSPACE = "/home/user/workspace";

export function filesPanel(client: Hutch, id: string): { panel: HTMLElement; close: () => void } {
  let dir = WORKSPACE;
  let editor: EditorView | undefined;
  let openPath = "";
  const where = h("p", { class: "muted", "aria-live": "polite" });
  const status = h("p", { role: "status", class: "muted", id: "files-status" });
  const list = h("ul", { class: "files", "aria-label": "Files" });
  const editorBox = h("div", { class: "editor", "aria-label": "Editor" });
  const editing = h("p", { class: "muted" });
  const save = h("button", { type: "button", class: "primary", disabled: "" }, "Save");
  const download = h("button", { type: "button", disabled: "" }, "Download");
  const newName = h("input", { id: "new-file", name: "new-file", placeholder: "notes.txt" });
  const create = h("form", { class: "row", "aria-label": "New file" }, h("label", { for: "new-file" }, "New file", newName), h("button", { type: "submit" }, "Create"));

  // A language's grammar is loaded when a file of it is opened.
  async function languageOf(path: string): Promise<Extension[]> {
    if (/\.py$/.test(path)) return [(await import("@codemirror/lang-python")).python()];
    if (/\.m?[jt]sx?$/.test(path)) return [(await import("@codemirror/lang-javascript")).javascript({ typescript: /\.tsx?$/.test(path) })];
    return [];
  }

  async function open(path: string) {
    try {
      const text = await client.readText(id, path);
      editor?.destroy();
      editor = new EditorView({ doc: text, extensions: [basicSetup, ...(await languageOf(path))], parent: editorBox });
      openPath = path;
      editing.textContent = `Editing ${path}`;
      save.removeAttribute("disabled");
      download.removeAttribute("disabled");
      editor.focus();
    } catch (err) {
      status.textContent = message(err);
    }
  }

  async function show(path: string) {
    try {
      const entries = await client.listFiles(id, path);
      dir = path;
      where.textContent = dir;
      entries.sort((a, b) => Number(b.type === "dir") - Number(a.type === "dir") || a.name.localeCompare(b.name));
      const items: HTMLElement[] = [];
      if (dir !== "/") {
        items.push(item("..", () => show(dir.replace(/\/[^/]+$/, "") || "/")));
      }
      for (const e of entries) items.push(item(e.type === "dir" ? `${e.name}/` : e.name, () => (e.type === "dir" ? show(e.path) : open(e.path)), e));
      list.replaceChildren(...items);
    } catch (err) {
      status.textContent = message(err);
    }
  }

  function item(label: string, go: () => void, e?: FileEntry): HTMLElement {
    const b = h("button", { type: "button", class: "link" }, label);
    b.addEventListener("click", go);
    return h("li", {}, b, e && e.type !== "dir" ? h("span", { class: "muted" }, ` ${e.size} B`) : "");
  }

  save.addEventListener("click", async () => {
    if (!editor) return;
    try {
      const e = await client.writeFile(id, openPath, editor.state.doc.toString());
      status.textContent = `Saved ${e.path} (${e.size} bytes).`;
      await show(dir);
    } catch (err) {
      status.textContent = message(err);
    }
  });
  download.addEventListener("click", async () => {
    try {
      const bytes = await client.readFile(id, openPath);
      const a = h("a", { href: URL.createObjectURL(new Blob([bytes as BlobPart])), download: openPath.split("/").pop() ?? "file" });
      a.click();
      setTimeout(() => URL.revokeObjectURL(a.href), 10_000);
    } catch (err) {
      status.textContent = message(err);
    }
  });
  create.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const name = newName.value.trim();
    if (!name) return;
    const path = name.startsWith("/") ? name : `${dir}/${name}`;
    try {
      await client.writeFile(id, path, "");
      newName.value = "";
      await show(dir);
      await open(path);
    } catch (err) {
      status.textContent = message(err);
    }
  });
  list.addEventListener("dragover", (ev) => {
    ev.preventDefault();
    list.classList.add("drop");
  });
  list.addEventListener("dragleave", () => list.classList.remove("drop"));
  list.addEventListener("drop", async (ev) => {
    ev.preventDefault();
    list.classList.remove("drop");
    const files = [...(ev.dataTransfer?.files ?? [])];
    for (const f of files) {
      try {
        await client.writeFile(id, `${dir}/${f.name}`, new Uint8Array(await f.arrayBuffer()));
        status.textContent = `Uploaded ${f.name}.`;
      } catch (err) {
        status.textContent = `${f.name}: ${message(err)}`;
      }
    }
    await show(dir);
  });

  const panel = h(
    "section",
    { "aria-label": "Files" },
    h("h3", {}, "Files"),
    where,
    create,
    h("div", { class: "files-layout" }, h("div", {}, list, h("p", { class: "muted" }, "Drop files on the list to upload them.")), h("div", {}, editing, editorBox, h("div", { class: "row" }, save, download))),
    status,
  );
  void show(dir);
  return { panel, close: () => editor?.destroy() };
}
