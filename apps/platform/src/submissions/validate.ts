import { type FieldError, isCalendarDate, LIMITS } from '@ooh/protocol';
import type { OrganisationKind } from '../auth/principal.js';
import type { StructureRow } from '../structures/repository.js';

/** A create request after every rule of the spec has passed. */
export interface ValidSubmission {
  advertiser_name: string;
  advertiser_bin: string | null;
  period_from: string;
  period_to: string;
  structure_ids: string[];
  channel: 'direct' | 'programmatic';
  fast_track: boolean;
  external_refs: Record<string, unknown> | null;
  category_id: number | null;
  declared_daily_plays: Record<string, number> | null;
}

const EXTERNAL_REF_KEYS = new Set(['crid', 'adomain', 'dsp', 'ssp']);
const DOMAIN = /^(?=.{1,253}$)(?!-)[a-z0-9-]{1,63}(?<!-)(\.(?!-)[a-z0-9-]{1,63}(?<!-))+$/i;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export interface Lookups {
  kind: OrganisationKind;
  organisationId: string;
  /** Members of the requested saved sets (retired ones already left out), and sets that are not the caller's. */
  expandSets: (ids: string[]) => Promise<{ structureIds: string[]; missingSets: string[] }>;
  structures: (ids: string[]) => Promise<Map<string, StructureRow>>;
  categoryExists: (id: number) => boolean;
  /**
   * Edits of a draft (PATCH): the structures it has. A body that sends neither structure_ids nor structure_set_ids
   * keeps them as they are, unchecked (they passed when they were chosen).
   */
  keptStructureIds?: string[];
  /**
   * Edits of a draft that replace the structures without sending declared_daily_plays: the declared figures of
   * structures no longer chosen are dropped instead of refused (they came from the draft, not from the caller).
   */
  pruneDeclared?: boolean;
}

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * Every rule of POST /api/v1/submissions, collecting all field errors at once
 * (422 validation_failed lists them together).
 */
