// A screenshot of a region of the preview, drawn with the mouse (or the
// whole view, from the keyboard), downloaded as a PNG.
//
// The preview's frame is another origin, so the console cannot read its
// pixels; the daemon takes the screenshot instead, in the workspace's
// browser sandbox (POST .../services/{name}/screenshot), at the frame's
// size, clipped to the region drawn over it. That browser loads the
// service's page afresh, at its top: a page scrolled or changed in the
// frame is shot as it first loads.

import type { Hutch } from "../../sdk/typescript/src/index";
import { h, message } from "./dom";

export interface Region {
  x: number;
  y: number;
  w: number;
  h: number;
}

/** Controls for shooting the frame inside stage (a positioned box that
 * holds the frame alone): a button to draw a region, one to shoot the
 * whole view, and the status. service names what the frame shows. */
export function regionShot(client: Hutch, id: string, stage: HTMLElement, frame: HTMLIFrameElement, service: () => string): HTMLElement {
  const status = h("span", { role: "status", class: "muted", id: "screenshot-status" });
  const draw = h("button", { type: "button", "aria-pressed": "false" }, "Screenshot a region");
  const whole = h("button", { type: "button" }, "Screenshot the view");
  const overlay = h("div", { class: "shot-overlay", hidden: "", "aria-hidden": "true" });
  const box = h("div", { class: "shot-box", hidden: "" });
  overlay.append(box);
  stage.append(overlay);

  const cancel = (e: KeyboardEvent) => e.key === "Escape" && drawing(false);
  const drawing = (on: boolean) => {
    overlay.hidden = !on;
    box.hidden = true;
    draw.setAttribute("aria-pressed", String(on));
    status.textContent = on ? "Drag over the preview to choose a region; Escape cancels." : "";
    if (on) document.addEventListener("keydown", cancel);
    else document.removeEventListener("keydown", cancel);
  };
  draw.addEventListener("click", () => drawing(overlay.hidden));
  whole.addEventListener("click", () => void shoot());

  // The region follows the pointer from where it went down, in the
  // frame's own coordinates (the overlay covers the frame exactly).
  let start: { x: number; y: number } | undefined;
  const at = (e: PointerEvent) => {
    const r = overlay.getBoundingClientRect();
    return { x: Math.min(Math.max(e.clientX - r.left, 0), r.width), y: Math.min(Math.max(e.clientY - r.top, 0), r.height) };
  };
  const region = (a: { x: number; y: number }, b: { x: number; y: number }): Region => ({
    x: Math.round(Math.min(a.x, b.x)),
    y: Math.round(Math.min(a.y, b.y)),
    w: Math.round(Math.abs(a.x - b.x)),
    h: Math.round(Math.abs(a.y - b.y)),
  });
  overlay.addEventListener("pointerdown", (e) => {
    start = at(e);
    overlay.setPointerCapture(e.pointerId);
    Object.assign(box.style, { left: `${start.x}px`, top: `${start.y}px`, width: "0", height: "0" });
    box.hidden = false;
  });
  overlay.addEventListener("pointermove", (e) => {
    if (!start) return;
    const r = region(start, at(e));
    Object.assign(box.style, { left: `${r.x}px`, top: `${r.y}px`, width: `${r.w}px`, height: `${r.h}px` });
  });
  overlay.addEventListener("pointerup", (e) => {
    if (!start) return;
    const r = region(start, at(e));
    start = undefined;
    drawing(false);
    if (r.w < 4 || r.h < 4) {
      status.textContent = "That region is too small: drag a larger one.";
      return;
    }
    // The overlay covers the frame's border too; the page starts inside it.
    const inside = { x: Math.max(r.x - frame.clientLeft, 0), y: Math.max(r.y - frame.clientTop, 0) };
    void shoot({ ...inside, w: Math.min(r.w, frame.clientWidth - inside.x), h: Math.min(r.h, frame.clientHeight - inside.y) });
  });

  async function shoot(clip?: Region) {
    const name = service();
    status.textContent = "Taking the screenshot…";
    try {
      const png = await client.screenshot(id, name, { width: frame.clientWidth, height: frame.clientHeight, clip });
      const url = URL.createObjectURL(new Blob([png as BlobPart], { type: "image/png" }));
      const a = h("a", { href: url, download: `${id}-${name}${clip ? `-${clip.x}-${clip.y}-${clip.w}x${clip.h}` : ""}.png` });
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 60_000);
      status.textContent = `Saved ${clip ? `a ${clip.w}×${clip.h} region` : "the view"} as a PNG.`;
    } catch (err) {
      status.textContent = `Screenshot: ${message(err)}`;
    }
  }

  return h("span", { class: "row shot-controls" }, draw, whole, status);
}
