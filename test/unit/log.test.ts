import { describe, expect, it } from 'vitest'
import { createLogger } from '../../src/log.ts'

function capture() {
  const lines: Record<string, unknown>[] = []
  const logger = createLogger('test', 'info', {
    write: (line: string) => lines.push(JSON.parse(line) as Record<string, unknown>),
  })
  return { logger, lines }
}

describe('logs', () => {
  it('carry an error as type, message and code, never its stack', () => {
    const { logger, lines } = capture()
    const error = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:9092'), {
      code: 'ECONNREFUSED',
    })
    logger.error({ err: error }, 'cannot reach Kafka')
    // close-with-grace passes the error itself as the first argument.
    logger.error(error)
    expect(lines).toHaveLength(2)
    for (const line of lines) {
      expect(line.err).toEqual({
        type: 'Error',
        message: 'connect ECONNREFUSED 127.0.0.1:9092',
        code: 'ECONNREFUSED',
      })
      expect(JSON.stringify(line)).not.toContain('    at ')
    }
  })

  it('never carry a bearer key', () => {
    const { logger, lines } = capture()
    logger.info({ req: { headers: { authorization: 'Bearer rk_live_secret' } } }, 'request')
    expect(JSON.stringify(lines)).not.toContain('rk_live_secret')
  })
})