export async function validateSubmission(
  body: unknown,
  lookups: Lookups,
): Promise<{ ok: true; value: ValidSubmission } | { ok: false; errors: FieldError[] }> {
  const errors: FieldError[] = [];
  const err = (path: string, code: string, message: string) => errors.push({ path, code, message });
  if (!isObject(body))
    return { ok: false, errors: [{ path: '/', code: 'type', message: 'the body must be a JSON object' }] };

  const known = new Set([
    'advertiser_name',
    'advertiser_bin',
    'period_from',
    'period_to',
    'structure_ids',
    'structure_set_ids',
    'channel',
    'external_refs',
    'fast_track',
    'category_id',
    'declared_daily_plays',
  ]);
  for (const key of Object.keys(body))
    if (!known.has(key)) err(`/${key}`, 'unknown_key', `unknown field ${key}`);

  // advertiser_name: required, up to 300 characters.
  const name = body['advertiser_name'];
  if (name === undefined) err('/advertiser_name', 'required', 'advertiser_name is required');
  else if (typeof name !== 'string') err('/advertiser_name', 'type', 'must be a string');
  else if (name.trim() === '') err('/advertiser_name', 'too_short', 'must not be empty');
  else if ([...name].length > LIMITS.advertiserNameMaxChars) {
    err('/advertiser_name', 'too_long', `up to ${LIMITS.advertiserNameMaxChars} characters`);
  }

  const bin = body['advertiser_bin'];
  if (bin !== undefined && bin !== null && (typeof bin !== 'string' || !/^\d{12}$/.test(bin))) {
    err('/advertiser_bin', 'pattern', `must be ${LIMITS.advertiserBinDigits} digits`);
  }

  // Campaign period: both dates required, from <= to.
  const dates: Record<string, string | null> = {};
  for (const f of ['period_from', 'period_to'] as const) {
    const v = body[f];
    dates[f] = null;
    if (v === undefined) err(`/${f}`, 'required', `${f} is required`);
    else if (typeof v !== 'string' || !isCalendarDate(v)) err(`/${f}`, 'format', 'must be a date YYYY-MM-DD');
    else dates[f] = v;
  }
  if (dates['period_from'] && dates['period_to'] && dates['period_from'] > dates['period_to']) {
    err('/period_to', 'out_of_range', 'period_to must not be before period_from');
  }

  // channel, external_refs and fast_track.
  const channel = body['channel'] ?? 'direct';
  if (channel !== 'direct' && channel !== 'programmatic')
    err('/channel', 'not_allowed', 'must be direct or programmatic');
  const refs = body['external_refs'];
  if (refs !== undefined && refs !== null) {
    if (!isObject(refs)) err('/external_refs', 'type', 'must be an object');
    else {
      if (channel !== 'programmatic')
        err('/external_refs', 'not_allowed', 'external_refs only with channel programmatic');
      for (const key of Object.keys(refs)) {
        if (!EXTERNAL_REF_KEYS.has(key)) err(`/external_refs/${key}`, 'unknown_key', `unknown key ${key}`);
      }
      for (const key of ['crid', 'dsp', 'ssp']) {
        const v = refs[key];
        if (v !== undefined && (typeof v !== 'string' || v.length === 0 || v.length > 256)) {
          err(`/external_refs/${key}`, 'type', 'must be a non-empty string of up to 256 characters');
        }
      }
      const adomain = refs['adomain'];
      if (adomain !== undefined) {
        if (!Array.isArray(adomain) || adomain.length > 50)
          err('/external_refs/adomain', 'type', 'must be an array of up to 50 domains');
        else {
          adomain.forEach((d, i) => {
            if (typeof d !== 'string' || !DOMAIN.test(d)) {
              err(`/external_refs/adomain/${i}`, 'format', 'must be a domain name such as example.com');
            }
          });
        }
      }
    }
  }
  // null in an optional field is "not given", as for the fields above: a client that writes every field, and a
  // Submission sent back as a request (it carries category_id null), are taken (docs/decisions.md, "Submissions").
  const fastTrack = body['fast_track'];
  if (fastTrack !== undefined && fastTrack !== null && typeof fastTrack !== 'boolean')
    err('/fast_track', 'type', 'must be a boolean');
  else if (fastTrack === true && channel !== 'programmatic') {
    err('/fast_track', 'not_allowed', 'fast_track only with channel programmatic');
  }

  // category_id: optional at draft; when given it must be a tier 1 or 2 category.
  const categoryId = body['category_id'];
  if (categoryId !== undefined && categoryId !== null) {
    if (typeof categoryId !== 'number' || !Number.isInteger(categoryId))
      err('/category_id', 'type', 'must be an integer');
    else if (!lookups.categoryExists(categoryId)) {
      err('/category_id', 'not_found', `no category ${categoryId} in GET /api/v1/categories`);
    }
  }

  // Structures: explicit ids plus expanded saved sets make the whole list (spec: "sending either replaces the
  // current structures"); an edit that sends neither keeps the draft's.
  const keep =
    lookups.keptStructureIds !== undefined &&
    body['structure_ids'] === undefined &&
    body['structure_set_ids'] === undefined;
  const finalIds = keep ? lookups.keptStructureIds! : await validateStructures(body, lookups, err);

  // declared_daily_plays: keyed by chosen structure ids, non-negative integers.
  const declared = body['declared_daily_plays'];
  let declaredValue: Record<string, number> | null = null;
  if (declared !== undefined && declared !== null) {
    if (!isObject(declared)) err('/declared_daily_plays', 'type', 'must be an object keyed by structure id');
    else {
      declaredValue = {};
      const chosen = new Set(finalIds);
      for (const [key, value] of Object.entries(declared)) {
        const id = key.toLowerCase();
        if (!chosen.has(id)) {
          if (lookups.pruneDeclared) continue;
          err(`/declared_daily_plays/${key}`, 'not_allowed', 'not one of the chosen structures');
        }
        if (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value > 1_000_000) {
          err(`/declared_daily_plays/${key}`, 'type', 'must be a whole number of plays per day, 0 or more');
        } else declaredValue[id] = value;
      }
    }
  }

  if (errors.length > 0) return { ok: false, errors };
  return {
    ok: true,
    value: {
      advertiser_name: name as string,
      advertiser_bin: typeof bin === 'string' ? bin : null,
      period_from: dates['period_from']!,
      period_to: dates['period_to']!,
      structure_ids: finalIds,
      channel: channel as 'direct' | 'programmatic',
      fast_track: fastTrack === true,
      external_refs: isObject(refs) ? refs : null,
      category_id: typeof categoryId === 'number' ? categoryId : null,
      declared_daily_plays: declaredValue,
    },
  };
}

