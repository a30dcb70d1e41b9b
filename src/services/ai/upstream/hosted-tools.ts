// Hosted (server-side) tools on a translated upstream: web_search, file_search, code_interpreter
// (Responses API) and Anthropic's server tools (web_search_…, code_execution_…) run inside the
// provider that offers them, so another upstream cannot run them. By default the translation
// leaves them out and says so — the x-citygate-dropped-tools response header and the usage
// record's note — so a client that always sends them (Codex sends web_search) still works;
// AI_HOSTED_TOOLS=reject makes them a 400 naming the tool instead.
import type { RuntimeEnv } from '../../../kernel/runtime-env.ts';
import { badRequest } from '../../../kernel/errors.ts';

export const DROPPED_TOOLS_HEADER = 'x-citygate-dropped-tools';

/** Whether hosted tools on a translated upstream are refused (AI_HOSTED_TOOLS=reject) rather than dropped. */
export const hostedToolsRejected = (env: RuntimeEnv) => env.get('AI_HOSTED_TOOLS') === 'reject';

/** Collects the hosted tools a translation leaves out (or refuses them when strict). */
export class HostedTools {
  readonly dropped: string[] = [];
  readonly strict: boolean;
  constructor(strict: boolean) {
    this.strict = strict;
  }

  drop(index: number, type: string, where: string): void {
    if (this.strict) {
      throw badRequest('invalid_input', `tools.${index}: the hosted tool '${type}' runs only on ${where} upstreams, and this model's upstream is not one (AI_HOSTED_TOOLS=reject)`, `tools.${index}.type`);
    }
    if (!this.dropped.includes(type)) this.dropped.push(type);
  }
}

/** The usage record's note for a translated call that left hosted tools out. */
export const droppedNote = (dropped: string[]) => `hosted tools dropped: ${dropped.join(', ')}`;

/** Adds the header naming what was left out to a translated call's response. */
export function withDroppedHeader(res: Response, dropped: string[] | undefined): Response {
  if (dropped?.length) res.headers.set(DROPPED_TOOLS_HEADER, dropped.join(', '));
  return res;
}
