// Writes a generated dataset to an NDJSON file and prints a JSON summary (organizations with their
// raw API keys, event counts per topic and op, time taken).
//
//   npx tsx scripts/dataset/cli.ts --out FILE --organizations N --providers N [--seed S]
//       [--rounds R] [--now ISO] [--topic-prefix P] [--schemas true|false]
//   npx tsx scripts/dataset/cli.ts --out FILE --events 1000000
//
// --schemas is the JsonConverter's schemas.enable: true (default) wraps every key and value in
// `{"schema":...,"payload":...}`, false writes the payloads alone (same events, a quarter the bytes).
import { parseArgs } from 'node:util'
import { type DatasetOptions, datasetSizeFor, writeDataset } from './generate.ts'

const USAGE =
  'usage: cli.ts --out FILE (--organizations N --providers N | --events N) [--seed S] [--rounds R] [--now ISO] [--topic-prefix P] [--schemas true|false]'

function integer(name: string, raw: string | undefined): number | undefined {
  if (raw === undefined) return undefined
  if (!/^\d+$/.test(raw)) throw new Error(`--${name} must be a non-negative integer`)
  return Number(raw)
}

export function optionsFromArgs(args: string[]): { out: string; options: DatasetOptions } {
  const { values } = parseArgs({
    args,
    options: {
      out: { type: 'string' },
      organizations: { type: 'string' },
      providers: { type: 'string' },
      events: { type: 'string' },
      seed: { type: 'string' },
      rounds: { type: 'string' },
      now: { type: 'string' },
      'topic-prefix': { type: 'string' },
      schemas: { type: 'string' },
    },
    strict: true,
  })
  if (values.out === undefined) throw new Error(USAGE)
  const rounds = integer('rounds', values.rounds)
  const events = integer('events', values.events)
  let size: Pick<DatasetOptions, 'organizations' | 'providersPerOrganization'>
  if (events !== undefined) {
    size = datasetSizeFor(events, rounds ?? 3)
  } else {
    const organizations = integer('organizations', values.organizations)
    const providers = integer('providers', values.providers)
    if (organizations === undefined || providers === undefined) throw new Error(USAGE)
    size = { organizations, providersPerOrganization: providers }
  }
  const now = values.now === undefined ? undefined : new Date(values.now)
  if (now !== undefined && Number.isNaN(now.getTime())) throw new Error('--now must be an ISO date')
  if (values.schemas !== undefined && values.schemas !== 'true' && values.schemas !== 'false')
    throw new Error('--schemas must be true or false')
  return {
    out: values.out,
    options: {
      ...size,
      seed: integer('seed', values.seed),
      updateRounds: rounds,
      now,
      topicPrefix: values['topic-prefix'],
      schemas: values.schemas === undefined ? undefined : values.schemas === 'true',
    },
  }
}

async function main(): Promise<void> {
  const { out, options } = optionsFromArgs(process.argv.slice(2))
  const started = process.hrtime.bigint()
  const summary = await writeDataset(out, options)
  const seconds = Number(process.hrtime.bigint() - started) / 1e9
  const result = {
    out,
    options: { ...options, now: options.now?.toISOString() },
    ...summary,
    seconds: Math.round(seconds * 100) / 100,
    eventsPerSecond: Math.round(summary.events / seconds),
    maxRssMb: Math.round(process.resourceUsage().maxRSS / 1024),
  }
  process.stdout.write(JSON.stringify(result, null, 2) + '\n')
}

if (import.meta.url === `file://${process.argv[1]}`) {
  main().catch((error: unknown) => {
    process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`)
    process.exitCode = 1
  })
}
