// `bench/shared-files.ts` at a tiny scale: the simulation of files shared by organizations must
// really write the many organizations' rows into the files asked for, load and burst every
// variant, and end with its one line of JSON. What it measures is for the benchmark, never here.
import { describe, expect, it } from 'vitest'
import { harnessEnv, runEntry } from '../../support/processes.ts'

describe('bench/shared-files.ts', () => {
  it('loads the many organizations into the shared files asked for, and times every burst', async () => {
    const run = await runEntry(
      'bench/shared-files.ts',
      [
        ['--events', '6000'],
        ['--organizations', '30'],
        ['--shared-files', '4'],
        ['--changes', '200'],
        ['--rounds', '1'],
      ].flat(),
      harnessEnv(),
      300_000,
    )
    expect(run.code, run.stderr).toBe(0)
    const lines = run.stdout.trim().split('\n')
    expect(lines).toHaveLength(1)
    const figures = JSON.parse(lines[0]!) as {
      files: Record<string, number>
      burstSeconds: Record<string, number[]>
      burstRatio: Record<string, number>
      loadRatio: Record<string, number>
    }
    expect(figures.files).toEqual({ few: 7, many: 30, shared4: 4 })
    for (const variant of ['few', 'many', 'shared4']) {
      expect(figures.burstSeconds[variant], variant).toHaveLength(1)
      expect(figures.burstSeconds[variant]![0], variant).toBeGreaterThan(0)
    }
    expect(Object.keys(figures.burstRatio).sort()).toEqual(['many', 'shared4'])
    expect(Object.keys(figures.loadRatio).sort()).toEqual(['many', 'shared4'])
  }, 300_000)
})
