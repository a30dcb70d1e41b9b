// The usage rollups (issue 27, services/usage/rollup.ts): an hourly one, and the daily one
// rebuilt with an overhead histogram; both filled from the records kept so far, so they are
// exact from the start.
import { rollupMigration } from '../../services/usage/rollup.ts';

export default rollupMigration();
