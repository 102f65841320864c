import { createHash } from 'node:crypto';
import { expect } from 'vitest';
import { png } from '../approvals/media-fixtures.js';
import {
  cmsBody,
  insertDevice,
  type Operator,
  postCms,
  registerSource,
  sendBatch,
  type TestDevice,
} from '../pop/helpers.js';
import { apiCall, createOrganisation, createStructure, type TestPlatform } from '../support/platform.js';

/*
 * A campaign with a known set of signed batches, shared by the HTTP test and the Chromium test of the reports.
 *
 * Almaty is UTC+5 in 2026. The campaign (an agency's submission, declared 4, 2 and 3 plays a day on S1, S2 and S3)
 * runs 19-25 November. Plays (start times in UTC):
 *   19 Nov 09:00, 09:10 on S1 (device D1), received 19 Nov 10:00Z: Almaty day 19, UTC day 19;
 *   19 Nov 20:00, 21:00, 23:30 and 23:40 (screen off) on S1, received 20 Nov 00:00Z: Almaty day 20, UTC day 19;
 *   20 Nov 03:00, 04:00, 05:00 (media mismatch) on S1, received 06:00Z, with a gov slot play and a play of an approval
 *   the platform never issued in the same batch (neither is the campaign's);
 *   20 Nov 04:30, 04:40 on S2 from the operator's CMS (attested), received 06:00Z;
 *   20 Nov 05:30, 05:35, 05:40 on S3 (device D3, another operator's), received 06:00Z.
 * Device D2 (S2) is enrolled and never sends anything. Receive day 19 is sealed, 20 is not.
 */

export const ADVERTISER = '=HYPERLINK("http://x.example","Tea, Almaty")';
export const NOW = new Date('2026-11-20T06:00:00Z');
/** The fixture's first instant: a platform for it starts then (its authority's certificates are made then). */
export const FIRST_DAY = new Date('2026-11-18T06:00:00Z');
const MEDIA = png(320, 160, 23);
export const MEDIA_SHA256 = createHash('sha256').update(MEDIA).digest('hex');

export interface ReportFixture {
  submissionId: string;
  submissionNumber: string;
  approvalNumber: string;
  structures: {
    s1: { id: string; code: string };
    s2: { id: string; code: string };
    s3: { id: string; code: string };
  };
  keys: {
    agency: string;
    operatorA: string;
    operatorB: string;
    foreignAgency: string;
    foreignOperator: string;
    playsOnly: string;
  };
  operatorAId: string;
  operatorBId: string;
  agencyId: string;
  devices: { d1: TestDevice; d2: TestDevice; d3: TestDevice };
}

const at = (iso: string) => new Date(iso);

function agentPlay(seq: number, startIso: string, fields: Record<string, unknown> = {}) {
  const start = at(startIso);
  return {
    kind: 'play',
    seq,
    play_id: `d-${seq}`,
    approval_number: '',
    media_sha256: MEDIA_SHA256,
    start: start.toISOString(),
    end: new Date(start.getTime() + 15_000).toISOString(),
    duration_ms: 15_000,
    ...fields,
  };
}

async function ok(p: TestPlatform, key: string, method: 'GET' | 'POST' | 'PUT', url: string, body?: unknown) {
  const res = await apiCall(p.servers.api, key, method, url, body);
  expect(res.statusCode, `${method} ${url}: ${res.body}`).toBeLessThan(300);
  return res.json();
}

