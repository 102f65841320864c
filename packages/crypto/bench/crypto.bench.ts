import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { es256Sign, es256Verify, generateEs256KeyPair, merkleRoot } from '../src/index.js';

// Figures for `npm run bench` (wired by bench/run.ts). Not a test: nothing here asserts on time.

const VERIFY_SECONDS = 1;
const MERKLE_LEAVES = 1_000_000;

/** ES256 verifications per second with node:crypto and a key imported once (as callers cache it). */
function es256VerificationsPerSecond(): number {
  const { publicKey, privateKey } = generateEs256KeyPair();
  const body = randomBytes(2048);
  const signature = es256Sign(privateKey, body);
  for (let warmup = 0; warmup < 200; warmup += 1) es256Verify(publicKey, body, signature);
  let count = 0;
  const started = performance.now();
  let elapsed = 0;
  while (elapsed < VERIFY_SECONDS * 1000) {
    for (let batch = 0; batch < 100; batch += 1) {
      if (!es256Verify(publicKey, body, signature)) throw new Error('benchmark signature did not verify');
    }
    count += 100;
    elapsed = performance.now() - started;
  }
  return Math.round((count * 1000) / elapsed);
}

/** Milliseconds for merkleRoot over a million random leaf hashes (a day of a million batches). */
function merkleRootMillis(): number {
  const pool = randomBytes(MERKLE_LEAVES * 32);
  const leaves = Array.from({ length: MERKLE_LEAVES }, (_, index) =>
    pool.subarray(index * 32, index * 32 + 32),
  );
  const started = performance.now();
  const root = merkleRoot(leaves);
  const elapsed = performance.now() - started;
  if (root.length !== 32) throw new Error('unexpected root length');
  return Math.round(elapsed);
}

export async function run(): Promise<Record<string, number>> {
  return {
    'crypto.es256_verify_per_s': es256VerificationsPerSecond(),
    'crypto.merkle_root_1m_leaves_ms': merkleRootMillis(),
  };
}
