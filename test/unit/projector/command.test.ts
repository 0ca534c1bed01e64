import { describe, expect, it } from 'vitest'
import { parseCommand } from '../../../projector/command.ts'

const ORG = '00000000-0000-4000-8000-000000000001'
const OTHER = '00000000-0000-4000-8000-000000000002'

describe('the projector command line', () => {
  it('consumes Kafka with no option, and rebuilds the whole replica with --rebuild', () => {
    expect(parseCommand([])).toEqual({ run: 'live', rebuild: false })
    expect(parseCommand(['--rebuild'])).toEqual({ run: 'live', rebuild: true })
  })

  it('applies a file with --from-file', () => {
    expect(parseCommand(['--from-file', 'events.ndjson'])).toEqual({
      run: 'file',
      path: 'events.ndjson',
    })
  })

  it('runs aside for --rebuild --org (repeated or comma-separated) and --rebuild --dry-run', () => {
    expect(parseCommand(['--rebuild', '--org', ORG, '--org', OTHER])).toEqual({
      run: 'aside',
      organizations: [ORG, OTHER],
      dryRun: false,
      json: false,
    })
    expect(parseCommand(['--rebuild', '--org', `${ORG},${OTHER}`, '--json'])).toMatchObject({
      run: 'aside',
      organizations: [ORG, OTHER],
      json: true,
    })
    expect(parseCommand(['--rebuild', '--dry-run'])).toEqual({
      run: 'aside',
      organizations: undefined,
      dryRun: true,
      json: false,
    })
  })

  it('refuses, naming the option, what does not go together or is not an option', () => {
    const refusal = (args: string[]) => {
      const command = parseCommand(args)
      return command.run === 'refused' ? command.message.split('\n')[0] : command.run
    }
    expect(refusal(['--org', ORG])).toBe('projector: --org and --dry-run go with --rebuild')
    expect(refusal(['--dry-run'])).toBe('projector: --org and --dry-run go with --rebuild')
    expect(refusal(['--json'])).toBe(
      'projector: --json goes with --rebuild --org or --rebuild --dry-run',
    )
    expect(refusal(['--rebuild', '--org', 'not-a-uuid'])).toMatch(/not-a-uuid/)
    expect(refusal(['--frobnicate'])).toMatch(/--frobnicate/)
    expect(parseCommand(['--help'])).toEqual({ run: 'help' })
  })
})
