import { hexEncode } from '@ooh/verify';

/**
 * SHA-256 of a file, in the browser. WebCrypto has no streaming digest, so the file is read whole into memory:
 * fine up to a few hundred megabytes (apps/platform/console/README.md).
 */
export async function fileSha256(file: Blob): Promise<string> {
  const digest = await crypto.subtle.digest('SHA-256', await file.arrayBuffer());
  return hexEncode(new Uint8Array(digest));
}
