/**
 * The few Electron APIs the shell uses, declared by hand: the `electron` package (and its binary) cannot be
 * installed on the development machines, so main.ts and preload.ts are type-checked against this. The
 * signatures are the subset of Electron's own typings that we call; on a build machine with Electron
 * installed, its real typings take precedence (see README.md).
 */
declare module 'electron' {
  interface IpcMainEvent {
    sender: WebContents;
  }
  interface IpcRendererEvent {
    sender: unknown;
  }

  interface WebContents {
    readonly id: number;
    send(channel: string, ...args: unknown[]): void;
    on(event: 'will-navigate', listener: (event: { preventDefault(): void }, url: string) => void): this;
    on(event: 'render-process-gone', listener: (event: unknown, details: { reason: string }) => void): this;
    setWindowOpenHandler(handler: (details: { url: string }) => { action: 'deny' | 'allow' }): void;
  }

  interface WebPreferences {
    preload?: string;
    contextIsolation?: boolean;
    nodeIntegration?: boolean;
    sandbox?: boolean;
    webSecurity?: boolean;
    autoplayPolicy?:
      | 'no-user-gesture-required'
      | 'user-gesture-required'
      | 'document-user-activation-required';
  }

  interface BrowserWindowConstructorOptions {
    fullscreen?: boolean;
    kiosk?: boolean;
    frame?: boolean;
    autoHideMenuBar?: boolean;
    backgroundColor?: string;
    show?: boolean;
    webPreferences?: WebPreferences;
  }

  class BrowserWindow {
    constructor(options?: BrowserWindowConstructorOptions);
    readonly webContents: WebContents;
    loadFile(path: string): Promise<void>;
    on(event: 'closed', listener: () => void): this;
    once(event: 'ready-to-show', listener: () => void): this;
    show(): void;
    isDestroyed(): boolean;
  }

  interface App {
    whenReady(): Promise<void>;
    on(event: 'window-all-closed', listener: () => void): this;
    on(event: 'before-quit', listener: (event: { preventDefault(): void }) => void): this;
    quit(): void;
    exit(code?: number): void;
    readonly commandLine: { appendSwitch(name: string, value?: string): void };
  }

  interface IpcMain {
    on(channel: string, listener: (event: IpcMainEvent, ...args: unknown[]) => void): this;
  }

  interface IpcRenderer {
    on(channel: string, listener: (event: IpcRendererEvent, ...args: unknown[]) => void): this;
    send(channel: string, ...args: unknown[]): void;
  }

  interface ContextBridge {
    exposeInMainWorld(apiKey: string, api: unknown): void;
  }

  interface PowerSaveBlocker {
    start(type: 'prevent-app-suspension' | 'prevent-display-sleep'): number;
  }

  export const app: App;
  export const ipcMain: IpcMain;
  export const ipcRenderer: IpcRenderer;
  export const contextBridge: ContextBridge;
  export const powerSaveBlocker: PowerSaveBlocker;
  export { BrowserWindow };
  export type { IpcMainEvent, WebContents };
}
