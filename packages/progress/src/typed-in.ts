/**
 * npm runs a script from the package's root, and sets INIT_CWD to the folder the command was typed in: a command-line
 * tool run as the npm script `script` moves there before it reads its arguments, so that the relative paths a user
 * gives (`npm run verify -- seal ... --batches day.ndjson` typed in a subfolder) are theirs, not the repository's. A
 * process that only inherited npm's variables (a test runner's child, started by `npm test`) stays where it was
 * started: npm_lifecycle_event names the script npm itself ran.
 */
export function enterTypedInDirectory(script: string, env: NodeJS.ProcessEnv = process.env): void {
  const typedIn = env['INIT_CWD'];
  if (env['npm_lifecycle_event'] !== script || !typedIn || typedIn === process.cwd()) return;
  process.chdir(typedIn);
}
