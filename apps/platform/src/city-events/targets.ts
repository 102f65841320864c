import { lookup, Resolver } from 'node:dns/promises';
import { readFile } from 'node:fs/promises';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';

/*
 * Where webhooks may go (issue "Trust under attack", item 6: "Webhook targets may be loopback, private or
 * link-local addresses and their answers are read whole into memory ... refuse such targets unless an allow-list
 * names them, and read at most a few kB of an answer").
 *
 * A target is refused when any address it names or resolves to is not a public unicast address: loopback, private,
 * shared (CGNAT), link-local, unique-local, unspecified, multicast, reserved, documentation, the deprecated
 * IPv4-compatible ::a.b.c.d, any address of the NAT64 prefixes (64:ff9b::/96, 64:ff9b:1::/48), and IPv4 carried in
 * IPv6 (mapped, translated, 6to4) when that IPv4 address is one of those. The WHATWG URL parser has already read the other spellings of an IPv4 address
 * (2130706433, 0x7f.1, 0177.0.0.1) into dotted form. Names are resolved when the subscription is registered and
 * again at every delivery, and the delivery connects to the very address that was checked (no second lookup that a
 * rebinding DNS server could answer differently). Redirects are never followed. A name is asked of the name servers
 * without getaddrinfo (addressesOf), so a name server that never answers holds no thread of the platform.
 *
 * WEBHOOK_ALLOWED_TARGETS (a feature setting): host names, addresses and CIDR ranges that may be private anyway,
 * comma-separated, e.g. "hooks.internal,10.1.2.3,192.168.50.0/24".
 */

const BLOCKED = new net.BlockList();
for (const [prefix, bits] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.88.99.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const) {
  BLOCKED.addSubnet(prefix, bits, 'ipv4');
}
for (const [prefix, bits] of [
  // Unspecified, loopback and the deprecated IPv4-compatible addresses (RFC 4291 §2.5.5.1: ::a.b.c.d).
  ['::', 96],
  // NAT64 local-use prefix (RFC 8215): translated to whatever IPv4 network the site's translator serves.
  ['64:ff9b:1::', 48],
  ['100::', 64],
  ['2001::', 23],
  ['2001:db8::', 32],
  ['fc00::', 7],
  ['fe80::', 10],
  ['fec0::', 10],
  ['ff00::', 8],
] as const) {
  BLOCKED.addSubnet(prefix, bits, 'ipv6');
}

/**
 * The IPv4 address an IPv6 address carries, if any: IPv4-mapped ::ffff:a.b.c.d, IPv4-translated ::ffff:0:a.b.c.d
 * (RFC 2765), NAT64 64:ff9b::/96 (RFC 6052), 6to4 2002:aabb:ccdd::/48 (RFC 3056).
 */
function embeddedIpv4(address: string): string | null {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped) return mapped[1]!;
  const groups = expandIpv6(address);
  if (!groups) return null;
  const dotted = (high: number, low: number) => `${high >> 8}.${high & 0xff}.${low >> 8}.${low & 0xff}`;
  const v4mapped = groups.slice(0, 5).every((g) => g === 0) && groups[5] === 0xffff;
  const translated = groups.slice(0, 4).every((g) => g === 0) && groups[4] === 0xffff && groups[5] === 0;
  const nat64 = groups[0] === 0x64 && groups[1] === 0xff9b && groups.slice(2, 6).every((g) => g === 0);
  if (v4mapped || translated || nat64) return dotted(groups[6]!, groups[7]!);
  if (groups[0] === 0x2002) return dotted(groups[1]!, groups[2]!);
  return null;
}

function expandIpv6(address: string): number[] | null {
  if (net.isIPv6(address) === false) return null;
  let text = address.toLowerCase();
  const v4 = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (v4) {
    const [a, b, c, d] = v4[1]!.split('.').map(Number) as [number, number, number, number];
    text = text.replace(v4[1]!, `${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`);
  }
  const [head, tail] = text.split('::') as [string, string | undefined];
  const left = head ? head.split(':') : [];
  const right = tail ? tail.split(':') : [];
  const fill = tail === undefined ? [] : new Array(8 - left.length - right.length).fill('0');
  const groups = [...left, ...fill, ...right].map((g) => Number.parseInt(g || '0', 16));
  return groups.length === 8 ? groups : null;
}

