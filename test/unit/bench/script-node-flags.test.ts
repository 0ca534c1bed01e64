import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { repoRoot, scriptNodeFlags } from '../../harness/paths.ts'
import { projectorNodeFlags } from '../../../bench/projector-run.ts'

const scripts = (
  JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as {
    scripts: Record<string, string>
  }
).scripts

describe('the node flags tests and benchmarks start an entry with', () => {
  it('rebuild `npm run projector` exactly, its young generation included', () => {
    const flags = scriptNodeFlags('projector')
    expect(flags).toContain('--max-semi-space-size=2')
    expect(['node', ...flags, '--import', 'tsx', 'projector/main.ts'].join(' ')).toBe(
      scripts.projector,
    )
    expect(['node', ...projectorNodeFlags, 'projector/main.ts'].join(' ')).toBe(scripts.projector)
  })

  it('are none for an entry its script starts through tsx', () => {
    expect(scripts.api?.startsWith('tsx ')).toBe(true)
    expect(scriptNodeFlags('api')).toEqual([])
  })
})
