import { writeFile } from 'node:fs/promises';
import http from 'node:http';
import path from 'node:path';
import { cmsSign } from '@ooh/crypto';
import { canonicalBytes } from '@ooh/verify';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { type Authority, loadAuthority } from '../../src/authority/index.js';
import { runSealScheduler } from '../../src/seals/index.js';
import { main } from '../../src/verifier/cli.js';
import { approve, inReview, organisation, revoke, structures } from '../approvals/helpers.js';
import { png } from '../approvals/media-fixtures.js';
import { startSealPlatform } from './helpers.js';

/*
 * ooh-verify against a verify host that lies (audit H): a proxy in front of the real verify host changes answers the
 * way a dishonest host, a cache or a man in the middle could. Each case is one the verifier used to pass or misread.
 *
 * Timeline (Asia/Almaty): two approvals issued on the 20th; the 20th sealed at 01:00 on the 21st; the first approval
 * revoked on the 21st (revocation list v1), the second an hour later (v2); the 21st and 22nd sealed at 01:00 the day
 * after, each run digesting the day's block. So the head is the block of the 22nd, the seal of the 20th is a leaf of
 * the block of the 21st, the seal of the 22nd is not digested yet.
 */

type P = Awaited<ReturnType<typeof startSealPlatform>>;
let p: P;
let authority: Authority;
let server: http.Server;
let url = '';
let rootFile = '';
let revocationListV1: Buffer;
const numbers: string[] = [];

type Answer = { status: number; body: Buffer };
/** What the proxy does to an answer of the real verify host; the identity by default. */
let tamper: (path: string, answer: Answer) => Answer = (_path, answer) => answer;
/** Every path the verifier asked for, in order. */
let asked: string[] = [];

const json =
  (change: (value: Record<string, unknown>) => unknown) =>
  (answer: Answer): Answer => ({
    status: answer.status,
    body: Buffer.from(JSON.stringify(change(JSON.parse(answer.body.toString('utf8'))))),
  });
const on =
  (target: string, change: (answer: Answer) => Answer) =>
  (path: string, answer: Answer): Answer =>
    path === target ? change(answer) : answer;

async function verifyCli(...args: string[]): Promise<{ code: number; out: string[]; err: string[] }> {
  const out: string[] = [];
  const err: string[] = [];
  asked = [];
  const code = await main([...args, '--from', url, '--root', rootFile, '--no-progress'], {
    out: (l) => out.push(l),
    err: (l) => err.push(l),
    env: {},
  });
  return { code, out, err };
}

const fails = (out: string[]) => out.filter((l) => l.startsWith('FAIL'));

async function signAs(signer: 'seal' | 'envelope', body: unknown, signingTime: Date): Promise<string> {
  const { certPem, key } = signer === 'seal' ? authority.sealSigner : authority.envelopeSigner;
  const der = await cmsSign({
    content: canonicalBytes(body),
    signerCertificatePem: certPem,
    signerKey: key,
    signingTime,
    extraCertificatesPem: authority.chainPem,
  });
  return Buffer.from(der).toString('base64');
}

