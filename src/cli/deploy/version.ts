// The patch bump of package.json (seed §9), keeping the file's formatting.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export function bumpPatch(version: string): string {
  const m = /^(\d+)\.(\d+)\.(\d+)(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?$/.exec(version);
  if (!m) throw new Error(`"version": "${version}" is not semver (x.y.z); fix package.json`);
  // Like `npm version patch`: a prerelease x.y.z-… becomes x.y.z.
  const pre = version.includes('-');
  return `${m[1]}.${m[2]}.${pre ? Number(m[3]) : Number(m[3]) + 1}`;
}

export interface PackageFile {
  path: string;
  text: string;
  json: { version?: string; scripts?: Record<string, string>; [k: string]: unknown };
}

export function readPackage(dir: string): PackageFile | null {
  const path = join(dir, 'package.json');
  if (!existsSync(path)) return null;
  const text = readFileSync(path, 'utf8');
  try {
    return { path, text, json: JSON.parse(text) };
  } catch (e) {
    throw new Error(`package.json is not valid JSON (${(e as Error).message})`);
  }
}

/** Writes the new version, keeping indentation and the trailing newline. */
export function writeVersion(pkg: PackageFile, version: string): void {
  const indent = /^(\s+)"/m.exec(pkg.text)?.[1] ?? '  ';
  const trailing = pkg.text.endsWith('\n') ? '\n' : '';
  writeFileSync(pkg.path, JSON.stringify({ ...pkg.json, version }, null, indent) + trailing);
}
