// The projector benchmarks' dataset: generated once (scripts/dataset) and cached in .cache/bench.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import {
  datasetOrganizations,
  datasetSizeFor,
  writeDataset,
  type DatasetSummary,
} from '../scripts/dataset/generate.ts'
import { repoRoot } from '../test/harness/paths.ts'

/**
 * A dataset of at least `targetEvents` Debezium events: its path, its number of events, and its
 * organizations with their raw API keys (for clients of the api).
 */
export async function benchDataset(
  targetEvents: number,
  log: (line: string) => void,
): Promise<{ path: string; events: number; organizations: DatasetSummary['organizations'] }> {
  // datasetSizeFor aims at the target on average; 2% more makes it a floor, checked below.
  const size = datasetSizeFor(Math.ceil(targetEvents * 1.02))
  const dir = join(repoRoot, '.cache', 'bench')
  mkdirSync(dir, { recursive: true })
  const path = join(
    dir,
    `events-${size.organizations}x${size.providersPerOrganization}x${size.updateRounds}.ndjson`,
  )
  const meta = `${path}.events`
  const options = { ...size, seed: 7 }
  // The keys are a function of the options: a cached file's are computed again, not stored.
  const organizations = datasetOrganizations(options)
  if (existsSync(path) && existsSync(meta)) {
    return { path, events: Number(readFileSync(meta, 'utf8')), organizations }
  }
  log(
    `generating ${size.organizations} organizations x ${size.providersPerOrganization} providers...`,
  )
  const t0 = Date.now()
  const summary = await writeDataset(path, options)
  writeFileSync(meta, String(summary.events))
  log(`  ${summary.events} events in ${((Date.now() - t0) / 1000).toFixed(1)} s`)
  if (summary.events < targetEvents) {
    throw new Error(`the dataset has ${summary.events} events, fewer than ${targetEvents}`)
  }
  return { path, events: summary.events, organizations }
}
