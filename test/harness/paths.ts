// Where the harness finds the repository and keeps its downloads.
import { resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

export const repoRoot = resolve(fileURLToPath(new URL('../..', import.meta.url)))

/** Downloads (Maven artifacts) survive between runs here; `.cache/` is gitignored. */
export function cacheDir(): string {
  return resolve(process.env.REPLICA_CACHE_DIR ?? resolve(repoRoot, '.cache'))
}

export const sourceSchemaFile = resolve(repoRoot, 'schema/source.sql')
export const connectorConfigFile = resolve(repoRoot, 'deploy/debezium/connector.json')
