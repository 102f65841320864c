import { collectFieldErrors, type FieldError, Sha256Hex, SLOTS } from '@ooh/protocol';
import { type Static, Type } from '@sinclair/typebox';

/*
 * The mapping file: how the source system's names become ours (issue 20 item 2: "maps their display and media
 * identifiers to our players and approvals through a mapping file").
 *
 *   {
 *     "players": { "<display name or player id in the export>": "<external id of the player in the console>" },
 *     "media": {
 *       "<media name or ad copy id in the export>": { "approval_number": "...", "media_sha256": "<64 hex>" },
 *       "<authority content>": { "slot": "gov" | "emergency", "media_sha256": "<64 hex>" }
 *     }
 *   }
 *
 * A player's external id is the one it was mapped under in the console (Fleet, CMS installations), spec CMS rule 1;
 * the approval number and the file's SHA-256 are what a play record carries (spec "Proof-of-play record").
 */

/**
 * The external ids the console's player mapping takes (apps/platform/src/cms/routes.ts, PUT
 * /api/v1/console/cms-installations/{id}/players/{external_id}): any other could never be mapped, so every play of
 * it would be refused player_unknown.
 */
export const EXTERNAL_ID_PATTERN = '^[A-Za-z0-9._:@-]{1,128}$';

const Approved = Type.Object(
  { approval_number: Type.String({ minLength: 1, maxLength: 100 }), media_sha256: Sha256Hex },
  { additionalProperties: false },
);
const Authority = Type.Object(
  { slot: Type.Union(SLOTS.map((slot) => Type.Literal(slot))), media_sha256: Sha256Hex },
  { additionalProperties: false },
);

export const MappingFile = Type.Object(
  {
    $comment: Type.Optional(Type.String()),
    players: Type.Record(Type.String({ minLength: 1 }), Type.String({ pattern: EXTERNAL_ID_PATTERN })),
    media: Type.Record(Type.String({ minLength: 1 }), Type.Union([Approved, Authority])),
  },
  { additionalProperties: false },
);
export type MappingFile = Static<typeof MappingFile>;
export type MediaTarget = MappingFile['media'][string];

export class MappingError extends Error {
  constructor(
    message: string,
    readonly errors: FieldError[] = [],
  ) {
    super(message);
    this.name = 'MappingError';
  }
}

/** A JSON pointer as a person reads it: /players/Lobby ~1 2 -> players["Lobby / 2"]. */
function readablePath(pointer: string): string {
  if (pointer === '') return '(the whole file)';
  const [first, ...rest] = pointer
    .split('/')
    .slice(1)
    .map((token) => token.replaceAll('~1', '/').replaceAll('~0', '~'));
  return `${first}${rest.map((token) => `[${JSON.stringify(token)}]`).join('')}`;
}

/** Parses the mapping file's text, refusing it whole with the paths of what is wrong. */
export function parseMapping(text: string): MappingFile {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (cause) {
    throw new MappingError(`the mapping file is not JSON: ${(cause as Error).message}`);
  }
  const errors = collectFieldErrors(MappingFile, value);
  if (errors.length > 0) {
    const lines = errors.slice(0, 10).map((e) => `  ${readablePath(e.path)}: ${e.message}`);
    throw new MappingError(`the mapping file is not valid:\n${lines.join('\n')}`, errors);
  }
  return value as MappingFile;
}
