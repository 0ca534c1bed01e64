// The projector benchmarks' dataset: generated once (scripts/dataset) and cached in .cache/bench.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { type DatasetOptions, datasetSizeFor, writeDataset } from '../scripts/dataset/generate.ts'
import { repoRoot } from '../test/harness/paths.ts'

/** The generator's options of the dataset of at least `targetEvents` events (its organizations and keys). */
export function benchDatasetOptions(
  targetEvents: number,
): DatasetOptions & { updateRounds: number } {
  // datasetSizeFor aims at the target on average; 2% more makes it a floor, checked below.
  return { ...datasetSizeFor(Math.ceil(targetEvents * 1.02)), seed: 7 }
}

/** A dataset of at least `targetEvents` Debezium events: its path and its number of events. */
export async function benchDataset(
  targetEvents: number,
  log: (line: string) => void,
): Promise<{ path: string; events: number }> {
  const size = benchDatasetOptions(targetEvents)
  const dir = join(repoRoot, '.cache', 'bench')
  mkdirSync(dir, { recursive: true })
  const path = join(
    dir,
    `events-${size.organizations}x${size.providersPerOrganization}x${size.updateRounds}.ndjson`,
  )
  const meta = `${path}.events`
  if (existsSync(path) && existsSync(meta)) {
    return { path, events: Number(readFileSync(meta, 'utf8')) }
  }
  log(
    `generating ${size.organizations} organizations x ${size.providersPerOrganization} providers...`,
  )
  const t0 = Date.now()
  const summary = await writeDataset(path, size)
  writeFileSync(meta, String(summary.events))
  log(`  ${summary.events} events in ${((Date.now() - t0) / 1000).toFixed(1)} s`)
  if (summary.events < targetEvents) {
    throw new Error(`the dataset has ${summary.events} events, fewer than ${targetEvents}`)
  }
  return { path, events: summary.events }
}
