import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { deflateSync } from 'node:zlib';
import { build } from 'esbuild';
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PlayCommand } from '../../electron/bridge.js';

const ELECTRON_DIR = join(import.meta.dirname, '..', '..', 'electron');
const CHROMIUM = '/usr/bin/chromium';
const LAUNCH_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--no-first-run',
  '--autoplay-policy=no-user-gesture-required',
];

/** A small valid PNG (RGB, solid colour) built by hand: signature, IHDR, IDAT (zlib), IEND. */
function makePng(width: number, height: number): Buffer {
  const crcTable = Array.from({ length: 256 }, (_, n) => {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    return c >>> 0;
  });
  const crc32 = (bytes: Buffer) => {
    let c = 0xffffffff;
    for (const byte of bytes) c = crcTable[(c ^ byte) & 0xff]! ^ (c >>> 8);
    return (c ^ 0xffffffff) >>> 0;
  };
  const chunk = (type: string, data: Buffer) => {
    const length = Buffer.alloc(4);
    length.writeUInt32BE(data.length);
    const body = Buffer.concat([Buffer.from(type, 'ascii'), data]);
    const crc = Buffer.alloc(4);
    crc.writeUInt32BE(crc32(body));
    return Buffer.concat([length, body, crc]);
  };
  const header = Buffer.alloc(13);
  header.writeUInt32BE(width, 0);
  header.writeUInt32BE(height, 4);
  header[8] = 8; // bit depth
  header[9] = 2; // RGB
  const row = Buffer.concat([Buffer.from([0]), Buffer.alloc(width * 3, 0x40)]);
  const pixels = Buffer.concat(Array.from({ length: height }, () => row));
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', header),
    chunk('IDAT', deflateSync(pixels)),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

/**
 * Browser-side scripts, as plain JavaScript text (this file is type-checked for Node, without the DOM).
 * TEST_BRIDGE stands in for the preload: the same interface as `window.player` in Electron, recording each
 * report with its time (performance.now()).
 */
const TEST_BRIDGE = `
  (() => {
    const listeners = { play: [], stop: [] };
    window.__reports = [];
    window.player = {
      onPlay: (listener) => listeners.play.push(listener),
      onStop: (listener) => listeners.stop.push(listener),
      report: (report) => window.__reports.push({ ...report, at: performance.now() }),
    };
    window.__play = (command) => listeners.play.forEach((listener) => listener(command));
    window.__stop = (playId) => listeners.stop.forEach((listener) => listener(playId));
  })();
`;

/** A short WebM made in the browser: a canvas stream recorded with MediaRecorder for 1.5 s (base64). */
const MAKE_WEBM = `
  (async () => {
    const canvas = document.createElement('canvas');
    canvas.width = 160;
    canvas.height = 120;
    document.body.append(canvas);
    const context = canvas.getContext('2d');
    const recorder = new MediaRecorder(canvas.captureStream(25), { mimeType: 'video/webm;codecs=vp8' });
    const chunks = [];
    recorder.ondataavailable = (event) => chunks.push(event.data);
    const stopped = new Promise((resolve) => { recorder.onstop = resolve; });
    recorder.start(100);
    const started = performance.now();
    await new Promise((resolve) => {
      const draw = () => {
        const elapsed = performance.now() - started;
        context.fillStyle = 'hsl(' + (Math.floor(elapsed / 5) % 360) + ' 80% 50%)';
        context.fillRect(0, 0, 160, 120);
        if (elapsed < 1500) requestAnimationFrame(draw);
        else resolve();
      };
      draw();
    });
    recorder.stop();
    await stopped;
    const bytes = new Uint8Array(await new Blob(chunks, { type: 'video/webm' }).arrayBuffer());
    let binary = '';
    for (const byte of bytes) binary += String.fromCharCode(byte);
    return btoa(binary);
  })()
`;

interface Report {
  type: 'playing' | 'ended' | 'error';
  playId: string;
  interrupted?: boolean;
  reason?: string;
  at: number;
}

describe('renderer page in Chromium (playwright-core) against a test bridge', () => {
  let server: Server;
  let base: string;
  let browser: Browser;
  const files = new Map<string, { type: string; body: Buffer }>();
  let videoLengthMs = 0;
  const pageErrors: string[] = [];

  beforeAll(async () => {
    // Chromium is installed by apt on the test machines; wait for it rather than fail while it lands.
    for (let i = 0; i < 120 && !existsSync(CHROMIUM); i++) await new Promise((r) => setTimeout(r, 1000));
    const bundle = await build({
      entryPoints: [join(ELECTRON_DIR, 'renderer', 'renderer.ts')],
      bundle: true,
      format: 'iife',
      platform: 'browser',
      target: 'chrome120',
      write: false,
    });
    files.set('/', { type: 'text/html', body: readFileSync(join(ELECTRON_DIR, 'renderer', 'index.html')) });
    files.set('/renderer.js', {
      type: 'text/javascript',
      body: Buffer.from(bundle.outputFiles[0]!.contents),
    });
    files.set('/blank', { type: 'text/html', body: Buffer.from('<!doctype html><title>blank</title>') });
    files.set('/media/image.png', { type: 'image/png', body: makePng(64, 48) });
    server = createServer((req, res) => {
      const file = files.get((req.url ?? '').split('?')[0]!);
      if (!file) {
        res.writeHead(404).end();
        return;
      }
      res.writeHead(200, { 'content-type': file.type, 'content-length': file.body.length });
      res.end(file.body);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    browser = await chromium.launch({ executablePath: CHROMIUM, args: LAUNCH_ARGS, headless: true });

    // A short WebM made in the browser: a canvas stream recorded with MediaRecorder (nothing downloaded).
    const maker = await browser.newPage();
    await maker.goto(`${base}/blank`);
    const recorded = await maker.evaluate<string>(MAKE_WEBM);
    await maker.close();
    files.set('/media/clip.webm', { type: 'video/webm', body: Buffer.from(recorded, 'base64') });
    videoLengthMs = 1500;
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
    await new Promise<void>((resolve) => server?.close(() => resolve()));
  });

  async function openPlayer(): Promise<Page> {
    const page = await browser.newPage();
    page.on('pageerror', (error) => pageErrors.push(error.message));
    page.on('console', (message) => {
      if (message.type() === 'error' && !/404/.test(message.text())) pageErrors.push(message.text());
    });
    // The test bridge stands in for the preload: same interface as window.player in Electron.
    await page.addInitScript({ content: TEST_BRIDGE });
    await page.goto(`${base}/`);
    return page;
  }

  async function play(page: Page, command: PlayCommand): Promise<void> {
    await page.evaluate(`window.__play(${JSON.stringify(command)})`);
  }

  async function reportsFor(page: Page, playId: string, until: Report['type'][]): Promise<Report[]> {
    // Function form: the page's CSP (script-src 'self') rightly refuses string predicates, which need eval.
    await page.waitForFunction(
      ([id, types]) =>
        ((globalThis as unknown as { __reports?: Report[] }).__reports ?? []).some(
          (r) => r.playId === id && types.includes(r.type),
        ),
      [playId, until] as const,
      { timeout: 20_000 },
    );
    const all = await page.evaluate<Report[]>('window.__reports');
    return all.filter((r) => r.playId === playId);
  }

  it('shows an image for its duration and reports playing, then ended', async () => {
    const page = await openPlayer();
    await play(page, { playId: 'image-1', url: '/media/image.png', kind: 'image', durationMs: 800 });
    const reports = await reportsFor(page, 'image-1', ['ended', 'error']);
    expect(reports.map((r) => r.type)).toEqual(['playing', 'ended']);
    expect(reports[1]!.interrupted).toBe(false);
    // At least the whole length between the two reports (a timer alone may fire early), never under it.
    const shown = reports[1]!.at - reports[0]!.at;
    expect(shown).toBeGreaterThanOrEqual(800);
    expect(shown).toBeLessThan(2000);
    expect(await page.locator('#stage > img').count()).toBe(0);
    await page.close();
  });

  it('plays a video to its real end and reports playing, then ended, with a plausible length', async () => {
    const page = await openPlayer();
    await play(page, { playId: 'video-1', url: '/media/clip.webm', kind: 'video', durationMs: null });
    await page.locator('#stage > video').waitFor({ state: 'attached' });
    const reports = await reportsFor(page, 'video-1', ['ended', 'error']);
    expect(reports.map((r) => r.type)).toEqual(['playing', 'ended']);
    const shown = reports[1]!.at - reports[0]!.at;
    expect(shown).toBeGreaterThan(videoLengthMs * 0.6);
    expect(shown).toBeLessThan(videoLengthMs + 2000);
    await page.close();
  });

  it('takes a video off the screen when stopped and reports it as interrupted', async () => {
    const page = await openPlayer();
    await play(page, { playId: 'video-2', url: '/media/clip.webm', kind: 'video', durationMs: null });
    await reportsFor(page, 'video-2', ['playing']);
    await page.evaluate("window.__stop('video-2')");
    const reports = await reportsFor(page, 'video-2', ['ended']);
    expect(reports.map((r) => [r.type, r.interrupted])).toEqual([
      ['playing', undefined],
      ['ended', true],
    ]);
    expect(await page.locator('#stage > video').count()).toBe(0);
    await page.close();
  });

  it('reports an error, never playing, for media that cannot be shown', async () => {
    const page = await openPlayer();
    await play(page, { playId: 'missing', url: '/media/missing.png', kind: 'image', durationMs: 500 });
    const reports = await reportsFor(page, 'missing', ['error', 'ended']);
    expect(reports.map((r) => r.type)).toEqual(['error']);
    await page.close();
    expect(pageErrors).toEqual([]);
  });
});

describe('Electron shell sources', () => {
  it('type-check: main and preload against the real Electron typings, the renderer against the DOM', () => {
    const tsc = join(import.meta.dirname, '..', '..', '..', '..', 'node_modules', 'typescript', 'bin', 'tsc');
    for (const project of ['tsconfig.json', join('renderer', 'tsconfig.json')]) {
      const result = spawnSync(process.execPath, [tsc, '-p', join(ELECTRON_DIR, project), '--noEmit'], {
        encoding: 'utf8',
        timeout: 120_000,
      });
      expect(result.stdout + result.stderr).toBe('');
      expect(result.status).toBe(0);
    }
  }, 180_000);
});