/** Whether an address is no public unicast address. */
export function isPrivateAddress(address: string): boolean {
  const family = net.isIP(address);
  if (family === 4) return BLOCKED.check(address, 'ipv4');
  if (family === 6) {
    const inner = embeddedIpv4(address);
    if (inner !== null) return BLOCKED.check(inner, 'ipv4') || address.toLowerCase().startsWith('64:ff9b:');
    return BLOCKED.check(address, 'ipv6');
  }
  return true;
}

/**
 * The allow-list of WEBHOOK_ALLOWED_TARGETS: names, and a BlockList of its addresses and ranges; and the name servers
 * of WEBHOOK_NAME_SERVERS (null: the system's).
 */
export interface TargetPolicy {
  names: ReadonlySet<string>;
  addresses: net.BlockList;
  nameServers: readonly string[] | null;
}

export const WEBHOOK_TARGETS_SETTING = 'WEBHOOK_ALLOWED_TARGETS';

/**
 * WEBHOOK_NAME_SERVERS (a feature setting): the name servers receivers' names are asked of, comma-separated addresses
 * with an optional port ("9.9.9.9,149.112.112.112:53,[2620:fe::fe]:53"). Unset, the system's (/etc/resolv.conf). Set,
 * a receiver's name is resolved by those servers only, never through getaddrinfo and /etc/hosts: a city whose own
 * name servers answer internal names (split horizon) keeps them out of what a webhook's owner can name. The names
 * WEBHOOK_ALLOWED_TARGETS lists are still looked up as the system looks names up.
 */
export const WEBHOOK_NAME_SERVERS_SETTING = 'WEBHOOK_NAME_SERVERS';

/** One name server as c-ares takes it ("a.b.c.d", "a.b.c.d:port", "[v6]:port", "v6"), or null if it is not one. */
function nameServer(entry: string): string | null {
  const withPort = /^(?:\[([0-9a-fA-F:.]+)\]|(\d+\.\d+\.\d+\.\d+)):(\d{1,5})$/.exec(entry);
  const port = withPort ? Number(withPort[3]) : 53;
  const address = withPort ? (withPort[1] ?? withPort[2]!) : entry.replace(/^\[(.*)\]$/, '$1');
  const family = net.isIP(address);
  // A port of 0 aborts the process inside c-ares' binding, and one over 65535 wraps: both are refused here.
  if (family === 0 || port < 1 || port > 65535 || (withPort?.[1] !== undefined && family !== 6)) return null;
  if (port === 53) return address;
  return family === 6 ? `[${address}]:${port}` : `${address}:${port}`;
}

function nameServersOf(settings: NodeJS.ProcessEnv): string[] | null {
  const raw = settings[WEBHOOK_NAME_SERVERS_SETTING];
  if (raw === undefined || raw.trim() === '') return null;
  return raw.split(',').map((part) => {
    const server = nameServer(part.trim());
    if (server === null) {
      throw new Error(
        `${WEBHOOK_NAME_SERVERS_SETTING}: "${part.trim()}" is not an IP address with an optional port (1 to 65535)`,
      );
    }
    return server;
  });
}

export function targetPolicy(settings: NodeJS.ProcessEnv): TargetPolicy {
  const names = new Set<string>();
  const addresses = new net.BlockList();
  for (const raw of (settings[WEBHOOK_TARGETS_SETTING] ?? '').split(',')) {
    const entry = raw.trim().toLowerCase();
    if (entry === '') continue;
    const [address, bits] = entry.split('/') as [string, string | undefined];
    const family = net.isIP(address);
    if (family === 0) {
      if (bits !== undefined || !/^[a-z0-9.-]+$/.test(entry)) {
        throw new Error(
          `${WEBHOOK_TARGETS_SETTING}: "${raw.trim()}" is not a host name, an address or a CIDR range`,
        );
      }
      names.add(entry);
    } else if (bits === undefined) {
      addresses.addAddress(address, family === 4 ? 'ipv4' : 'ipv6');
    } else {
      const n = Number(bits);
      if (!Number.isInteger(n) || n < 0 || n > (family === 4 ? 32 : 128)) {
        throw new Error(`${WEBHOOK_TARGETS_SETTING}: "${raw.trim()}" is not a CIDR range`);
      }
      addresses.addSubnet(address, n, family === 4 ? 'ipv4' : 'ipv6');
    }
  }
  return { names, addresses, nameServers: nameServersOf(settings) };
}

