// Starts the api in-process on ephemeral loopback ports, for tests that talk to it over HTTP.
import { type Api, buildApi } from '../../../api/app.ts'
import type { Clock } from '../../../api/routes/shared.ts'
import { loadApiConfig } from '../../../src/config.ts'
import { createLogger, type Logger } from '../../../src/log.ts'

export interface RunningApi {
  readonly api: Api
  readonly url: string
  readonly adminUrl: string
  get(path: string, key?: string, init?: RequestInit): Promise<Response>
  close(): Promise<void>
}

export async function startApi(
  dataDir: string,
  options: {
    env?: Record<string, string>
    clock?: Clock
    generationCheckMs?: number
    logger?: Logger
  } = {},
): Promise<RunningApi> {
  const config = loadApiConfig({
    DATA_DIR: dataDir,
    HOST: '127.0.0.1',
    PORT: '0',
    ADMIN_PORT: '0',
    LOG_LEVEL: 'silent',
    // In process, the api shares its event loop with the test: a fixture written synchronously
    // would count as the api's delay (the loop's, or a request's in its turn) and shed its next
    // request. overload.test.ts turns them on.
    API_SHED_EVENT_LOOP_DELAY_MS: '0',
    API_SHED_QUEUE_DELAY_MS: '0',
    ...options.env,
  })
  const api = await buildApi({
    config,
    logger: options.logger ?? createLogger('api-test', config.logLevel),
    clock: options.clock,
    generationCheckMs: options.generationCheckMs ?? 0,
  })
  const { url, adminUrl } = await api.listen()
  return {
    api,
    url,
    adminUrl,
    get(path, key, init = {}) {
      const headers = new Headers(init.headers)
      if (key !== undefined) headers.set('authorization', `Bearer ${key}`)
      return fetch(`${url}/api/v1${path}`, { ...init, headers })
    },
    close: () => api.close(),
  }
}
