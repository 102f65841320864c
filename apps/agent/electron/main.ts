/**
 * Electron main process: starts the agent core in-process, opens a fullscreen kiosk window, and relays
 * play start/end reported by the renderer to the core (through RendererDisplay). Kept thin on purpose:
 * everything that can be tested without Electron lives in the core.
 */
import { join } from 'node:path';
import { app, BrowserWindow, ipcMain, powerSaveBlocker } from 'electron';
import { createAgent, createBoardHardware, jsonLogger, loadConfig } from '../src/index.js';
import { CHANNEL_REPORT } from './bridge.js';
import { isPlayerReport, RendererDisplay } from './renderer-display.js';

const logger = jsonLogger();

/** The kiosk package's player folder (electron/kiosk, README.md): the config when no --config or AGENT_CONFIG says. */
const PACKAGED_CONFIG = '/var/lib/ooh-player/agent.json';

async function start(): Promise<void> {
  const configIndex = process.argv.indexOf('--config');
  const configPath = configIndex >= 0 ? process.argv[configIndex + 1] : process.env['AGENT_CONFIG'];
  const config = loadConfig(configPath ?? (app.isPackaged ? PACKAGED_CONFIG : 'agent.json'));

  app.commandLine.appendSwitch('autoplay-policy', 'no-user-gesture-required');
  await app.whenReady();
  powerSaveBlocker.start('prevent-display-sleep');

  const window = new BrowserWindow({
    fullscreen: true,
    kiosk: true,
    frame: false,
    autoHideMenuBar: true,
    backgroundColor: '#000000',
    show: false,
    webPreferences: {
      preload: join(import.meta.dirname, 'preload.cjs'),
      contextIsolation: true,
      nodeIntegration: false,
      sandbox: true,
      autoplayPolicy: 'no-user-gesture-required',
    },
  });
  // A kiosk shows our page only: no navigation, no pop-ups.
  window.webContents.on('will-navigate', (event) => event.preventDefault());
  window.webContents.setWindowOpenHandler(() => ({ action: 'deny' }));
  window.once('ready-to-show', () => window.show());

  const hardware = createBoardHardware(config.board ?? undefined);
  // Its clock is the agent's (createAgent hands it over), never the board's: see RendererDisplay.
  const display = new RendererDisplay(window.webContents);
  ipcMain.on(CHANNEL_REPORT, (event, report) => {
    // Only our window may report plays, and only in the expected shape.
    if (event.sender.id !== window.webContents.id || !isPlayerReport(report)) return;
    display.onReport(report);
  });
  window.webContents.on('render-process-gone', (_event, details) => {
    logger.error({ reason: details.reason }, 'renderer process gone; restarting the app');
    app.exit(1);
  });

  await window.loadFile(join(import.meta.dirname, 'renderer', 'index.html'));
  const agent = await createAgent({ config, hardware, display, logger });
  await agent.start();

  let quitting = false;
  app.on('before-quit', (event) => {
    if (quitting) return;
    quitting = true;
    event.preventDefault();
    void agent.close().finally(() => app.quit());
  });
  app.on('window-all-closed', () => app.quit());
}

start().catch((error: unknown) => {
  logger.error({ err: error }, 'player failed to start');
  app.exit(1);
});
