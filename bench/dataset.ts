// The projector benchmarks' dataset: generated once (scripts/dataset) and cached in
// <cache>/bench, in either of the JsonConverter's encodings: with schemas (Debezium's default)
// or without (`schemas.enable=false`). Both hold the same events.
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import {
  datasetOrganizations,
  datasetSizeFor,
  writeDataset,
  type DatasetSummary,
} from '../scripts/dataset/generate.ts'
import { cacheDir } from '../test/harness/paths.ts'

/** A dataset file: its path, events, bytes, and its organizations with their raw API keys. */
export interface BenchDatasetFile {
  path: string
  events: number
  bytes: number
  organizations: DatasetSummary['organizations']
}

/** `schemas`: keys and values wrapped as `{schema, payload}`; `schemaless`: payloads alone. */
export type BenchEncoding = 'schemas' | 'schemaless'

/**
 * A dataset of at least `targetEvents` Debezium events: its path, its number of events and bytes,
 * and its organizations with their raw API keys (for clients of the api).
 */
export async function benchDataset(
  targetEvents: number,
  log: (line: string) => void,
  encoding: BenchEncoding = 'schemas',
): Promise<BenchDatasetFile> {
  // datasetSizeFor aims at the target on average; 2% more makes it a floor, checked below.
  const dataset = await generatedDataset(
    datasetSizeFor(Math.ceil(targetEvents * 1.02)),
    log,
    encoding,
  )
  if (dataset.events < targetEvents) {
    throw new Error(`the dataset has ${dataset.events} events, fewer than ${targetEvents}`)
  }
  return dataset
}

/** The shape of a generated dataset: how many organizations, of how many providers. */
export interface DatasetSize {
  organizations: number
  providersPerOrganization: number
  updateRounds: number
}

/**
 * The dataset of exactly this size (seed 7), generated once and cached in <cache>/bench: its
 * path, its number of events and bytes, and its organizations with their raw API keys.
 */
export async function generatedDataset(
  size: DatasetSize,
  log: (line: string) => void,
  encoding: BenchEncoding = 'schemas',
): Promise<BenchDatasetFile> {
  const dir = join(cacheDir(), 'bench')
  mkdirSync(dir, { recursive: true })
  const suffix = encoding === 'schemas' ? '' : '-schemaless'
  const path = join(
    dir,
    `events-${size.organizations}x${size.providersPerOrganization}x${size.updateRounds}${suffix}.ndjson`,
  )
  const meta = `${path}.events`
  const options = { ...size, seed: 7, schemas: encoding === 'schemas' }
  // The keys are a function of the options: a cached file's are computed again, not stored.
  const organizations = datasetOrganizations(options)
  if (!existsSync(path) || !existsSync(meta)) {
    log(
      `generating ${size.organizations} organizations x ${size.providersPerOrganization} providers (${encoding})...`,
    )
    const t0 = Date.now()
    const summary = await writeDataset(path, options)
    writeFileSync(meta, String(summary.events))
    log(`  ${summary.events} events in ${((Date.now() - t0) / 1000).toFixed(1)} s`)
  }
  const events = Number(readFileSync(meta, 'utf8'))
  return { path, events, bytes: statSync(path).size, organizations }
}
