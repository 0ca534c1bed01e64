// The projector's command line: reads config, starts, stops. Everything else is in projector.ts.
//
//   npm run projector                      consume the change topics from Kafka
//   npm run projector -- --from-file FILE  apply an NDJSON file of Kafka records and exit
//   npm run projector -- --rebuild         replay the topics into a new generation, then serve it
//   npm run projector -- --rebuild --org ID [--dry-run] [--json]   one organization, aside
//   npm run projector -- --rebuild --dry-run [--json]              what a rebuild would change
import closeWithGrace from 'close-with-grace'
import { parseArgs } from 'node:util'
import { loadCommandConfig, loadProjectorConfig, type ProjectorConfig } from '../src/config.ts'
import { organizationIdsOption } from '../src/layout.ts'
import { createLogger } from '../src/log.ts'
import { createProgress } from '../src/progress.ts'
import { FileSourceError } from './decode/file-line.ts'
import { createProjector } from './projector.ts'
import { isDiskFull } from './storage/disk-space.ts'
import { RebuildStopped } from './rebuild/aside.ts'
import { reportJson, reportTable } from './rebuild/report.ts'
import { rebuildAside, RebuildRefused } from './rebuild/run.ts'

const usage = `usage: npm run projector [-- --from-file FILE | --rebuild [--org ID]... [--dry-run] [--json]]

  (no option)       consume the change topics from Kafka (KAFKA_BROKERS) until SIGTERM
  --from-file FILE  apply an NDJSON file of Kafka records, one per line, then exit
  --rebuild         replay every topic from the beginning into a new generation (fresh consumer
                    group), keeping updatedAt of unchanged documents; the api switches to it
                    once it has caught up, and this process goes on serving it
  --org ID          with --rebuild: only this organization (repeatable, or comma-separated):
                    replays every topic aside, keeping its events, then hands the rebuilt file
                    to the live projector, which swaps it in; the others are not touched
  --dry-run         with --rebuild (whole or --org): build aside, report per organization and
                    resource how many documents would change, appear and disappear (up to 20
                    ids each), swap nothing, remove what was built. Exit 0: nothing would
                    change; 1: something would
  --json            with --dry-run or --org: the report as one line of JSON on stdout
  --help            this text

Configuration is by environment: DATA_DIR, KAFKA_BROKERS, KAFKA_GROUP_ID, TOPIC_PREFIX, LOG_LEVEL,
ADMIN_HOST, ADMIN_PORT, DEAD_LETTER_TOPIC, WAL_CHECKPOINT_BYTES, OPEN_FILES_MAX,
PROGRESS_INTERVAL_MS, HANDOVER_TIMEOUT_MS (--rebuild --org; see README). --from-file and --rebuild show their progress: a bar on stderr
when it is a terminal, else a log line every PROGRESS_INTERVAL_MS.`

