// Preloaded into a gateway (`NODE_OPTIONS=--import …`) by test/cli/boot.test.ts: records every
// module the process loads and writes their URLs, one a line, to $CITYGATE_TEST_MODULES_OUT
// when it exits.
import { writeFileSync } from 'node:fs';
import { registerHooks } from 'node:module';

const out = process.env.CITYGATE_TEST_MODULES_OUT;
const seen = new Set<string>();
registerHooks({
  load(url, context, next) {
    seen.add(url);
    return next(url, context);
  },
});
process.on('exit', () => {
  if (out) writeFileSync(out, [...seen].join('\n'));
});
