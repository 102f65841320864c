import { createHash } from 'node:crypto';
import {
  type BigIntStats,
  createReadStream,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  statSync,
} from 'node:fs';
import { extname, join, relative, sep } from 'node:path';
import { type ApprovalManifest, almatyDate, type Slot } from '@ooh/protocol';
import { type FSWatcher, watch } from 'chokidar';
import type { Clock, ClockTrust } from '../clock.js';
import type { PlayLog } from '../log/play-log.js';
import type { Logger } from '../logger.js';
import { type EnvelopeVerdict, EnvelopeVerifier, type RevocationIndex } from './envelope.js';

export const SIDECAR_SUFFIX = '.envelope.json';
const IMAGE_EXTENSIONS = new Set(['.png', '.jpg', '.jpeg', '.webp', '.gif', '.bmp']);
const VIDEO_EXTENSIONS = new Set(['.mp4', '.webm', '.mov', '.mkv', '.m4v']);
/** Names download tools and copiers give files still being written. */
const PARTIAL_NAME = /(\.part|\.partial|\.tmp|\.crdownload|\.download|~)$/i;
/** Folders whose content is authority content played as a `slot` (spec: "gov or emergency"). */
const SLOT_FOLDERS: Record<string, Slot> = { gov: 'gov', emergency: 'emergency' };

export type MediaKind = 'image' | 'video';

export interface MediaItem {
  /** Absolute path. */
  path: string;
  /** Path inside the media folder, with forward slashes. */
  relativePath: string;
  sha256: string;
  kind: MediaKind;
  /** `gov` / `emergency` for files in those folders; they play as slot content without approval number. */
  slot: Slot | null;
  approvalNumber: string;
  /** Expected length of a video (manifest duration_ms); null for images. */
  durationMs: number | null;
  manifest: ApprovalManifest;
  /**
   * The file its verdict was reached on (see {@link fileStat}): the scheduler compares the file with it just before a
   * play starts and right after it ends ({@link MediaLibrary.unchanged}).
   */
  fingerprint: string;
}

export interface MediaFileState {
  relativePath: string;
  sha256: string | null;
  status: 'playable' | 'not_yet_valid' | 'refused' | 'waiting';
  code?: string;
  reason?: string;
}

export interface MediaLibraryOptions {
  mediaDir: string;
  structure: string;
  trustedRootsPem: string[];
  revocations: RevocationIndex;
  clock: Clock;
  log: PlayLog;
  logger: Logger;
  /** A file must be unchanged this long before it is read (partial writes are ignored until then). */
  stabilityMs?: number;
  /** A media file without a sidecar waits this long for it before NO_SIGNATURE is logged. */
  sidecarGraceMs?: number;
  /** Poll the file system instead of native events (network shares, some containers). */
  usePolling?: boolean;
  /** Verifies envelopes, remembering signatures already verified (default: one for `trustedRootsPem`). */
  verifier?: EnvelopeVerifier;
  /**
   * How far the clock can be trusted. While it is `implausible` (a board in 1970) nothing is judged: every
   * date check would fail and name good files BAD_SIGNATURE or EXPIRED_APPROVAL. Files wait for the clock.
   */
  clockTrust?: () => ClockTrust;
}

interface Entry {
  /** The file `sha256` was read from ({@link fileStat}); null once a change was seen and before it is read again. */
  fingerprint: string | null;
  sha256: string | null;
  verdict: EnvelopeVerdict | { status: 'waiting'; reason?: string };
  missingSidecarSince: number | null;
}

const CHANGED = 'changed since it was verified: judged again once it is unchanged for media_stability_ms';

/**
 * The media library (DESIGN.md §9): watches the media folder, hashes files by streaming, verifies their
 * sidecar envelopes, and keeps the set of playable files. A refused file produces one `reject` record per
 * (file content, code), not one per scan: the log remembers what it already reported.
 */
export class MediaLibrary {
  private readonly entries = new Map<string, Entry>();
  private readonly chains = new Map<string, Promise<void>>();
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private readonly listeners = new Set<(items: MediaItem[]) => void>();
  private watcher: FSWatcher | null = null;
  private playableKey = '';
  private stopped = false;
  private readonly stabilityMs: number;
  private readonly sidecarGraceMs: number;
  private readonly verifier: EnvelopeVerifier;

  constructor(private readonly options: MediaLibraryOptions) {
    this.stabilityMs = options.stabilityMs ?? 2000;
    this.sidecarGraceMs = options.sidecarGraceMs ?? 30_000;
    this.verifier = options.verifier ?? new EnvelopeVerifier({ trustedRootsPem: options.trustedRootsPem });
  }

