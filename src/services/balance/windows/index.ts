// Rolling-window allowances (issue 34): the engine behind plans' windows and key budgets.
// Use it through the capability: gw.use<RollingWindows>(WINDOWS) (src/kernel/windows.ts).
export { WindowEngine, stateOf } from './engine.ts';
export { BUCKET_MS, WINDOWS, windowClock, type RollingWindows, type WindowHold, type WindowRefusal, type WindowSpec, type WindowState } from '../../../kernel/windows.ts';
