// The projector's command line: reads config, starts, stops. Everything else is in projector.ts.
//
//   npm run projector                      consume the change topics from Kafka
//   npm run projector -- --from-file FILE  apply an NDJSON file of Kafka records and exit
//   npm run projector -- --rebuild         replay the topics into a new generation, then serve it
import closeWithGrace from 'close-with-grace'
import { parseArgs } from 'node:util'
import { ConfigError, loadProjectorConfig } from '../src/config.ts'
import { createLogger } from '../src/log.ts'
import { FileSourceError } from './sources/file.ts'
import { createProjector } from './projector.ts'

const usage = `usage: npm run projector [-- --from-file FILE | --rebuild]

  (no option)       consume the change topics from Kafka (KAFKA_BROKERS) until SIGTERM
  --from-file FILE  apply an NDJSON file of Kafka records, one per line, then exit
  --rebuild         replay every topic from the beginning into a new generation (fresh consumer
                    group), keeping updatedAt of unchanged documents; the api switches to it
                    once it has caught up, and this process goes on serving it
  --help            this text

Configuration is by environment: DATA_DIR, KAFKA_BROKERS, KAFKA_GROUP_ID, TOPIC_PREFIX, LOG_LEVEL,
ADMIN_HOST, ADMIN_PORT, DEAD_LETTER_TOPIC, WAL_CHECKPOINT_BYTES, OPEN_FILES_MAX (see README).`

async function main(): Promise<number> {
  let args
  try {
    args = parseArgs({
      options: {
        'from-file': { type: 'string' },
        rebuild: { type: 'boolean' },
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

  let config
  try {
    config = loadProjectorConfig(process.env)
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`projector: ${error.message}\n`)
      return 2
    }
    throw error
  }
  const logger = createLogger('projector', config.logLevel)
  const projector = createProjector({ config, logger })

  const file = args.values['from-file']
  if (file !== undefined) {
    try {
      const summary = await projector.runFile(file)
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
  await projector.startKafka({ rebuild: args.values.rebuild === true })
  logger.info(
    { admin: projector.adminAddress(), brokers: config.kafka.brokers },
    'projector consuming',
  )
  return -1
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
