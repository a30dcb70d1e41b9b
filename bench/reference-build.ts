// Another commit's citygate, unpacked beside this checkout for a paired comparison
// (bench/guard.ts): its tracked files from `git archive`, with this checkout's node_modules and
// built console linked in (so it runs this checkout's dependencies: a dependency bump is not
// part of what it compares). Run it with BENCH_CITYGATE_ROOT set to `root`.
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { REPO_ROOT } from "./targets.ts";

export type ReferenceBuild = { commit: string; root: string; remove(): void };

/** The commit's full id, or null when this clone does not hold it (a shallow clone, say). */
export function resolveCommit(rev: string): string | null {
  try {
    return execFileSync("git", ["-C", REPO_ROOT, "rev-parse", "--verify", "--quiet", `${rev}^{commit}`], { encoding: "utf8" }).trim();
  } catch {
    return null;
  }
}

export function unpackReference(commit: string): ReferenceBuild {
  const root = mkdtempSync(join(tmpdir(), "citygate-reference-"));
  const remove = () => rmSync(root, { recursive: true, force: true });
  try {
    const tar = execFileSync("git", ["-C", REPO_ROOT, "archive", "--format=tar", commit], { maxBuffer: 1 << 30 });
    execFileSync("tar", ["-x", "-C", root], { input: tar });
    symlinkSync(join(REPO_ROOT, "node_modules"), join(root, "node_modules"));
    const dist = join(REPO_ROOT, "console/dist");
    if (existsSync(dist) && !existsSync(join(root, "console/dist"))) symlinkSync(dist, join(root, "console/dist"));
  } catch (e) {
    remove();
    throw e;
  }
  return { commit, root, remove };
}
