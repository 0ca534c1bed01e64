// `npx tsx bench/shared-files.ts`: what files shared by many organizations would do for a burst of
// live changes, measured without building them (docs/many-organizations.md, "Files shared by small
// organizations: measured, not built").
//
//   npx tsx bench/shared-files.ts [--events 430000] [--organizations 3000]
//     [--few-organizations 7] [--shared-files 100,300] [--changes 20000] [--rounds 2]
//
// The datasets are bench:tenants' (schemaless, about --events events each): --few-organizations
// large organizations, and --organizations small ones. Each "shared N" variant is the many
// organizations' dataset with every organization id replaced by one of N ids (a hash of the
// organization's): the projector then writes the same rows into N files, as it would if
// organizations shared files, less the organization column and scoped reads a real design needs.
// Each dataset is loaded once by `projector --from-file`; then, in each round, a fresh copy of each
// replica takes --changes provider renames (bench:tenants' burst, every provider's latest row with
// a new last name, the organizations taken in turn) by `projector --from-file`, the variants
// alternated. Prints the seconds the projector reports, then one JSON line:
//   {"organizations", "fewOrganizations", "changes", "files": {...}, "loadSeconds": {...},
//    "burstSeconds": {...},
//    "burstRatio": {"many": n, "shared<N>": n, ...}, "loadRatio": {...}}
// where a burst ratio is the few organizations' median burst time over the variant's, and a load
// ratio their load time over the variant's (issue 22's "at least 0.8x its 7-organization figure",
// as events/s; one load each, so the load ratios are single runs).
import { createHash } from 'node:crypto'
import { once } from 'node:events'
import {
  cpSync,
  createReadStream,
  createWriteStream,
  existsSync,
  renameSync,
  rmSync,
} from 'node:fs'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { finished } from 'node:stream/promises'
import { parseArgs } from 'node:util'
import { currentGeneration, organizationsWithFiles } from '../src/layout.ts'
import { makeTempDir } from '../test/harness/process.ts'
import { generatedDataset, type BenchDatasetFile } from './dataset.ts'
import { projectFile } from './projector-run.ts'
import { Renames, sampleProviders, sizeFor } from './tenant-changes.ts'

function fail(message: string): never {
  process.stderr.write(`bench/shared-files: ${message}\n`)
  process.exit(2)
}

const values = (() => {
  try {
    return parseArgs({
      options: {
        events: { type: 'string', default: '430000' },
        organizations: { type: 'string', default: '3000' },
        'few-organizations': { type: 'string', default: '7' },
        'shared-files': { type: 'string', default: '100,300' },
        changes: { type: 'string', default: '20000' },
        rounds: { type: 'string', default: '2' },
      },
    }).values
  } catch (error) {
    fail((error as Error).message)
  }
})()

function integer(text: string, name: string): number {
  const value = Number(text)
  if (!Number.isSafeInteger(value) || value < 1) fail(`--${name} must be an integer >= 1`)
  return value
}

const targetEvents = integer(values.events, 'events')
const manyOrganizations = integer(values.organizations, 'organizations')
const fewOrganizations = integer(values['few-organizations'], 'few-organizations')
const sharedFiles = values['shared-files'].split(',').map((n) => integer(n, 'shared-files'))
const changes = integer(values.changes, 'changes')
const rounds = integer(values.rounds, 'rounds')

function log(line: string): void {
  process.stderr.write(`${line}\n`)
}

