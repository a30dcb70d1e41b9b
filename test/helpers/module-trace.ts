// Preloaded into a gateway under test (NODE_OPTIONS="--import <this file>"): appends the URL of
// every module the process loads to the file MODULE_TRACE_FILE names, through Node's own module
// hooks. Nothing in citygate knows about it; a test reads the file to see what a gateway loaded
// (and when: lines are appended as modules load).
import { appendFileSync } from 'node:fs';
import { registerHooks } from 'node:module';

const file = process.env.MODULE_TRACE_FILE;
if (file) {
  registerHooks({
    load(url, context, nextLoad) {
      appendFileSync(file, `${url}\n`);
      return nextLoad(url, context);
    },
  });
}