const bare = (hostname: string) => hostname.replace(/^\[|\]$/g, '').toLowerCase();

function allowed(policy: TargetPolicy, hostname: string, address: string): boolean {
  if (!isPrivateAddress(address)) return true;
  if (policy.names.has(bare(hostname))) return true;
  return policy.addresses.check(address, net.isIP(address) === 6 ? 'ipv6' : 'ipv4');
}

/** How long one try of a name server may take, and how many tries: a name's resolution ends within 2 × 2 s. */
const RESOLVE_TRY_MS = 2000;
const RESOLVE_TRIES = 2;

/**
 * The addresses of a host name. Names a receiver chose are asked of the name servers directly (c-ares, on the event
 * loop), never through getaddrinfo: getaddrinfo blocks one of libuv's four threads until the name servers answer, the
 * threads the platform's file system, compression and crypto work share, so a receiver whose name server never
 * answers would have stalled the platform a few deliveries at a time. Only when the name servers answered that the
 * name has no address (a name of the city's /etc/hosts, say) is getaddrinfo asked, as it is for the names
 * WEBHOOK_ALLOWED_TARGETS lists, which the city trusts.
 */
async function addressesOf(
  host: string,
  trusted: boolean,
  nameServers: readonly string[] | null,
): Promise<{ address: string; family: number }[]> {
  if (!trusted) {
    const resolver = new Resolver({ timeout: RESOLVE_TRY_MS, tries: RESOLVE_TRIES });
    if (nameServers !== null) resolver.setServers(nameServers);
    const [v4, v6] = await Promise.allSettled([resolver.resolve4(host), resolver.resolve6(host)]);
    const found = [
      ...(v4.status === 'fulfilled' ? v4.value.map((address) => ({ address, family: 4 })) : []),
      ...(v6.status === 'fulfilled' ? v6.value.map((address) => ({ address, family: 6 })) : []),
    ];
    if (found.length > 0) return found;
    const timedOut = [v4, v6].find(
      (r) => r.status === 'rejected' && (r.reason as NodeJS.ErrnoException).code === 'ETIMEOUT',
    );
    if (timedOut) throw (timedOut as PromiseRejectedResult).reason;
    const failed = [v4, v6].find((r) => r.status === 'rejected');
    const failure = failed
      ? (failed as PromiseRejectedResult).reason
      : Object.assign(new Error('no address'), { code: 'ENODATA' });
    // The city's chosen name servers had no address for it: not /etc/hosts then (WEBHOOK_NAME_SERVERS).
    if (nameServers !== null) throw failure;
    // Only a name the name servers say does not exist may be a name of /etc/hosts, which is read here, never
    // through getaddrinfo: whoever owns a name could answer the first query and leave the C library's repeat
    // unanswered, holding one of the threads the platform's file, zlib and crypto work share for its full timeouts
    // (audit K finding 2). A name server failing otherwise (SERVFAIL, REFUSED, a bad answer) is the failure.
    const code = (failure as NodeJS.ErrnoException).code;
    if (code !== 'ENOTFOUND' && code !== 'ENODATA') throw failure;
    const fromHosts = await hostsFileAddresses(host);
    if (fromHosts.length === 0) throw failure;
    return fromHosts;
  }
  return lookup(host, { all: true, verbatim: true });
}

/** The addresses /etc/hosts gives `host` (case-insensitive), read from the file itself; none if it cannot be read. */
export async function hostsFileAddresses(
  host: string,
  file = '/etc/hosts',
): Promise<{ address: string; family: number }[]> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch {
    return [];
  }
  const wanted = host.toLowerCase().replace(/\.$/, '');
  const found: { address: string; family: number }[] = [];
  for (const line of text.split('\n')) {
    const [address, ...names] = line.replace(/#.*/, '').trim().split(/\s+/);
    if (!address || names.length === 0) continue;
    const family = net.isIP(address.replace(/%.*$/, ''));
    if (family === 0) continue;
    if (names.some((name) => name.toLowerCase() === wanted)) found.push({ address, family });
  }
  return found;
}

export type TargetCheck =
  | { ok: true; address: string; family: 4 | 6 }
  | { ok: false; why: 'scheme' | 'unresolvable' | 'private'; reason: string };