/** A uuid-shaped id for shared file `index`, the same in every run. */
function sharedFileId(index: number): string {
  const hex = createHash('sha256').update(`shared-file-${index}`).digest('hex')
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-4${hex.slice(13, 16)}-8${hex.slice(17, 20)}-${hex.slice(20, 32)}`
}

/** Replaces each organization id in a record's text by the id of the file it would share. */
function sharingRewriter(files: number): (line: string) => string {
  const ids = Array.from({ length: files }, (_, i) => sharedFileId(i))
  const fileOf = new Map<string, string>()
  const shared = (organizationId: string) => {
    let id = fileOf.get(organizationId)
    if (id === undefined) {
      id = ids[createHash('sha256').update(organizationId).digest().readUInt32BE(0) % files]!
      fileOf.set(organizationId, id)
    }
    return id
  }
  const tenantColumn = /"organization_id":"([0-9a-f-]{36})"/g
  // An organization's own row: its key and its id name it.
  const organizationRow = /"id":"([0-9a-f-]{36})"/g
  return (line) =>
    line.includes('.public.organizations"')
      ? line.replace(organizationRow, (_, id: string) => `"id":"${shared(id)}"`)
      : line.replace(tenantColumn, (_, id: string) => `"organization_id":"${shared(id)}"`)
}

/** `path` rewritten line by line into `out` (kept, like the datasets, for the next run). */
async function rewriteFile(path: string, out: string, rewrite: (line: string) => string) {
  if (existsSync(out)) return
  const partial = `${out}.partial`
  const output = createWriteStream(partial)
  for await (const line of createInterface({
    input: createReadStream(path),
    crlfDelay: Infinity,
  })) {
    if (!output.write(`${rewrite(line)}\n`)) await once(output, 'drain')
  }
  output.end()
  await finished(output)
  renameSync(partial, out)
}

interface Variant {
  name: string
  dataset: string
  renames: string
  replica: string
  loadSeconds: number
  /** Organization files the load left (the shared variants' N, if the rewrite did its work). */
  files: number
  burstSeconds: number[]
}

async function main(): Promise<void> {
  const work = makeTempDir('shared-files')
  const dataset = (organizations: number): Promise<BenchDatasetFile> =>
    generatedDataset(sizeFor(targetEvents, organizations), log, 'schemaless')
  const few = await dataset(fewOrganizations)
  const many = await dataset(manyOrganizations)
  // The generator's topic prefix; --from-file reads each record's topic.
  const topic = 'product.public.providers'

  const renamesOf = async (source: BenchDatasetFile, name: string) => {
    const path = join(work.path, `renames-${name}.ndjson`)
    new Renames(await sampleProviders(source), topic, name).writeFile(path, changes)
    return path
  }
  const variants: Variant[] = []
  const add = (name: string, datasetPath: string, renames: string) =>
    variants.push({
      name,
      dataset: datasetPath,
      renames,
      replica: join(work.path, `replica-${name}`),
      loadSeconds: 0,
      files: 0,
      burstSeconds: [],
    })
  add('few', few.path, await renamesOf(few, 'few'))
  const manyRenames = await renamesOf(many, 'many')
  add('many', many.path, manyRenames)
  for (const files of sharedFiles) {
    const rewrite = sharingRewriter(files)
    const path = many.path.replace(/\.ndjson$/, `-shared${files}.ndjson`)
    log(`rewriting ${manyOrganizations} organizations into ${files} shared files...`)
    await rewriteFile(many.path, path, rewrite)
    // The same renames, of the same providers in the same order, into their shared files.
    const renames = join(work.path, `renames-shared${files}.ndjson`)
    await rewriteFile(manyRenames, renames, rewrite)
    add(`shared${files}`, path, renames)
  }

  for (const variant of variants) {
    const summary = await projectFile(variant.dataset, variant.replica)
    variant.loadSeconds = Number(summary.seconds.toFixed(1))
    const generation = currentGeneration(variant.replica)
    variant.files = generation === undefined ? 0 : organizationsWithFiles(generation).length
    log(
      `${variant.name}: loaded ${summary.records} records in ${variant.loadSeconds} s ` +
        `into ${variant.files} organization files`,
    )
  }
  for (let round = 1; round <= rounds; round++) {
    for (const variant of variants) {
      const copy = join(work.path, 'burst')
      rmSync(copy, { recursive: true, force: true })
      cpSync(variant.replica, copy, { recursive: true })
      const summary = await projectFile(variant.renames, copy)
      variant.burstSeconds.push(Number(summary.seconds.toFixed(2)))
      log(
        `round ${round}, ${variant.name}: ${changes} renames in ${summary.seconds.toFixed(2)} s ` +
          `(peak ${summary.peakRssMb} MB)`,
      )
    }
  }
  rmSync(join(work.path, 'burst'), { recursive: true, force: true })

  const median = (v: Variant) => {
    const sorted = [...v.burstSeconds].sort((a, b) => a - b)
    const middle = sorted.length / 2
    return sorted.length % 2 === 1
      ? sorted[Math.floor(middle)]!
      : (sorted[middle - 1]! + sorted[middle]!) / 2
  }
  const [fewVariant] = variants as [Variant, ...Variant[]]
  const fewMedian = median(fewVariant)
  const figures = {
    organizations: manyOrganizations,
    fewOrganizations,
    changes,
    files: Object.fromEntries(variants.map((v) => [v.name, v.files])),
    loadSeconds: Object.fromEntries(variants.map((v) => [v.name, v.loadSeconds])),
    burstSeconds: Object.fromEntries(variants.map((v) => [v.name, v.burstSeconds])),
    burstRatio: Object.fromEntries(
      variants.slice(1).map((v) => [v.name, Number((fewMedian / median(v)).toFixed(2))]),
    ),
    loadRatio: Object.fromEntries(
      variants
        .slice(1)
        .map((v) => [v.name, Number((fewVariant.loadSeconds / v.loadSeconds).toFixed(2))]),
    ),
  }
  work.remove()
  process.stdout.write(`${JSON.stringify(figures)}\n`)
}

await main()
