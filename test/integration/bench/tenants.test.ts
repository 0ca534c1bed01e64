// `npm run bench:tenants` at a tiny scale: the command behind the script, as a user runs it, every
// part (file, Kafka, api, rebuild) on both datasets. It must end with its one line of JSON, every
// figure measured, and the two datasets must hold about the same number of events. Its targets are
// checked by the benchmark itself, never here.
import { describe, expect, it } from 'vitest'
import { harnessEnv, runEntry } from '../../support/processes.ts'

const REQUIRED = [
  'organizations',
  'fileEventsPerSecondMany',
  'fileEventsPerSecondFew',
  'peakRssMbMany',
  'kafkaEventsPerSecondMany',
  'kafkaEventsPerSecondFew',
  'rebuildSecondsMany',
  'rebuildSecondsFew',
  'apiRpsMany',
  'apiRpsFew',
  'apiP99MsMany',
  'apiP99MsHalfMany',
  'eventsMany',
  'eventsFew',
] as const

describe('npm run bench:tenants', () => {
  it('measures a few and many organizations of the same events, every part', async () => {
    const run = await runEntry(
      'bench/tenants.ts',
      [
        ['--events', '6000'],
        ['--organizations', '30'],
        ['--changes', '300'],
        ['--change-rate', '50'],
        ['--change-seconds', '2'],
        ['--api-seconds', '1'],
        ['--clients', '60'],
      ].flat(),
      harnessEnv(),
      540_000,
    )
    expect(run.code, run.stderr).toBe(0)
    const lines = run.stdout.trim().split('\n')
    expect(lines).toHaveLength(1)
    const figures = JSON.parse(lines[0]!) as Record<string, number | null>
    for (const field of REQUIRED) {
      expect(typeof figures[field], `${field}: ${run.stderr}`).toBe('number')
      expect(figures[field], field).toBeGreaterThan(0)
    }
    expect(figures.organizations).toBe(30)
    const ratio = figures.eventsMany! / figures.eventsFew!
    expect(ratio).toBeGreaterThan(0.95)
    expect(ratio).toBeLessThan(1.05)
  }, 600_000)
})
