// The api process: read the configuration, serve, and on SIGTERM/SIGINT stop accepting, finish
// the requests in flight, close the files.
import closeWithGrace from 'close-with-grace'
import { ConfigError, loadApiConfig } from '../src/config.ts'
import { createLogger } from '../src/log.ts'
import { buildApi } from './app.ts'

let config
try {
  config = loadApiConfig(process.env)
} catch (error) {
  if (!(error instanceof ConfigError)) throw error
  // As the projector: exit 2 on a bad configuration value, the message naming the variable.
  process.stderr.write(`api: ${error.message}\n`)
  process.exit(2)
}

const logger = createLogger('api', config.logLevel)
const api = await buildApi({ config, logger })

closeWithGrace({ delay: 10_000, logger }, async ({ signal, err }) => {
  if (err !== undefined) logger.error({ err }, 'stopping after an uncaught error')
  else logger.info({ signal }, 'stopping')
  await api.close()
})

const { url, adminUrl } = await api.listen()
logger.info({ url, adminUrl, dataDir: config.dataDir }, 'api listening')
