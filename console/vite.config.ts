import { defineConfig } from "vite";

// The console is built into dist/app, which the Go package beside this
// file embeds (compressed by scripts/compress.mjs); dist/ itself keeps a
// committed marker so that the package compiles before any build.
export default defineConfig({
  base: "/",
  build: {
    outDir: "dist/app",
    emptyOutDir: true,
    assetsDir: "assets",
    sourcemap: false,
    target: "es2022",
  },
});