export async function buildReportFixture(p: TestPlatform): Promise<ReportFixture> {
  p.clock.set(FIRST_DAY);
  const operatorA = await createOrganisation(
    p,
    'operator',
    ['write:submissions', 'read:submissions', 'console:fleet', 'write:plays'],
    'Almaty Outdoor LLP',
  );
  const operatorB = await createOrganisation(
    p,
    'operator',
    ['read:submissions', 'console:fleet'],
    'Steppe Screens',
  );
  const agency = await createOrganisation(
    p,
    'agency',
    ['write:submissions', 'read:submissions', 'read:creatives'],
    'Media Agency LLP',
  );
  const foreignAgency = await createOrganisation(p, 'agency', ['write:submissions', 'read:submissions']);
  const foreignOperator = await createOrganisation(p, 'operator', ['read:submissions', 'console:fleet']);
  const playsOnly = await createOrganisation(p, 'operator', ['write:plays']);
  await createStructure(p, foreignOperator.id);
  const s1 = await createStructure(p, operatorA.id, { code: 'ALM-R001' });
  const s2 = await createStructure(p, operatorA.id, { code: 'ALM-R002' });
  const s3 = await createStructure(p, operatorB.id, { code: 'ALM-R003' });

  const draft = await ok(p, agency.key, 'POST', '/api/v1/submissions', {
    advertiser_name: ADVERTISER,
    advertiser_bin: '123456789012',
    period_from: '2026-11-19',
    period_to: '2026-11-25',
    structure_ids: [s1.id, s2.id, s3.id],
    category_id: 1564,
    declared_daily_plays: { [s1.id]: 4, [s2.id]: 2, [s3.id]: 3 },
  });
  const upload = await p.servers.api.inject({
    method: 'PUT',
    url: `/api/v1/submissions/${draft.id}/media`,
    headers: { authorization: `Bearer ${agency.key}`, 'content-type': 'image/png' },
    payload: MEDIA,
  });
  expect(upload.statusCode, upload.body).toBe(200);
  await ok(p, agency.key, 'POST', `/api/v1/submissions/${draft.id}/send`);
  const approved = await ok(p, p.adminKey, 'POST', `/api/v1/console/submissions/${draft.id}/approve`, {});
  const approvalNumber = approved.approval_number as string;

  const d1 = await insertDevice(p.database.db, s1, at('2026-11-18T06:00:00Z'));
  const d2 = await insertDevice(p.database.db, s2, at('2026-11-18T06:00:00Z'));
  const d3 = await insertDevice(p.database.db, s3, at('2026-11-18T06:00:00Z'));
  const campaignPlay = (seq: number, startIso: string, fields: Record<string, unknown> = {}) =>
    agentPlay(seq, startIso, { approval_number: approvalNumber, ...fields });

  const send = async (
    device: TestDevice,
    batchSeq: number,
    events: unknown[],
    expected: Record<string, number>,
  ) => {
    const res = await sendBatch(p.servers, device, batchSeq, events, { ts: p.clock.now() });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json(), res.body).toMatchObject(expected);
  };

  p.clock.set(at('2026-11-19T10:00:00Z'));
  await send(d1, 1, [campaignPlay(1, '2026-11-19T09:00:00Z'), campaignPlay(2, '2026-11-19T09:10:00Z')], {
    accepted: 2,
    flagged: 0,
  });

  p.clock.set(at('2026-11-20T00:00:00Z'));
  await send(
    d1,
    2,
    [
      campaignPlay(3, '2026-11-19T20:00:00Z'),
      campaignPlay(4, '2026-11-19T21:00:00Z'),
      campaignPlay(5, '2026-11-19T23:30:00Z'),
      campaignPlay(6, '2026-11-19T23:40:00Z', { screen: { power: 'off' } }),
    ],
    { accepted: 4, flagged: 1 },
  );
  await ok(p, p.adminKey, 'POST', '/api/v1/console/seals/2026-11-19');

  p.clock.set(NOW);
  await send(
    d1,
    3,
    [
      campaignPlay(7, '2026-11-20T03:00:00Z'),
      campaignPlay(8, '2026-11-20T04:00:00Z'),
      campaignPlay(9, '2026-11-20T05:00:00Z', { media_sha256: 'c'.repeat(64) }),
      agentPlay(10, '2026-11-20T05:10:00Z', { approval_number: undefined, slot: 'gov' }),
      agentPlay(11, '2026-11-20T05:20:00Z', { approval_number: 'APR-2026-999999' }),
    ],
    { accepted: 5, flagged: 2 },
  );
  await send(
    d3,
    1,
    [
      campaignPlay(1, '2026-11-20T05:30:00Z'),
      campaignPlay(2, '2026-11-20T05:35:00Z'),
      campaignPlay(3, '2026-11-20T05:40:00Z'),
    ],
    { accepted: 3, flagged: 0 },
  );
  const operator: Operator = { ...operatorA, structures: [s1, s2] };
  const source = await registerSource(p, operator, { 'screen-2': s2 });
  const cmsRecord = (seq: number, startIso: string) => ({
    ...campaignPlay(seq, startIso),
    player: 'screen-2',
    play_id: `screen-2-${seq}`,
  });
  const cms = await postCms(
    p.servers,
    source,
    cmsBody(source, 0, [cmsRecord(1, '2026-11-20T04:30:00Z'), cmsRecord(2, '2026-11-20T04:40:00Z')]),
  );
  expect(cms.statusCode, cms.body).toBe(200);
  expect(cms.json()).toMatchObject({ accepted: 2, flagged: 0 });

  return {
    submissionId: draft.id,
    submissionNumber: draft.number,
    approvalNumber,
    structures: { s1, s2, s3 },
    keys: {
      agency: agency.key,
      operatorA: operatorA.key,
      operatorB: operatorB.key,
      foreignAgency: foreignAgency.key,
      foreignOperator: foreignOperator.key,
      playsOnly: playsOnly.key,
    },
    operatorAId: operatorA.id,
    operatorBId: operatorB.id,
    agencyId: agency.id,
    devices: { d1, d2, d3 },
  };
}
