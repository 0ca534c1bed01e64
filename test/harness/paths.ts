// Where the harness finds the repository and keeps its downloads.
import { readFileSync } from 'node:fs'
import { resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

export const repoRoot = resolve(fileURLToPath(new URL('../..', import.meta.url)))

/** Downloads (Maven artifacts) survive between runs here; `.cache/` is gitignored. */
export function cacheDir(): string {
  return resolve(process.env.REPLICA_CACHE_DIR ?? resolve(repoRoot, '.cache'))
}

export const sourceSchemaFile = resolve(repoRoot, 'schema/source.sql')
export const connectorConfigFile = resolve(repoRoot, 'deploy/debezium/connector.json')

/**
 * Node's own flags in package.json's script for an entry point (`npm run projector`: the
 * projector's young generation), so that tests and benchmarks start a process as users do. An
 * entry its script starts through tsx's command line has none.
 */
export function scriptNodeFlags(script: 'projector' | 'api'): string[] {
  const manifest = JSON.parse(readFileSync(resolve(repoRoot, 'package.json'), 'utf8')) as {
    scripts: Record<string, string>
  }
  const words = (manifest.scripts[script] ?? '').split(/\s+/)
  if (words[0] !== 'node') return []
  const flags = words.slice(1, words.indexOf(`${script}/main.ts`))
  // `--import tsx` is how each runner loads TypeScript; only V8's and node's own flags are kept.
  const at = flags.indexOf('--import')
  if (at !== -1) flags.splice(at, 2)
  return flags
}
