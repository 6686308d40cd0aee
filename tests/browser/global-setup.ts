/** Serves ui/dist-e2e once for all browser test files (built by `npm run build:e2e`). */
import { existsSync } from "node:fs";
import { resolve } from "node:path";
import type { TestProject } from "vitest/node";
import { serve } from "./server";

declare module "vitest" {
  export interface ProvidedContext {
    baseUrl: string;
  }
}

export default async function setup(project: TestProject) {
  const root = resolve("ui/dist-e2e");
  if (!existsSync(resolve(root, "index.html"))) {
    throw new Error("ui/dist-e2e is missing: run `npm run build:e2e` first (npm run test:browser does)");
  }
  const { server, url } = await serve(root);
  project.provide("baseUrl", url);
  return () => new Promise<void>((done) => server.close(() => done()));
}
