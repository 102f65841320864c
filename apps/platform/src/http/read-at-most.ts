/**
 * Reads at most `maxBytes` of a fetch answer's body, then cancels the rest, so a server we call (a witness, a
 * time-stamping authority) cannot make the platform hold an answer of any size in memory: `response.text()` and
 * `arrayBuffer()` read to the end first. `truncated` says that the answer went on beyond `maxBytes`.
 */
export async function readAtMost(
  response: Response,
  maxBytes: number,
): Promise<{ body: Buffer; truncated: boolean }> {
  const reader = response.body?.getReader();
  if (!reader) return { body: Buffer.alloc(0), truncated: false };
  const chunks: Uint8Array[] = [];
  let length = 0;
  let truncated = false;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      if (length + value.byteLength > maxBytes) {
        chunks.push(value.subarray(0, maxBytes - length));
        length = maxBytes;
        truncated = true;
        break;
      }
      chunks.push(value);
      length += value.byteLength;
    }
  } finally {
    // Stops the transfer and frees the connection; a body already read whole has nothing left to cancel.
    await reader.cancel().catch(() => {});
  }
  return { body: Buffer.concat(chunks, length), truncated };
}