  /** Scans the folder, evaluates every file, then watches for changes. */
  async start(): Promise<void> {
    mkdirSync(this.options.mediaDir, { recursive: true });
    this.stopped = false;
    await Promise.all(this.listMediaFiles().map((relativePath) => this.schedule(relativePath)));
    this.watcher = watch(this.options.mediaDir, {
      ignoreInitial: true,
      persistent: true,
      usePolling: this.options.usePolling ?? false,
      interval: 200,
      // No awaitWriteFinish: chokidar then drops the events of a file removed while it waits for it to
      // settle (no add, no unlink), which left stale entries. Stability is judged here instead, in evaluate():
      // a file is read only once unchanged for stabilityMs, and re-read if it changed while being hashed.
      ignored: (path: string) => path !== this.options.mediaDir && isIgnoredName(path),
    });
    const onFile = (path: string) => {
      const relativePath = toRelative(this.options.mediaDir, path);
      if (relativePath.endsWith(SIDECAR_SUFFIX)) {
        void this.schedule(relativePath.slice(0, -SIDECAR_SUFFIX.length));
      } else if (mediaKindOf(relativePath)) {
        void this.schedule(relativePath);
      }
    };
    this.watcher.on('add', onFile).on('change', onFile).on('unlink', onFile);
    this.watcher.on('error', (error) => this.options.logger.warn({ err: error }, 'media watcher error'));
    await new Promise<void>((resolve) => this.watcher!.once('ready', () => resolve()));
  }

