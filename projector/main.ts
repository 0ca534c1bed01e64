// The projector's process: reads its command (command.ts) and config, starts, stops. Everything
// else is in projector.ts.
//
//   npm run projector                      consume the change topics from Kafka
//   npm run projector -- --from-file FILE  apply an NDJSON file of Kafka records and exit
//   npm run projector -- --rebuild         replay the topics into a new generation, then serve it
//   npm run projector -- --rebuild --org ID [--dry-run] [--json]   one organization, aside
//   npm run projector -- --rebuild --dry-run [--json]              what a rebuild would change
import closeWithGrace from 'close-with-grace'
import { loadCommandConfig, loadProjectorConfig, type ProjectorConfig } from '../src/config.ts'
import { createLogger } from '../src/log.ts'
import { createProgress } from '../src/progress.ts'
import { parseCommand, usage, type ProjectorCommand } from './command.ts'
import { FileSourceError } from './decode/file-line.ts'
import { createProjector } from './projector.ts'
import { isDiskFull } from './storage/disk-space.ts'
import { RebuildStopped } from './rebuild/aside.ts'
import { reportJson, reportTable } from './rebuild/report.ts'
import { rebuildAside, RebuildRefused } from './rebuild/run.ts'

async function main(): Promise<number> {
  const command = parseCommand(process.argv.slice(2))
  if (command.run === 'help') {
    process.stdout.write(`${usage}\n`)
    return 0
  }
  if (command.run === 'refused') {
    process.stderr.write(`${command.message}\n`)
    return 2
  }
  const config = loadCommandConfig('projector', loadProjectorConfig, process.env)
  if (config === undefined) return 2
  if (command.run === 'aside') return rebuildAsideCommand(config, command)
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
  if (command.run === 'file') {
    try {
      const summary = await projector.runFile(command.path, {
        progress: progress('from-file', 'bytes'),
      })
      logger.info(summary, 'file applied')
      return 0
    } catch (error) {
      if (error instanceof FileSourceError || (error as NodeJS.ErrnoException).code === 'ENOENT') {
        process.stderr.write(`projector: ${command.path}: ${(error as Error).message}\n`)
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
  await projector.startKafka({
    rebuild: command.rebuild,
    ...(command.rebuild ? { progress: progress('rebuild', 'events') } : {}),
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
  options: Extract<ProjectorCommand, { run: 'aside' }>,
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
