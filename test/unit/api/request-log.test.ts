import { describe, expect, it } from 'vitest'
import { RequestLogger } from '../../../api/request-log.ts'
import { createLogger } from '../../../src/log.ts'

function capture(level: 'info' | 'warn') {
  const lines: Record<string, unknown>[] = []
  const logger = createLogger('api', level, {
    write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>),
  })
  return { logger, lines }
}

const strip = ({ time: _time, ...line }: Record<string, unknown>) => line

describe('RequestLogger', () => {
  it('writes the same line as a pino child with the same bindings', () => {
    const { logger, lines } = capture('info')
    new RequestLogger(logger, { reqId: 'req-1' }, {}).error(
      { err: new Error('boom'), keyId: 'k1', authorization: 'Bearer secret' },
      'request failed',
    )
    logger
      .child({ reqId: 'req-1' }, {})
      .error(
        { err: new Error('boom'), keyId: 'k1', authorization: 'Bearer secret' },
        'request failed',
      )
    expect(lines).toHaveLength(2)
    expect(strip(lines[0] as Record<string, unknown>)).toEqual(
      strip(lines[1] as Record<string, unknown>),
    )
    expect(lines[0]).toMatchObject({ reqId: 'req-1', keyId: 'k1', authorization: '[redacted]' })
  })

  it('writes nothing below the level, and still logs above it', () => {
    const { logger, lines } = capture('warn')
    const log = new RequestLogger(logger, { reqId: 'req-2' }, {})
    log.info({ route: '/x' }, 'request')
    log.debug('detail')
    expect(lines).toEqual([])
    log.warn('slow')
    expect(lines).toEqual([expect.objectContaining({ reqId: 'req-2', msg: 'slow', level: 40 })])
  })

  it('reports the level it logs at, and a level set on it applies to it alone', () => {
    const { logger, lines } = capture('warn')
    const log = new RequestLogger(logger, { reqId: 'req-3' }, {})
    expect(log.level).toBe('warn')
    log.level = 'info'
    log.info('now visible')
    logger.info('still hidden')
    expect(lines).toEqual([expect.objectContaining({ reqId: 'req-3', msg: 'now visible' })])
  })
})
