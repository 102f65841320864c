import { type Static, type TProperties, Type } from '@sinclair/typebox';
// Registers the 'date-time' format (clock set_to): TypeBox refuses a format nobody registered.
import '@ooh/protocol';

/**
 * The scenario file format (JSON; YAML would need a parser the project does not install). Durations are strings
 * like "90s", "15m", "2h", "1d12h"; `at` is a duration from the scenario's start. Player selectors: "all", a
 * count ("3": the first three), a range of player numbers ("#2-#5"), or a list of them (["#1", "#4"]).
 */

const Duration = Type.String({
  pattern: '^(\\d+(ms|s|m|h|d))+$',
  description: 'e.g. "90s", "15m", "2h", "1d12h"',
});
const Players = Type.Union(
  [
    Type.Literal('all'),
    Type.Integer({ minimum: 1, description: 'the first n players' }),
    Type.String({ pattern: '^#\\d+(-#\\d+)?$', description: '"#3" or "#2-#5"' }),
    Type.Array(Type.String({ pattern: '^#\\d+$' }), { minItems: 1 }),
  ],
  { description: 'which players a step applies to' },
);

const step = <A extends string, T extends TProperties>(action: A, fields: T, description: string) =>
  Type.Object(
    { at: Duration, action: Type.Literal(action), ...fields },
    { additionalProperties: false, description },
  );

const DropAnswers = Type.Object(
  {
    path: Type.Optional(
      Type.String({ description: 'only answers to paths starting with this, e.g. /d/v1/renew' }),
    ),
    link: Type.Optional(
      Type.Union([Type.Literal('agents'), Type.Literal('devices'), Type.Literal('verify')]),
    ),
    count: Type.Optional(Type.Integer({ minimum: 1 })),
    probability: Type.Optional(Type.Number({ minimum: 0, maximum: 1 })),
  },
  { additionalProperties: false },
);

export const ScenarioStep = Type.Union([
  step(
    'network',
    {
      down: Type.Optional(Type.Boolean()),
      latency_ms: Type.Optional(Type.Integer({ minimum: 0 })),
      drop_answers: Type.Optional(Type.Array(DropAnswers)),
      clear_drops: Type.Optional(Type.Boolean()),
    },
    'the network between players and platform: down, slow, answers dropped after the platform processed them',
  ),
  step(
    'clock',
    {
      players: Players,
      skew_seconds: Type.Optional(Type.Number()),
      jump_seconds: Type.Optional(Type.Number()),
      set_to: Type.Optional(Type.String({ format: 'date-time' })),
    },
    'board clocks: a skew against true time, a jump, or a fixed reading (1970 after an RTC reset)',
  ),
  step(
    'power_cut',
    { players: Players, off: Type.Optional(Duration) },
    'SIGKILL of the players (needs placement child-per-player), back on after `off` (default 5m)',
  ),
  step(
    'screen',
    { players: Players, power: Type.Union([Type.Literal('on'), Type.Literal('off')]) },
    'screen power',
  ),
  step(
    'tamper',
    { players: Players, state: Type.Union([Type.Literal('open'), Type.Literal('closed')]) },
    'the tamper switch',
  ),
  step(
    'replace_media',
    { players: Players, creative: Type.String() },
    'a creative file replaced on disk by other bytes (HASH_MISMATCH)',
  ),
  step(
    'revoke',
    { creative: Type.String(), reason: Type.Optional(Type.String()) },
    'the authority revokes an approval',
  ),
  step(
    'disk',
    {
      players: Players,
      capacity_mb: Type.Optional(Type.Number({ minimum: 1 })),
      other_mb: Type.Optional(Type.Number({ minimum: 0 })),
    },
    "the players' simulated volume: its size, and what other software takes of it (fleet.disk)",
  ),
  step(
    'platform_restart',
    { down: Type.Optional(Duration) },
    'restart the platform (only a platform the simulator started)',
  ),
]);
export type ScenarioStep = Static<typeof ScenarioStep>;