async function main(): Promise<number> {
  let args
  try {
    args = parseArgs({
      options: {
        'from-file': { type: 'string' },
        rebuild: { type: 'boolean' },
        org: { type: 'string', multiple: true },
        'dry-run': { type: 'boolean' },
        json: { type: 'boolean' },
        help: { type: 'boolean' },
      },
      strict: true,
    })
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\n\n${usage}\n`)
    return 2
  }
  if (args.values.help === true) {
    process.stdout.write(`${usage}\n`)
    return 0
  }
  const orgOption =
    args.values.org === undefined ? undefined : organizationIdsOption(args.values.org)
  const dryRun = args.values['dry-run'] === true
  const aside = orgOption !== undefined || dryRun
  if (aside && args.values.rebuild !== true) {
    process.stderr.write(`projector: --org and --dry-run go with --rebuild\n\n${usage}\n`)
    return 2
  }
  if (args.values.json === true && !aside) {
    process.stderr.write(`projector: --json goes with --rebuild --org or --rebuild --dry-run\n`)
    return 2
  }
  if (orgOption !== undefined && 'error' in orgOption) {
    process.stderr.write(`projector: ${orgOption.error}\n`)
    return 2
  }
  const organizations = orgOption?.organizations

  const config = loadCommandConfig('projector', loadProjectorConfig, process.env)
  if (config === undefined) return 2
  if (aside) {
    return rebuildAsideCommand(config, {
      ...(organizations === undefined ? {} : { organizations }),
      dryRun,
      json: args.values.json === true,
    })
  }
  const logger = createLogger('projector', config.logLevel)
  const projector = createProjector({
    config,
    logger,
    // A lane failed (logged by lanes.ts), or the Kafka consumer stopped for good (sources/kafka.ts):
    // stop cleanly, then exit 1 for the supervisor to see and restart.
    onFatal: () => {
      void projector.stop().finally(() => process.exit(1))
    },
  })
  const progress = (label: string, unit: 'events' | 'bytes') =>
    createProgress({
      label,
      unit,
      stream: process.stderr,
      logger,
      intervalMs: config.progressIntervalMs,
    })

  const file = args.values['from-file']
  if (file !== undefined) {
    try {
      const summary = await projector.runFile(file, { progress: progress('from-file', 'bytes') })
      logger.info(summary, 'file applied')
      return 0
    } catch (error) {
      if (error instanceof FileSourceError || (error as NodeJS.ErrnoException).code === 'ENOENT') {
        process.stderr.write(`projector: ${file}: ${(error as Error).message}\n`)
        return 1
      }
      throw error
    } finally {
      await projector.stop()
    }
  }

  closeWithGrace({ delay: 30_000, logger }, async ({ signal, err }) => {
    if (err !== undefined) logger.error({ err }, 'stopping after an error')
    else logger.info({ signal }, 'stopping')
    await projector.stop()
  })
  const rebuild = args.values.rebuild === true
  await projector.startKafka({
    rebuild,
    ...(rebuild ? { progress: progress('rebuild', 'events') } : {}),
  })
  logger.info(
    { admin: projector.adminAddress(), brokers: config.kafka.brokers },
    'projector consuming',
  )
  return -1
}

/**
 * `--rebuild --org` and `--dry-run`: a run that ends, its report on stdout (its logs on stderr,
 * so `--json` output stays one clean line). SIGTERM or Ctrl-C stops it, swapping nothing.
 */
async function rebuildAsideCommand(
  config: ProjectorConfig,
  options: { organizations?: string[]; dryRun: boolean; json: boolean },
): Promise<number> {
  const logger = createLogger('projector', config.logLevel, process.stderr)
  const progress = createProgress({
    label: options.dryRun ? 'dry run' : 'rebuild',
    unit: 'events',
    stream: process.stderr,
    logger,
    intervalMs: config.progressIntervalMs,
  })
  const stop = new AbortController()
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    process.once(signal, () => {
      logger.info({ signal }, 'stopping the rebuild; nothing is swapped')
      stop.abort()
    })
  }
  let total = 0
  let done = 0
  try {
    const report = await rebuildAside(
      {
        config,
        logger,
        signal: stop.signal,
        onProgress: (now, all) => {
          if (all !== total) progress.setTotal((total = all))
          progress.add(now - done)
          done = now
        },
      },
      {
        ...(options.organizations === undefined ? {} : { organizations: options.organizations }),
        dryRun: options.dryRun,
      },
    )
    progress.done()
    process.stdout.write(options.json ? `${reportJson(report)}\n` : reportTable(report))
    return options.dryRun && report.changed ? 1 : 0
  } catch (error) {
    progress.done()
    if (error instanceof RebuildRefused) {
      process.stderr.write(`projector: ${error.message}\n`)
      return 2
    }
    if (error instanceof RebuildStopped) {
      process.stderr.write(`projector: ${error.message}; nothing was swapped\n`)
      return 1
    }
    if (isDiskFull(error)) {
      process.stderr.write(
        `projector: the disk under ${config.dataDir} filled during the rebuild; nothing was swapped, and what was built aside is removed\n`,
      )
      return 1
    }
    throw error
  }
}

main().then(
  (code) => {
    if (code >= 0) process.exitCode = code
  },
  (error: unknown) => {
    process.stderr.write(`projector: ${(error as Error).message}\n`)
    process.exitCode = 1
  },
)
