/**
 * @ooh/pop-import: proof of play from an operator's existing CMS (Xibo, Broadsign) turned into signed batches for
 * POST {base_url}/api/v1/pop/batches, on the operator's side. The command is `ooh-pop import` (src/cli.ts).
 */
export { main, USAGE } from './cli.js';
export { detectFormat, exportText, readExport } from './formats/read.js';
export { ExportError, FORMATS, type Format, type ReadResult, type SourcePlay } from './formats/source.js';
export { type ImportOptions, runImport } from './import.js';
export { type MappingFile, MappingError, parseMapping } from './mapping.js';
export { type Counters, fingerprintOf, mapPlays, type Plan, planBatches } from './plan.js';
export { sendBatch, specPacing } from './send.js';
export { ImportState, StateError } from './state.js';
export { type Summary, summaryLines } from './summary.js';
