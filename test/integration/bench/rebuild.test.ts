// `npm run bench:rebuild` with a tiny dataset: the command behind the script, as a user runs it.
// It must end with its one line of JSON, with figures from both phases, and the pollers must have
// gone through the whole rebuild and its swap without a failed request. Its speed targets are
// checked by the benchmark itself, never here.
import { describe, expect, it } from 'vitest'
import { harnessEnv, runEntry } from '../../support/processes.ts'

interface Figures {
  events: number
  rebuildSeconds: number
  p99QuietMs: number
  p99DuringRebuildMs: number
  failedRequests: number
}

describe('npm run bench:rebuild', () => {
  it('rebuilds a small replica under pollers, none of whose requests fails', async () => {
    const run = await runEntry(
      'bench/rebuild.ts',
      ['--events', '8000', '--quiet-seconds', '3'],
      harnessEnv(),
      300_000,
    )
    expect(run.code, run.stderr).toBe(0)
    const lines = run.stdout.trim().split('\n')
    expect(lines).toHaveLength(1)
    const figures = JSON.parse(lines[0]!) as Figures
    expect(Object.keys(figures)).toEqual([
      'events',
      'rebuildSeconds',
      'p99QuietMs',
      'p99DuringRebuildMs',
      'failedRequests',
    ])
    expect(figures.events).toBeGreaterThanOrEqual(8000)
    expect(figures.rebuildSeconds).toBeGreaterThan(0)
    // Numbers, not null: requests were made in the quiet period and during the rebuild.
    expect(figures.p99QuietMs).toBeGreaterThan(0)
    expect(figures.p99DuringRebuildMs).toBeGreaterThan(0)
    expect(figures.failedRequests, run.stderr).toBe(0)
  }, 300_000)
})
