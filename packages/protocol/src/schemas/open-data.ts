import { type Static, Type } from '@sinclair/typebox';
import { LocalizedText } from './common.js';

/*
 * spec "Open data dictionary (OpenDataDictionary)". Where the spec's table names the localised text of an item it
 * reads "the service {en, ru, kk}": the field's name is not legible there, so this project calls it `description`
 * (one name for every item: entries, licence, basis, disclosure).
 */

/**
 * spec: "Entry = {name (string, optional; files, tables, columns and the basis have one), code (string, optional;
 * statuses have one), the service {en, ru, kk} (required)}".
 */
export const DictionaryEntry = Type.Object({
  name: Type.Optional(Type.String()),
  code: Type.Optional(Type.String()),
  description: LocalizedText,
});
export type DictionaryEntry = Static<typeof DictionaryEntry>;

/**
 * spec codes: "district, format, daypart, each an array of {code (string), name {en, ru, kk}, start_hour, end_hour}";
 * "start_hour (integer, inclusive, Almaty time) and end_hour (integer, exclusive) are used on dayparts only".
 */
export const DictionaryCode = Type.Object({
  code: Type.String(),
  name: LocalizedText,
  start_hour: Type.Optional(Type.Integer({ minimum: 0, maximum: 23 })),
  end_hour: Type.Optional(Type.Integer({ minimum: 1, maximum: 24 })),
});
export type DictionaryCode = Static<typeof DictionaryCode>;

export const OpenDataDictionary = Type.Object({
  version: Type.String(),
  // spec: "status (string, draft until the city decides) and the service {en, ru, kk}"
  licence: Type.Object({ status: Type.String(), description: LocalizedText }),
  // spec: "One documented item: name (string), code (string), the service {en, ru, kk} (required)"
  basis: DictionaryEntry,
  files: Type.Array(DictionaryEntry),
  tables: Type.Array(DictionaryEntry),
  columns: Type.Array(DictionaryEntry),
  statuses: Type.Array(DictionaryEntry),
  codes: Type.Object({
    district: Type.Array(DictionaryCode),
    format: Type.Array(DictionaryCode),
    daypart: Type.Array(DictionaryCode),
  }),
  disclosure: Type.Object({
    min_operators: Type.Integer({ minimum: 0 }),
    min_advertisers: Type.Integer({ minimum: 0 }),
    max_party_share_pct: Type.Integer({ minimum: 0, maximum: 100 }),
    lag_months: Type.Integer({ minimum: 0 }),
    description: LocalizedText,
  }),
});
export type OpenDataDictionary = Static<typeof OpenDataDictionary>;