export const Scenario = Type.Object(
  {
    $schema: Type.Optional(Type.String()),
    name: Type.String({ minLength: 1 }),
    description: Type.Optional(Type.String()),
    time: Type.Object(
      {
        virtual: Type.Optional(
          Type.Boolean({ description: 'move time in steps with the platform test clock (default true)' }),
        ),
        start: Type.Optional(
          Type.String({
            description: '"now" (default), or an RFC 3339 instant; needs a platform with --test-clock',
          }),
        ),
        step: Type.Optional(Duration),
        duration: Duration,
      },
      { additionalProperties: false },
    ),
    fleet: Type.Object(
      {
        players: Type.Integer({ minimum: 1, maximum: 100_000 }),
        placement: Type.Optional(
          Type.String({
            pattern: '^(in-process|child-per-player|children:\\d+)$',
            description: 'default in-process',
          }),
        ),
        certificates: Type.Optional(
          Type.Number({
            minimum: 0,
            maximum: 1,
            description: 'share of players enrolled with a client certificate',
          }),
        ),
        network: Type.Optional(
          Type.Union([Type.Literal('direct'), Type.Literal('tunnel'), Type.Literal('terminate')], {
            description: 'direct (no proxy), a proxy tunnelling the devices TLS, or terminating it',
          }),
        ),
        disk: Type.Optional(
          Type.Object(
            {
              capacity_mb: Type.Number({ minimum: 1 }),
              other_mb: Type.Optional(Type.Number({ minimum: 0 })),
            },
            {
              additionalProperties: false,
              description:
                "a small simulated volume for each player's data and media (its free space is what the agent sees); the host's disk when absent",
            },
          ),
        ),
      },
      { additionalProperties: false },
    ),
    creatives: Type.Array(
      Type.Object(
        {
          name: Type.String({ minLength: 1 }),
          valid_days: Type.Optional(
            Type.Integer({ minimum: 1, description: 'approval length from the start day' }),
          ),
          slot: Type.Optional(
            Type.Literal('gov', {
              description:
                "authority content: placed in the players' media/gov/, played as a slot, never billed",
            }),
          ),
        },
        { additionalProperties: false },
      ),
      { minItems: 1 },
    ),
    agent: Type.Optional(
      Type.Object(
        {
          image_duration_ms: Type.Optional(Type.Integer({ minimum: 1000 })),
          revocation_refresh_ms: Type.Optional(Type.Integer({ minimum: 1000 })),
          renewal_check_ms: Type.Optional(Type.Integer({ minimum: 1000, maximum: 3_600_000 })),
          media_recheck_ms: Type.Optional(Type.Integer({ minimum: 100 })),
          offline_after_ms: Type.Optional(Type.Integer({ minimum: 0 })),
          retention: Type.Optional(
            Type.Object(
              {
                keep_acknowledged_ms: Type.Optional(Type.Integer({ minimum: 0 })),
                keep_set_aside_ms: Type.Optional(Type.Integer({ minimum: 0 })),
                prune_interval_ms: Type.Optional(Type.Integer({ minimum: 1000 })),
              },
              { additionalProperties: false },
            ),
          ),
          disk: Type.Optional(
            Type.Object(
              {
                warn_free_bytes: Type.Optional(Type.Integer({ minimum: 0 })),
                hard_free_bytes: Type.Optional(Type.Integer({ minimum: 0 })),
                check_interval_ms: Type.Optional(Type.Integer({ minimum: 1000 })),
              },
              { additionalProperties: false },
            ),
          ),
          shipping: Type.Optional(
            Type.Object(
              {
                min_interval_ms: Type.Optional(Type.Integer({ minimum: 0 })),
                idle_interval_ms: Type.Optional(Type.Integer({ minimum: 0 })),
                backoff_base_ms: Type.Optional(Type.Integer({ minimum: 1 })),
                backoff_cap_ms: Type.Optional(Type.Integer({ minimum: 1 })),
              },
              { additionalProperties: false },
            ),
          ),
        },
        { additionalProperties: false },
      ),
    ),
    steps: Type.Optional(Type.Array(ScenarioStep)),
    report: Type.Optional(
      Type.Object(
        { database_every: Type.Optional(Duration) },
        {
          additionalProperties: false,
          description:
            'database_every: the players\' database size, free space and queue, this often (e.g. "30d")',
        },
      ),
    ),
    expect: Type.Optional(
      Type.Object(
        {
          refused: Type.Optional(Type.Integer({ minimum: 0, description: 'refusals tolerated (default 0)' })),
        },
        { additionalProperties: false },
      ),
    ),
  },
  { additionalProperties: false, $id: 'https://ooh.example/hardware-sim/scenario.schema.json' },
);
export type Scenario = Static<typeof Scenario>;
