// Replaces each file of dist/app by its gzip (level 9): the daemon embeds
// them so and serves them with Content-Encoding: gzip.
import { readdirSync, readFileSync, statSync, unlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { gzipSync } from "node:zlib";

function walk(dir) {
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) walk(p);
    else if (!p.endsWith(".gz")) {
      writeFileSync(p + ".gz", gzipSync(readFileSync(p), { level: 9 }));
      unlinkSync(p);
    }
  }
}
walk(new URL("../dist/app", import.meta.url).pathname);