beforeAll(async () => {
  p = await startSealPlatform(new Date('2026-11-20T05:00:00Z'));
  await runSealScheduler(p.ctx);
  const operator = await organisation(p, 'operator');
  const [structure] = await structures(p, operator.id, 1);
  for (const seed of [7, 8]) {
    const submission = await inReview(
      p,
      operator.key,
      { bytes: png(64, 32, seed), type: 'image/png' },
      { structure_ids: [structure!.id], period_from: '2026-11-20', period_to: '2026-12-31' },
    );
    const approved = await approve(p, submission.id);
    expect(approved.statusCode, approved.body).toBe(201);
    numbers.push(approved.json().approval_number);
  }
  p.clock.set(new Date('2026-11-20T20:00:00Z'));
  await runSealScheduler(p.ctx);
  p.clock.set(new Date('2026-11-21T05:00:00Z'));
  expect((await revoke(p, numbers[0]!)).statusCode).toBe(200);
  revocationListV1 = (await p.servers.verify.inject({ method: 'GET', url: '/v1/revocations.json' }))
    .rawPayload;
  p.clock.set(new Date('2026-11-21T06:00:00Z'));
  expect((await revoke(p, numbers[1]!)).statusCode).toBe(200);
  for (const day of ['2026-11-21', '2026-11-22']) {
    p.clock.set(new Date(`${day}T20:00:00Z`));
    await runSealScheduler(p.ctx);
  }
  authority = await loadAuthority(p.ctx);
  rootFile = path.join(p.dataDir, 'authority-root.pem');
  await writeFile(rootFile, authority.rootPem);
  server = http.createServer((req, res) => {
    const target = req.url ?? '/';
    asked.push(target);
    p.servers.verify.inject({ method: 'GET', url: target }).then(
      (real) => {
        const answer = tamper(target, { status: real.statusCode, body: real.rawPayload });
        res.writeHead(answer.status, { 'content-type': String(real.headers['content-type'] ?? '') });
        res.end(answer.body);
      },
      (error: unknown) => {
        res.writeHead(599);
        res.end(String(error));
      },
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
});
afterAll(async () => {
  await new Promise((resolve) => server?.close(resolve));
  await p?.close();
});

describe('ooh-verify approval against a host that hides a revocation', () => {
  test('the honest host: the revoked approval is reported revoked, every check passes', async () => {
    tamper = (_path, answer) => answer;
    const honest = await verifyCli('approval', numbers[1]!);
    expect(fails(honest.out)).toEqual([]);
    expect(honest.out.join('\n')).toMatch(
      new RegExp(
        `^ok +ledger leaves of ${numbers[1]}: the 3 ledger block\\(s\\) walked hold 1 issue and 1 revocation leaf\\(s\\) of it`,
        'm',
      ),
    );
    expect(honest.out.join('\n')).toMatch(/^ok +revocation list: version 2 .* names APR-/m);
  });

  test('the approval shown unrevoked with the older signed revocation list: the revocation leaf it walks is reported, exit 1', async () => {
    // The audit's attack: the document without its revocation, and list v1, genuinely signed, which predates it.
    tamper = (target, answer) =>
      target === `/v1/approvals/${numbers[1]}`
        ? json((doc) => ({
            ...doc,
            status: 'valid',
            revoked_at: null,
            ledger: { ...(doc['ledger'] as object), revocation: null },
          }))(answer)
        : target === '/v1/revocations.json'
          ? { status: 200, body: revocationListV1 }
          : answer;
    const fooled = await verifyCli('approval', numbers[1]!, '--require-ledger');
    expect(fooled.code).toBe(1);
    const failed = fails(fooled.out).join('\n');
    expect(failed).toMatch(
      new RegExp(
        `^FAIL ledger block 2026-11-21: holds the revocation of ${numbers[1]} at 2026-11-21T11:00:00\\.000\\+05:00 \\(index \\d\\), but the document shows it valid and not revoked: the verify host hides a revocation$`,
        'm',
      ),
    );
    expect(failed).toMatch(
      new RegExp(
        `^FAIL revocation list: version 1 \\(issued .*\\) does not name ${numbers[1]}, revoked at .* in ledger block 2026-11-21 \\(1 revocation\\(s\\) of the ledger missing\\): a list older than the ledger$`,
        'm',
      ),
    );
    expect(fooled.out.at(-1)).toMatch(new RegExp(`^approval ${numbers[1]}: \\d check\\(s\\) FAILED$`));

    // No list at all ("none yet", 404) while the ledger holds revocations fails the same way.
    tamper = (target, answer) =>
      target === '/v1/revocations.json' ? { status: 404, body: Buffer.from('{}') } : answer;
    const noList = await verifyCli('approval', numbers[1]!);
    expect(noList.code).toBe(1);
    expect(fails(noList.out)).toEqual([
      'FAIL revocation list: not published (404), though the approval is revoked',
    ]);
  });

  test('a null ledger position of the approval once the head is past its block is withheld, not pending', async () => {
    tamper = on(
      `/v1/approvals/${numbers[0]}`,
      json((doc) => ({ ...doc, ledger: { ...(doc['ledger'] as object), approval: null } })),
    );
    const withheld = await verifyCli('approval', numbers[0]!);
    expect(withheld.code).toBe(1);
    expect(fails(withheld.out)).toEqual([
      `FAIL ledger leaf of approval ${numbers[0]}: ledger is null, but the ledger head (2026-11-22, height 3) is past the block of 2026-11-20 that holds the approval leaf: the host withholds the ledger proof (not pending: running again later would not help)`,
    ]);
  });

  test('a revocation list signed by the seal signer fails as signed by the wrong signer', async () => {
    const list = JSON.parse(
      (await p.servers.verify.inject({ method: 'GET', url: '/v1/revocations.json' })).body,
    ) as { body: { issued_at: string } };
    const signature = await signAs('seal', list.body, new Date(list.body.issued_at));
    tamper = on(
      '/v1/revocations.json',
      json((doc) => ({ ...doc, signature })),
    );
    const wrong = await verifyCli('approval', numbers[1]!);
    expect(wrong.code).toBe(1);
    expect(fails(wrong.out)).toEqual([
      'FAIL revocation list: CMS signature verifies against the pinned root, but by the wrong signer: the signer "OOH Stats Seal Signer" is not the envelope signer',
    ]);
  });
});

describe('ooh-verify seal against a hostile host', () => {
  test('a null ledger once the head is past the block holding the seal fails; at that block it is pending', async () => {
    tamper = on(
      '/v1/stats-seals/2026-11-20',
      json((seal) => ({ ...seal, ledger: null })),
    );
    const withheld = await verifyCli('seal', '2026-11-20');
    expect(withheld.code).toBe(1);
    expect(fails(withheld.out)).toEqual([
      'FAIL ledger: ledger is null, but the ledger head (2026-11-22, height 3) is past the block of 2026-11-21 that holds the stats_seal leaf: the host withholds the ledger proof (not pending: running again later would not help)',
    ]);
    // The seal of the 21st was made on the 22nd, whose block is the head: its leaf may still be on its way.
    tamper = on(
      '/v1/stats-seals/2026-11-21',
      json((seal) => ({ ...seal, ledger: null })),
    );
    const pending = await verifyCli('seal', '2026-11-21');
    expect(pending.code, pending.out.join('\n')).toBe(0);
    expect(pending.out.join('\n')).toMatch(/^note ledger: ledger is null: .* run again later/m);
  });

  test('a head claiming a huge height is refused without walking the ledger, and so is one whose height does not fit its day', async () => {
    tamper = on(
      '/v1/ledger/head',
      json((head) => ({ ...head, block_height: 1_000_000_000 })),
    );
    const huge = await verifyCli('seal', '2026-11-20');
    expect(huge.code).toBe(1);
    expect(fails(huge.out)).toContain(
      'FAIL ledger head: claims block height 1000000000, more than the 36525 blocks (a hundred years of daily blocks) this verifier walks: the chain was not walked',
    );
    // Only the block holding the seal was read, no walk.
    expect(asked.filter((a) => a.startsWith('/v1/ledger/blocks/'))).toEqual(['/v1/ledger/blocks/2026-11-21']);

    tamper = on(
      '/v1/ledger/head',
      json((head) => ({ ...head, block_height: (head['block_height'] as number) + 30_000 })),
    );
    const offDay = await verifyCli('seal', '2026-11-20');
    expect(offDay.code).toBe(1);
    expect(fails(offDay.out)).toContain(
      "FAIL ledger head: height 30003 on 2026-11-22 does not fit the seal's block (height 2 on 2026-11-21): with one block a day the head is as many blocks above it as days after it; the chain was not walked",
    );
    expect(asked.filter((a) => a.startsWith('/v1/ledger/blocks/'))).toEqual(['/v1/ledger/blocks/2026-11-21']);
  });

  test("a seal signed with the envelope signer's certificate fails as signed by the wrong signer", async () => {
    const real = JSON.parse(
      (await p.servers.verify.inject({ method: 'GET', url: '/v1/stats-seals/2026-11-21' })).body,
    ) as { body: unknown; signed_at: string };
    const signature = await signAs('envelope', real.body, new Date(real.signed_at));
    tamper = on(
      '/v1/stats-seals/2026-11-21',
      json((seal) => ({ ...seal, signature })),
    );
    const wrong = await verifyCli('seal', '2026-11-21');
    expect(wrong.code).toBe(1);
    expect(fails(wrong.out)).toEqual([
      'FAIL seal 2026-11-21: CMS signature verifies against the pinned root, but by the wrong signer: the signer "OOH Approval Envelope Signer" is not the seal signer',
    ]);
  });

  test('a seal signed by the seal signer before its day ended fails', async () => {
    // The body of the 22nd signed at 11:00 on the 22nd (Almaty), chained to the real seal of the 21st.
    const real = JSON.parse(
      (await p.servers.verify.inject({ method: 'GET', url: '/v1/stats-seals/2026-11-22' })).body,
    ) as { body: unknown };
    const signedAt = '2026-11-22T11:00:00+05:00';
    const signature = await signAs('seal', real.body, new Date(signedAt));
    tamper = on(
      '/v1/stats-seals/2026-11-22',
      json((seal) => ({ ...seal, signed_at: signedAt, signature, ledger: null })),
    );
    const early = await verifyCli('seal', '2026-11-22');
    expect(early.code).toBe(1);
    expect(fails(early.out)).toEqual([
      'FAIL seal 2026-11-22: signed_at 2026-11-22T11:00:00+05:00 is before its Almaty day ended (2026-11-22T19:00:00.000Z): a seal is made once, after its day ends',
    ]);
  });
});

describe('ooh-verify and a host that fails', () => {
  test.each([
    ['the seal', '/v1/stats-seals/2026-11-20', 500],
    ['the ledger head', '/v1/ledger/head', 503],
    ['a ledger block', '/v1/ledger/blocks/2026-11-21', 502],
  ])('%s (%s) answering HTTP %i: exit 2, the host could not be read, no check called failed', async (_what, target, status) => {
    tamper = on(target, () => ({ status, body: Buffer.from('{"title":"down"}') }));
    const down = await verifyCli('seal', '2026-11-20');
    expect(down).toEqual({
      code: 2,
      out: [],
      err: [
        `ooh-verify: could not read the verify host ${url}: it answered HTTP ${status} to ${url}${target}, so no verdict is given (exit 2, not a failed check); try again later`,
      ],
    });
  });
});
