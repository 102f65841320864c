import { createHash } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadConfig, prepareEnrolment } from '@ooh/agent';
import { splitPemChain } from '@ooh/crypto';
import { type ConsoleClient, fetchPublic } from '../platform/console-client.js';
import { pngCreative } from '../platform/creatives.js';

/**
 * Setting a fleet up on a real platform through its console API, as an authority administrator and an operator
 * would: the operator organisation and its key, structures, approved creatives with their signed envelopes, and
 * each player's folder (config, authority root, device key, enrolment, client certificate, media with sidecars).
 */

export interface Operator {
  id: string;
  name: string;
  /** write:submissions, read:creatives, console:fleet. */
  key: string;
}

export interface StructureInfo {
  id: string;
  code: string;
}

export interface CreativeSpec {
  name: string;
  width?: number;
  height?: number;
  seed?: number;
  /** The approval's first and last day (Almaty); default the fleet's. */
  validFrom?: string;
  validUntil?: string;
}

/** An approved creative: its file, its approval and the envelope a player receives with it. */
export interface IssuedCreative {
  name: string;
  fileName: string;
  sha256: string;
  bytes: Buffer;
  approvalNumber: string;
  validFrom: string;
  validUntil: string;
  structureCodes: string[];
  envelopeText: string;
}

/** The agent settings the simulator writes into each player's config (snake_case as on disk). */
export interface AgentSettings {
  image_duration_ms: number;
  shipping: {
    min_interval_ms: number;
    idle_interval_ms: number;
    backoff_base_ms: number;
    backoff_cap_ms: number;
  };
  revocation_refresh_ms: number;
  renewal_check_ms: number;
  media_recheck_ms: number;
  offline_after_ms: number;
  max_clock_correction_ms?: number;
  /** apps/agent/README.md "Retention and disk space" (the agent's defaults when absent). */
  retention?: { keep_acknowledged_ms?: number; keep_set_aside_ms?: number; prune_interval_ms?: number };
  disk?: { warn_free_bytes?: number; hard_free_bytes?: number; check_interval_ms?: number };
}

export const DEFAULT_AGENT_SETTINGS: AgentSettings = {
  image_duration_ms: 15_000,
  shipping: {
    min_interval_ms: 10_000,
    idle_interval_ms: 60_000,
    backoff_base_ms: 2_000,
    backoff_cap_ms: 600_000,
  },
  revocation_refresh_ms: 3_600_000,
  renewal_check_ms: 3_600_000,
  media_recheck_ms: 60_000,
  offline_after_ms: 600_000,
};

export const OPERATOR_SCOPES = ['write:submissions', 'read:creatives', 'console:fleet'];

/** spec: "operators: up to 200 of their own structures" per submission. */
const STRUCTURES_PER_SUBMISSION = 200;

export async function createOperator(admin: ConsoleClient, name: string): Promise<Operator> {
  const organisation = await admin.createOrganisation(name, 'operator');
  const key = await admin.createApiKey(organisation.id, `${name} simulator`, OPERATOR_SCOPES);
  return { id: organisation.id, name, key: key.key };
}

export async function createStructures(
  admin: ConsoleClient,
  operatorId: string,
  codes: string[],
  fields: { district?: string; format?: string } = {},
  concurrency = 8,
): Promise<StructureInfo[]> {
  return mapLimit(codes, concurrency, (code, i) =>
    admin.createStructure({
      organisation_id: operatorId,
      code,
      district: fields.district ?? DISTRICTS[i % DISTRICTS.length]!,
      format: fields.format ?? 'billboard',
    }),
  );
}

const DISTRICTS = ['almaly', 'bostandyk', 'medeu', 'auezov', 'zhetysu', 'nauryzbay', 'alatau', 'turksib'];

/** A tier-2 category of the catalogue (a submission needs one to be sent). */
export async function someCategoryId(client: ConsoleClient): Promise<number> {
  const { items } = await client.categories();
  const chosen = items.find((c) => c.tier === 2) ?? items[0];
  if (!chosen) throw new Error('the platform lists no categories');
  return chosen.id;
}

/**
 * Submits, uploads, sends and approves each creative for `structures` (in submissions of at most 200 structures),
 * and fetches its envelope.
 */
export async function issueCreatives(args: {
  admin: ConsoleClient;
  operator: ConsoleClient;
  structures: StructureInfo[];
  creatives: CreativeSpec[];
  validFrom: string;
  validUntil: string;
  advertiser?: string;
}): Promise<IssuedCreative[]> {
  const categoryId = await someCategoryId(args.operator);
  const issued: IssuedCreative[] = [];
  for (const [index, spec] of args.creatives.entries()) {
    const bytes = pngCreative(spec.width ?? 192, spec.height ?? 96, spec.seed ?? index + 1);
    const sha256 = createHash('sha256').update(bytes).digest('hex');
    const validFrom = spec.validFrom ?? args.validFrom;
    const validUntil = spec.validUntil ?? args.validUntil;
    for (let offset = 0; offset < args.structures.length; offset += STRUCTURES_PER_SUBMISSION) {
      const group = args.structures.slice(offset, offset + STRUCTURES_PER_SUBMISSION);
      const submission = await args.operator.createSubmission({
        advertiser_name: args.advertiser ?? `Simulated advertiser ${spec.name}`,
        period_from: validFrom,
        period_to: validUntil,
        structure_ids: group.map((s) => s.id),
        category_id: categoryId,
      });
      const uploaded = await args.operator.uploadMedia(submission.id, bytes, 'image/png');
      if (uploaded.media_sha256 !== sha256) throw new Error(`the platform hashed ${spec.name} differently`);
      await args.operator.sendSubmission(submission.id);
      const approval = await args.admin.approve(submission.id);
      issued.push({
        name: spec.name,
        fileName: `${safeName(spec.name)}.png`,
        sha256,
        bytes,
        approvalNumber: approval.approval_number,
        validFrom,
        validUntil,
        structureCodes: group.map((s) => s.code),
        envelopeText: await args.operator.envelope(approval.approval_number),
      });
    }
  }
  return issued;
}

