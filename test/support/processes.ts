// Running the project's processes as users run them: `tsx <entry>` with an environment.
import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'

export const repoRoot = fileURLToPath(new URL('../..', import.meta.url))

export interface Finished {
  code: number | null
  stdout: string
  stderr: string
}

/**
 * What a benchmark run by a test needs from the test's own environment: its cache (datasets,
 * Kafka's jars), Java, and whether the harness may use Docker.
 */
export function harnessEnv(): Record<string, string> {
  const env: Record<string, string> = {}
  for (const name of ['HOME', 'REPLICA_CACHE_DIR', 'JAVA_HOME', 'REPLICA_HARNESS_DOCKER']) {
    const value = process.env[name]
    if (value !== undefined) env[name] = value
  }
  return env
}

/** Runs an entry point (e.g. 'projector/main.ts') to completion. */
export function runEntry(
  entry: string,
  args: string[],
  env: Record<string, string>,
  timeoutMs = 120_000,
): Promise<Finished> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', entry, ...args], {
      cwd: repoRoot,
      env: { PATH: process.env.PATH ?? '', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()))
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()))
    const timer = setTimeout(() => {
      child.kill('SIGKILL')
      reject(new Error(`${entry} did not finish in ${timeoutMs} ms\n${stderr}`))
    }, timeoutMs)
    child.on('error', reject)
    child.on('close', (code) => {
      clearTimeout(timer)
      resolve({ code, stdout, stderr })
    })
  })
}
