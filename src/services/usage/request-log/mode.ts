// Which calls are logged: the caller's city's request_log setting (cities/update), else the
// REQUEST_LOG env key (off, metadata, full; default off). Runs on every AI call: two map reads.
import type { GatewayContext } from '../../../kernel/context.ts';
import { boundCity, type Identity } from '../../../kernel/identity.ts';
import type { RequestLogMode } from '../../../kernel/request-log.ts';

const MODES: Record<string, RequestLogMode> = { off: 'off', metadata: 'metadata', full: 'full' };

export class ModeOf {
  readonly gw: GatewayContext;
  #version = -1;
  #raw: string | undefined;
  #env: RequestLogMode = 'off';
  constructor(gw: GatewayContext) {
    this.gw = gw;
  }

  /** REQUEST_LOG, parsed again only when its value changed (an unknown value is off, said once). */
  envMode(): RequestLogMode {
    const env = this.gw.env;
    if (env.version !== this.#version) {
      this.#version = env.version;
      const raw = env.get('REQUEST_LOG');
      if (raw !== this.#raw) {
        this.#raw = raw;
        const v = raw?.trim().toLowerCase();
        this.#env = (v && MODES[v]) || 'off';
        if (v && !MODES[v]) this.gw.log('warn', 'REQUEST_LOG is not off, metadata or full: request logs stay off', { value: raw });
      }
    }
    return this.#env;
  }

  mode(identity: Identity): RequestLogMode | Promise<RequestLogMode> {
    const city = boundCity(identity);
    if (city === null) return this.envMode();
    const hit = this.gw.cities.peek(city);
    if (hit) return hit.settings.request_log ?? this.envMode();
    // not in memory (a bureau's first call in a while): read the city once
    return this.gw.cities.settings(city).then((s) => s.request_log ?? this.envMode());
  }
}