/** structure_ids and structure_set_ids: the whole list after expanding the sets, every rule of the spec checked. */
async function validateStructures(
  body: Record<string, unknown>,
  lookups: Lookups,
  err: (path: string, code: string, message: string) => void,
): Promise<string[]> {
  // Each id in lower case, with its first position in the body as sent (a 422 names the element as sent). Maps, not
  // searches of the list: a 1 MB body holds some 26,000 ids, and a search per id kept the event loop for seconds.
  const explicitAt = new Map<string, number>();
  const rawIds = body['structure_ids'];
  if (rawIds === undefined) err('/structure_ids', 'required', 'structure_ids is required');
  else if (!Array.isArray(rawIds)) err('/structure_ids', 'type', 'must be an array of structure ids');
  else {
    rawIds.forEach((id, i) => {
      if (typeof id !== 'string' || !UUID.test(id)) err(`/structure_ids/${i}`, 'format', 'must be a uuid');
      else if (!explicitAt.has(id.toLowerCase())) explicitAt.set(id.toLowerCase(), i);
    });
  }
  const rawSets = body['structure_set_ids'];
  const setAt = new Map<string, number>();
  if (rawSets !== undefined) {
    if (!Array.isArray(rawSets)) err('/structure_set_ids', 'type', 'must be an array of set ids');
    else {
      rawSets.forEach((id, i) => {
        if (typeof id !== 'string' || !UUID.test(id))
          err(`/structure_set_ids/${i}`, 'format', 'must be a uuid');
        else if (!setAt.has(id.toLowerCase())) setAt.set(id.toLowerCase(), i);
      });
    }
  }
  const expanded = await lookups.expandSets([...setAt.keys()]);
  for (const missing of expanded.missingSets) {
    err(
      `/structure_set_ids/${setAt.get(missing)}`,
      'not_found',
      `no saved set ${missing} in your organisation`,
    );
  }
  const finalIds = [...new Set([...explicitAt.keys(), ...expanded.structureIds])];
  const found = await lookups.structures(finalIds);
  const fromSets = new Set(expanded.structureIds);
  for (const id of finalIds) {
    const s = found.get(id);
    const at = explicitAt.get(id);
    const path = at === undefined ? '/structure_set_ids' : `/structure_ids/${at}`;
    if (!s) err(path, 'not_found', `no structure ${id}`);
    else if (s.retired_at && !fromSets.has(id)) err(path, 'retired', `structure ${s.code} is retired`);
    else if (lookups.kind === 'operator' && s.organisation_id !== lookups.organisationId) {
      err(
        path,
        'not_allowed',
        `structure ${s.code} belongs to another operator; operators choose their own structures`,
      );
    }
  }
  const max = lookups.kind === 'operator' ? LIMITS.operatorStructuresMax : LIMITS.agencyStructuresMax;
  if (finalIds.length > max) {
    err(
      '/structure_ids',
      'too_many',
      `${finalIds.length} structures after expanding sets; at most ${max} for a ${lookups.kind}`,
    );
  }
  if (Array.isArray(rawIds) && finalIds.length === 0)
    err('/structure_ids', 'too_few', 'choose at least one structure');
  return finalIds;
}
