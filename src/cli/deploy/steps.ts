// The step runner of a deploy: each step prints one progress line with its outcome; a
// failing step prints what failed, the command's output and the fix, and stops the deploy.

export const STEP_NAMES = [
  'declaration',
  'login',
  'version',
  'build',
  'typecheck',
  'resources',
  'deploy',
  'register',
  'verify',
] as const;
export type StepName = (typeof STEP_NAMES)[number];

export class StepError extends Error {
  readonly output?: string;
  readonly fix?: string;
  constructor(message: string, opts: { output?: string; fix?: string } = {}) {
    super(message);
    this.output = opts.output;
    this.fix = opts.fix;
  }
}

/** A step's outcome: done (with a summary) or skipped (with the reason). */
export type Outcome = { done: string } | { skipped: string };

export class DeployFailed extends Error {
  readonly step: StepName;
  constructor(step: StepName, message: string) {
    super(`step '${step}' failed: ${message}`);
    this.step = step;
  }
}

const WIDTH = Math.max(...STEP_NAMES.map((s) => s.length));

export function stepRunner(write: (s: string) => void, writeErr: (s: string) => void) {
  return async function step(name: StepName, fn: () => Promise<Outcome> | Outcome): Promise<void> {
    const started = performance.now();
    let outcome: Outcome;
    try {
      outcome = await fn();
    } catch (e) {
      const err = e instanceof StepError ? e : new StepError((e as Error).message);
      write(`✗ ${name.padEnd(WIDTH)}  failed: ${err.message}\n`);
      if (err.output?.trim()) {
        writeErr(`\n--- output of the failed command ---\n${err.output.trim().split('\n').slice(-40).join('\n')}\n---\n`);
      }
      if (err.fix) writeErr(`fix: ${err.fix}\n`);
      throw new DeployFailed(name, err.message);
    }
    const secs = (performance.now() - started) / 1000;
    if ('done' in outcome) write(`✓ ${name.padEnd(WIDTH)}  ${outcome.done}${secs >= 1 ? ` (${secs.toFixed(1)} s)` : ''}\n`);
    else write(`- ${name.padEnd(WIDTH)}  skipped: ${outcome.skipped}\n`);
  };
}
