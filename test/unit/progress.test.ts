import { PassThrough } from 'node:stream'
import { describe, expect, it } from 'vitest'
import { createLogger } from '../../src/log.ts'
import { createProgress, progressRate } from '../../src/progress.ts'

function capture() {
  const lines: Record<string, unknown>[] = []
  const logger = createLogger('test', 'info', {
    write: (line: string) => lines.push(JSON.parse(line) as Record<string, unknown>),
  })
  return { logger, lines }
}

/** A terminal as cli-progress sees one: a stream with isTTY (what it writes is kept). */
function fakeTerminal(isTTY: boolean) {
  const stream = Object.assign(new PassThrough(), { isTTY, columns: 120 })
  let written = ''
  stream.on('data', (chunk: Buffer) => (written += chunk.toString()))
  return { stream, written: () => written }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

describe('progressRate', () => {
  it('is the average rate since the start, and the time left at that rate', () => {
    expect(progressRate(500, 2_000, 2_000)).toEqual({ ratePerSecond: 250, etaSeconds: 6 })
    // Partial seconds left round up: never "0s left" before the end.
    expect(progressRate(300, 1_000, 1_000)).toEqual({ ratePerSecond: 300, etaSeconds: 3 })
  })

  it('has no ETA while the total is unknown or nothing is done', () => {
    expect(progressRate(500, undefined, 1_000)).toEqual({
      ratePerSecond: 500,
      etaSeconds: undefined,
    })
    expect(progressRate(0, 100, 1_000)).toEqual({ ratePerSecond: 0, etaSeconds: undefined })
    expect(progressRate(0, 100, 0)).toEqual({ ratePerSecond: 0, etaSeconds: undefined })
  })

  it('has nothing left once done reaches the total, even past it', () => {
    expect(progressRate(100, 100, 4_000).etaSeconds).toBe(0)
    expect(progressRate(120, 100, 4_000).etaSeconds).toBe(0)
  })
})

describe('createProgress on a terminal', () => {
  it('draws a bar with done/total, rate and ETA, and logs nothing', () => {
    const terminal = fakeTerminal(true)
    const { logger, lines } = capture()
    let clock = 0
    const progress = createProgress({
      label: 'verify',
      unit: 'rows',
      stream: terminal.stream,
      logger,
      now: () => clock,
    })
    progress.setTotal(1_000)
    clock = 2_000
    progress.add(400)
    progress.done()
    const out = terminal.written()
    expect(out).toContain('verify')
    expect(out).toContain('400/1000 rows')
    expect(out).toContain('200 rows/s')
    expect(out).toContain('ETA 3s')
    // 40% of cli-progress's 40-character bar.
    expect(out).toContain(`${'█'.repeat(16)}${'░'.repeat(24)} `)
    expect(lines).toEqual([])
  })

  it('counts without a bar or ETA while the total is unknown', () => {
    const terminal = fakeTerminal(true)
    let clock = 0
    const progress = createProgress({
      label: 'rebuild',
      unit: 'events',
      stream: terminal.stream,
      logger: capture().logger,
      now: () => clock,
    })
    clock = 1_000
    progress.add(70)
    progress.done()
    const out = terminal.written()
    expect(out).toContain('rebuild 70 events | 70 events/s')
    expect(out).not.toContain('ETA')
  })

  it('writes nothing when nothing happened', () => {
    const terminal = fakeTerminal(true)
    const progress = createProgress({
      label: 'verify',
      unit: 'rows',
      total: 10,
      stream: terminal.stream,
      logger: capture().logger,
    })
    progress.done()
    expect(terminal.written()).toBe('')
  })
})

describe('createProgress elsewhere', () => {
  it('logs a line every interval while things move, then one at the end; no bar', async () => {
    const stream = fakeTerminal(false)
    const { logger, lines } = capture()
    const progress = createProgress({
      label: 'from-file',
      unit: 'bytes',
      total: 1_000,
      stream: stream.stream,
      logger,
      intervalMs: 10,
    })
    progress.add(250)
    await sleep(60)
    // Nothing moved since the last line: no new line.
    const whileIdle = lines.length
    await sleep(60)
    expect(lines.length).toBe(whileIdle)
    progress.add(750)
    progress.done()
    progress.done()
    expect(lines[0]).toMatchObject({ msg: 'progress', task: 'from-file', unit: 'bytes', done: 250 })
    expect(lines[0]).toHaveProperty('total', 1_000)
    expect(lines[0]).toHaveProperty('ratePerSecond')
    expect(lines[0]).toHaveProperty('etaSeconds')
    expect(lines.filter((l) => l.msg === 'progress')).toHaveLength(1)
    expect(lines.at(-1)).toMatchObject({
      msg: 'progress finished',
      done: 1_000,
      total: 1_000,
      etaSeconds: 0,
    })
    expect(lines.filter((l) => l.msg === 'progress finished')).toHaveLength(1)
    expect(stream.written()).toBe('')
  })

  it('logs nothing when nothing happened', async () => {
    const { logger, lines } = capture()
    const progress = createProgress({
      label: 'rebuild',
      unit: 'events',
      stream: fakeTerminal(false).stream,
      logger,
      intervalMs: 5,
    })
    await sleep(30)
    progress.done()
    expect(lines).toEqual([])
  })
})