export interface PlayerFiles {
  id: string;
  dir: string;
  configFile: string;
  deviceId: string;
  structure: StructureInfo;
  certificateNotAfter: string | null;
  /** The chain up to the device CA from the enrolment answer (null without a certificate). */
  chainPem: string | null;
}

export interface PlayerNetwork {
  agentsUrl: string;
  devicesUrl: string;
  verifyUrl: string;
  /**
   * PEM of further CAs the player trusts for TLS servers (a proxy's CA). The device CA root from the enrolment
   * answer is always trusted (the devices host's server certificate is issued by it).
   */
  extraServerCaPem?: string;
}

/**
 * Lays out one player as a technician does: config file, pinned authority root, `agent init` (key and CSR),
 * enrolment in the console (device id, client certificate), then the device id written into the config.
 */
export async function enrolPlayer(args: {
  operator: ConsoleClient;
  dir: string;
  structure: StructureInfo;
  network: PlayerNetwork;
  authorityRootPem: string;
  settings: AgentSettings;
  /** Ask the device CA for a client certificate (the certificate channel); default true. */
  certificate?: boolean;
}): Promise<PlayerFiles> {
  const { dir } = args;
  mkdirSync(join(dir, 'media'), { recursive: true });
  writeFileSync(join(dir, 'authority-root.pem'), args.authorityRootPem);
  writeFileSync(join(dir, 'server-ca.pem'), args.network.extraServerCaPem ?? '');
  const raw: Record<string, unknown> = {
    structure: args.structure.code,
    platform: {
      agents_url: args.network.agentsUrl,
      devices_url: args.network.devicesUrl,
      verify_url: args.network.verifyUrl,
    },
    data_dir: 'data',
    media_dir: 'media',
    authority_root_file: 'authority-root.pem',
    server_ca_file: 'server-ca.pem',
    // Files are written whole by the simulator, sidecar first: nothing to wait for.
    media_stability_ms: 0,
    sidecar_grace_ms: 0,
    ...args.settings,
  };
  const configFile = join(dir, 'agent.json');
  writeFileSync(configFile, `${JSON.stringify(raw, null, 2)}\n`);
  const enrolment = await prepareEnrolment(loadConfig(configFile));
  const answer = await args.operator.enrolDevice({
    structure_id: args.structure.id,
    public_key: enrolment.publicKeySpki,
    ...(args.certificate === false ? {} : { csr: enrolment.csrPem }),
  });
  const config = loadConfig(configFile);
  if (answer.certificate_pem && answer.chain_pem) {
    writeFileSync(config.certificateFile, answer.certificate_pem);
    writeFileSync(config.caChainFile, answer.chain_pem);
    const trusted = [deviceCaRoot(answer.chain_pem), args.network.extraServerCaPem ?? ''];
    writeFileSync(
      join(dir, 'server-ca.pem'),
      trusted
        .map((p) => p.trim())
        .filter(Boolean)
        .join('\n') + '\n',
    );
  }
  writeFileSync(configFile, `${JSON.stringify({ device_id: answer.device_id, ...raw }, null, 2)}\n`);
  return {
    id: args.structure.code,
    dir,
    configFile,
    deviceId: answer.device_id,
    structure: args.structure,
    certificateNotAfter: answer.not_after ?? null,
    chainPem: answer.chain_pem ?? null,
  };
}

/** The device CA root: the last certificate of every chain_pem (platform devices README). */
export function deviceCaRoot(chainPem: string): string {
  const chain = splitPemChain(chainPem);
  const root = chain[chain.length - 1];
  if (!root) throw new Error('the enrolment answer carries no chain');
  return root;
}

/** Places a creative in a player's media folder: the sidecar first, then the file (DESIGN.md §9). */
export function placeCreative(mediaDir: string, creative: IssuedCreative, subfolder?: string): string {
  const dir = subfolder ? join(mediaDir, subfolder) : mediaDir;
  mkdirSync(dir, { recursive: true });
  const path = join(dir, creative.fileName);
  writeFileSync(`${path}.envelope.json`, creative.envelopeText);
  writeFileSync(path, creative.bytes);
  return path;
}

export async function authorityRoot(verifyUrl: string): Promise<string> {
  const { status, text } = await fetchPublic(verifyUrl, '/v1/authority-root.pem');
  if (status !== 200) throw new Error(`GET ${verifyUrl}/v1/authority-root.pem: HTTP ${status}`);
  return text;
}

export function safeName(name: string): string {
  return name.replace(/[^A-Za-z0-9_-]+/g, '-').replace(/^-+|-+$/g, '') || 'creative';
}

/** Runs `work` over `items` with at most `limit` at a time, keeping the order of results. */
export async function mapLimit<T, R>(
  items: readonly T[],
  limit: number,
  work: (item: T, index: number) => Promise<R>,
): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  const lanes = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) {
      const index = next++;
      results[index] = await work(items[index]!, index);
    }
  });
  await Promise.all(lanes);
  return results;
}