  async stop(): Promise<void> {
    this.stopped = true;
    for (const timer of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
    await this.watcher?.close();
    this.watcher = null;
    await Promise.all(this.chains.values());
  }

  onChange(listener: (items: MediaItem[]) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Playable files, in path order. */
  playable(): MediaItem[] {
    const today = this.today();
    const items: MediaItem[] = [];
    for (const [relativePath, entry] of [...this.entries].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
      if (entry.verdict.status !== 'playable' || !inDates(entry.verdict.manifest, today)) continue;
      if (entry.sha256 === null || entry.fingerprint === null) continue;
      const kind = mediaKindOf(relativePath)!;
      const manifest = entry.verdict.manifest;
      items.push({
        path: join(this.options.mediaDir, relativePath),
        relativePath,
        sha256: entry.sha256,
        kind,
        slot: slotOf(relativePath),
        approvalNumber: manifest.approval_number,
        durationMs: kind === 'video' ? manifest.duration_ms : null,
        manifest,
        fingerprint: entry.fingerprint,
      });
    }
    return items;
  }

  /** True while this exact content is playable (the scheduler checks before and during a play). */
  isPlayable(relativePath: string, sha256: string): boolean {
    const entry = this.entries.get(relativePath);
    return (
      entry !== undefined &&
      entry.sha256 === sha256 &&
      entry.verdict.status === 'playable' &&
      inDates(entry.verdict.manifest, this.today())
    );
  }

  /**
   * Whether the file at the item's path is still the very file its verdict was reached on: same device, inode, size,
   * mtime and ctime. The display loads the file by path when it plays it, so the scheduler asks just before a play
   * starts and right after it ends. A user can restore a file's size and mtime after writing other bytes into it
   * (`touch -r`, `cp -p`, `rsync -t`, `tar x`), never its ctime, which every write, rename or chmod moves to the
   * kernel's present time. When the file is not the same (or gone), its verdict is dropped at once and it is judged
   * again.
   */
  unchanged(item: MediaItem): boolean {
    const now = fileStat(item.path);
    if (now?.isFile && now.fingerprint === item.fingerprint) return true;
    const entry = this.entries.get(item.relativePath);
    if (entry && entry.fingerprint === item.fingerprint && entry.sha256 !== null) {
      this.drop(item.relativePath, entry);
      this.notifyIfChanged();
    }
    void this.schedule(item.relativePath);
    return false;
  }

  /**
   * The Almaty day now. A verdict is reached at the last evaluation, but DESIGN.md §9 wants "today is inside the
   * approval's dates" at every play: without this an approval stayed playable after the Almaty midnight that ended
   * its valid_until until the next recheck (media_recheck_ms, a minute), which also logs its EXPIRED_APPROVAL.
   */
  private today(): string {
    return almatyDate(this.options.clock.now());
  }

  /** The verdict no longer speaks for the file: not playable (nor refused) until it is read again. */
  private drop(relativePath: string, entry: Entry): void {
    this.entries.set(relativePath, {
      fingerprint: null,
      sha256: null,
      verdict: { status: 'waiting', reason: CHANGED },
      missingSidecarSince: entry.missingSidecarSince,
    });
  }

  files(): MediaFileState[] {
    return [...this.entries].map(([relativePath, entry]) => {
      const verdict = entry.verdict;
      return {
        relativePath,
        sha256: entry.sha256,
        status: verdict.status,
        ...(verdict.status === 'refused' ? { code: verdict.code, reason: verdict.reason } : {}),
        ...((verdict.status === 'not_yet_valid' || verdict.status === 'waiting') && verdict.reason
          ? { reason: verdict.reason }
          : {}),
      };
    });
  }

  /** Evaluates every known file again (the day changed, the revocation list changed). */
  async reevaluateAll(): Promise<void> {
    const known = new Set([...this.entries.keys(), ...this.listMediaFiles()]);
    await Promise.all([...known].map((relativePath) => this.schedule(relativePath)));
  }

  /** Evaluates one file now (serialised with any evaluation of the same file already running). */
  schedule(relativePath: string): Promise<void> {
    const previous = this.chains.get(relativePath) ?? Promise.resolve();
    const next = previous
      .then(() => this.evaluate(relativePath))
      .catch((error: unknown) => {
        this.options.logger.warn({ err: error, file: relativePath }, 'media file evaluation failed');
      });
    this.chains.set(relativePath, next);
    void next.then(() => {
      if (this.chains.get(relativePath) === next) this.chains.delete(relativePath);
    });
    return next;
  }

  private async evaluate(relativePath: string): Promise<void> {
    if (this.stopped) return;
    const path = join(this.options.mediaDir, relativePath);
    const stat = fileStat(path);
    if (!stat || !stat.isFile || !mediaKindOf(relativePath)) {
      if (this.entries.delete(relativePath)) this.notifyIfChanged();
      return;
    }
    let known = this.entries.get(relativePath);
    if (known && known.sha256 !== null && known.fingerprint !== stat.fingerprint) {
      // Not the file the verdict was reached on: the verdict goes now, not once the new bytes have settled and been
      // read (seconds for a large video, during which the old verdict would have let them play as approved).
      this.drop(relativePath, known);
      known = this.entries.get(relativePath);
      this.notifyIfChanged();
    }
    // File-system times are wall-clock times of this machine, so stability is measured on that clock; the ctime too,
    // since a copy that restores the mtime at its end (cp -p) has just been written all the same.
    const age = Date.now() - stat.changedAtMs;
    if (age < this.stabilityMs) {
      this.retryLater(relativePath, Math.min(this.stabilityMs - age, this.stabilityMs) + 50);
      return;
    }
    let sha256: string;
    if (known && known.sha256 !== null && known.fingerprint === stat.fingerprint) {
      sha256 = known.sha256;
    } else {
      sha256 = await hashFile(path);
      const after = fileStat(path);
      if (!after || after.fingerprint !== stat.fingerprint) {
        // Written to while it was read: try again once it settles.
        this.retryLater(relativePath, this.stabilityMs);
        return;
      }
    }

    const sidecarPath = `${path}${SIDECAR_SUFFIX}`;
    const envelopeText = existsSync(sidecarPath) ? readFileSync(sidecarPath, 'utf8') : null;
    const now = this.options.clock.now();
    let missingSidecarSince: number | null = known?.missingSidecarSince ?? null;
    let verdict: Entry['verdict'];
    if (this.options.clockTrust?.() === 'implausible') {
      // Judged again once the clock is set (the agent re-evaluates every file then).
      verdict = { status: 'waiting', reason: 'clock not set' };
    } else if (envelopeText === null) {
      // The media file may arrive before its sidecar: wait a little before calling it unsigned.
      missingSidecarSince ??= Date.now();
      const waited = Date.now() - missingSidecarSince;
      if (waited < this.sidecarGraceMs) {
        verdict = { status: 'waiting' };
        this.retryLater(relativePath, this.sidecarGraceMs - waited + 50);
      } else {
        verdict = { status: 'refused', code: 'NO_SIGNATURE', reason: 'no sidecar envelope' };
      }
    } else {
      missingSidecarSince = null;
      verdict = await this.verifier.verify({
        envelopeText,
        mediaSha256: sha256,
        now,
        structure: this.options.structure,
        revocations: this.options.revocations,
      });
    }
    if (this.stopped) return;
    this.entries.set(relativePath, {
      fingerprint: stat.fingerprint,
      sha256,
      verdict,
      missingSidecarSince,
    });

    if (verdict.status === 'refused') {
      const logged = this.options.log.appendRejectOnce(`${relativePath}|${sha256}`, {
        kind: 'reject',
        // Read now, not before the verification: a clock correction landing meanwhile would otherwise leave the
        // record in the uncorrected time while the log counts it as written after the correction.
        at: this.options.clock.now(),
        code: verdict.code,
        detail: {
          file: relativePath,
          media_sha256: sha256,
          reason: verdict.reason,
          ...(verdict.manifest ? { approval_number: verdict.manifest.approval_number } : {}),
        },
      });
      if (logged) {
        this.options.logger.info(
          { file: relativePath, code: verdict.code, seq: logged.seq },
          'media file refused',
        );
      }
    }
    this.notifyIfChanged();
  }

  private retryLater(relativePath: string, delayMs: number): void {
    if (this.stopped) return;
    const existing = this.timers.get(relativePath);
    if (existing) clearTimeout(existing);
    const timer = setTimeout(() => {
      this.timers.delete(relativePath);
      void this.schedule(relativePath);
    }, delayMs);
    timer.unref();
    this.timers.set(relativePath, timer);
  }

  private notifyIfChanged(): void {
    const items = this.playable();
    const key = items.map((item) => `${item.relativePath}|${item.sha256}`).join('\n');
    if (key === this.playableKey) return;
    this.playableKey = key;
    for (const listener of this.listeners) listener(items);
  }

  private listMediaFiles(): string[] {
    const found: string[] = [];
    const walk = (directory: string, depth: number) => {
      if (depth > 3 || !existsSync(directory)) return;
      for (const dirent of readdirSync(directory, { withFileTypes: true })) {
        const path = join(directory, dirent.name);
        if (isIgnoredName(path)) continue;
        if (dirent.isDirectory()) walk(path, depth + 1);
        else if (dirent.isFile() && mediaKindOf(dirent.name))
          found.push(toRelative(this.options.mediaDir, path));
      }
    };
    walk(this.options.mediaDir, 0);
    return found;
  }
}

/** DESIGN.md §4: valid_from, valid_until are "Almaty dates, inclusive"; YYYY-MM-DD compares as text. */
function inDates(manifest: ApprovalManifest, today: string): boolean {
  return manifest.valid_from <= today && today <= manifest.valid_until;
}

export function mediaKindOf(path: string): MediaKind | null {
  if (path.endsWith(SIDECAR_SUFFIX)) return null;
  const extension = extname(path).toLowerCase();
  if (IMAGE_EXTENSIONS.has(extension)) return 'image';
  if (VIDEO_EXTENSIONS.has(extension)) return 'video';
  return null;
}

function slotOf(relativePath: string): Slot | null {
  const first = relativePath.split('/')[0] ?? '';
  return relativePath.includes('/') && Object.hasOwn(SLOT_FOLDERS, first) ? SLOT_FOLDERS[first]! : null;
}

function isIgnoredName(path: string): boolean {
  const name = path.split(/[\\/]/).pop() ?? '';
  return name.startsWith('.') || PARTIAL_NAME.test(name);
}

function toRelative(root: string, path: string): string {
  return relative(root, path).split(sep).join('/');
}

/**
 * What identifies the bytes of a file without reading them: device, inode, size, mtime and ctime (nanoseconds). A
 * cached verdict holds only while all of them are unchanged. Size and mtime alone can be put back by any user after
 * writing other bytes (`touch -r`, `cp -p`, `rsync -t`, `tar x`); the ctime cannot (the kernel sets it to its present
 * time at every write, rename, link or chmod; only setting the system clock back, root's doing, could repeat one),
 * and another file renamed into place is another inode. `changedAtMs`: the later of mtime and ctime.
 */
export function fileStat(path: string): { fingerprint: string; isFile: boolean; changedAtMs: number } | null {
  let stat: BigIntStats;
  try {
    stat = statSync(path, { bigint: true });
  } catch {
    return null;
  }
  return {
    fingerprint: `${stat.dev}:${stat.ino}:${stat.size}:${stat.mtimeNs}:${stat.ctimeNs}`,
    isFile: stat.isFile(),
    changedAtMs: Number((stat.mtimeNs > stat.ctimeNs ? stat.mtimeNs : stat.ctimeNs) / 1_000_000n),
  };
}

/** SHA-256 of a file, read as a stream (media files can be large). */
export function hashFile(path: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const hash = createHash('sha256');
    createReadStream(path)
      .on('data', (chunk) => hash.update(chunk))
      .on('error', reject)
      .on('end', () => resolve(hash.digest('hex')));
  });
}