/**
 * The address a delivery to `url` connects to, checked: every address the host names or resolves to must be
 * allowed (a name resolving to one public and one private address is refused: a client may pick either).
 */
export async function resolveTarget(url: URL, policy: TargetPolicy): Promise<TargetCheck> {
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    return { ok: false, why: 'scheme', reason: 'not http or https' };
  const host = bare(url.hostname);
  let addresses: { address: string; family: number }[];
  if (net.isIP(host) !== 0) {
    addresses = [{ address: host, family: net.isIP(host) }];
  } else {
    try {
      addresses = await addressesOf(host, policy.names.has(host), policy.nameServers);
    } catch (error) {
      return {
        ok: false,
        why: 'unresolvable',
        reason: `${host} does not resolve (${(error as NodeJS.ErrnoException).code ?? 'error'})`,
      };
    }
  }
  const refused = addresses.filter((a) => !allowed(policy, host, a.address));
  if (addresses.length === 0) return { ok: false, why: 'unresolvable', reason: `${host} has no address` };
  if (refused.length > 0) {
    return {
      ok: false,
      why: 'private',
      reason: `${host} is ${refused[0]!.address}, a private, loopback or reserved address; name it in ${WEBHOOK_TARGETS_SETTING} to allow it`,
    };
  }
  return { ok: true, address: addresses[0]!.address, family: addresses[0]!.family === 6 ? 6 : 4 };
}

/** What a delivery got back: the status and at most `maxAnswerBytes` of the answer. */
export interface PostResult {
  status: number;
  excerpt: string;
}

/** The bytes of an answer a delivery reads at most. */
export const MAX_ANSWER_BYTES = 4096;

/**
 * POSTs `body` to `url`, connecting to the checked `target` address (Host header and TLS name stay the URL's),
 * reading at most MAX_ANSWER_BYTES of the answer, within `timeoutMs`. No redirect is followed.
 */
export function postToTarget(
  url: URL,
  target: { address: string; family: 4 | 6 },
  body: string,
  headers: Record<string, string>,
  timeoutMs: number,
): Promise<PostResult> {
  return new Promise((resolve, reject) => {
    // Settled exactly once, and the deadline stands until then: whatever the receiver does (answers, closes without
    // an answer, switches protocols), the send ends within timeoutMs.
    let settled = false;
    const settle = (done: () => void) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      done();
    };
    const client = url.protocol === 'https:' ? https : http;
    const request = client.request(
      url,
      {
        method: 'POST',
        headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) },
        // The address checked, never a second lookup.
        lookup: (_hostname, options, callback) => {
          if ((options as { all?: boolean }).all) {
            (callback as (e: null, a: { address: string; family: number }[]) => void)(null, [
              { address: target.address, family: target.family },
            ]);
          } else {
            callback(null, target.address, target.family);
          }
        },
        agent: false,
        timeout: timeoutMs,
      },
      (response) => {
        const chunks: Buffer[] = [];
        let length = 0;
        const finish = () =>
          settle(() =>
            resolve({ status: response.statusCode ?? 0, excerpt: Buffer.concat(chunks).toString('utf8') }),
          );
        response.on('data', (chunk: Buffer) => {
          if (length < MAX_ANSWER_BYTES) chunks.push(chunk.subarray(0, MAX_ANSWER_BYTES - length));
          length += chunk.length;
          if (length >= MAX_ANSWER_BYTES) {
            // Enough: the rest is not read.
            response.destroy();
            finish();
          }
        });
        response.on('end', finish);
        response.on('error', () => finish());
      },
    );
    const timer = setTimeout(
      () => request.destroy(Object.assign(new Error('timeout'), { name: 'TimeoutError' })),
      timeoutMs,
    );
    request.on('timeout', () =>
      request.destroy(Object.assign(new Error('timeout'), { name: 'TimeoutError' })),
    );
    // 101 Switching Protocols: Node hands the socket over and raises no error, and the request closes without a
    // response. It is the receiver's answer, and not a 2xx: the socket is closed and the status is the outcome.
    request.on('upgrade', (response, socket) => {
      socket.destroy();
      settle(() => resolve({ status: response.statusCode ?? 101, excerpt: '' }));
    });
    request.on('error', (error) => settle(() => reject(error)));
    request.on('close', () =>
      settle(() => reject(new Error('the receiver closed the connection without an answer'))),
    );
    request.end(body);
  });
}
