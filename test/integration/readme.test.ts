// README as a platform engineer reads it on day one, held to the code. Every command its code
// blocks and inline code show names an npm script that exists; the projector's and verify's command
// lines parse as shown (all their argument checks pass); the ones that need no Kafka run for real
// (`--from-file` on a generated file, then `npm run api` serving what it wrote); the configuration
// tables (README's, and verify's in docs/operations.md) name exactly the variables src/config.ts
// reads, with its defaults; and every relative link
// of the project's Markdown leads to a file and heading that exist. `npm run demo` is run by
// demo.test.ts, and `npm test` and the benchmarks are not run here.
import { spawn } from 'node:child_process'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { dirname, join, normalize, relative } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { z } from 'zod'
import { writeDataset, type DatasetSummary } from '../../scripts/dataset/generate.ts'
import { environmentSchemas } from '../../src/config.ts'
import { currentGeneration } from '../../src/layout.ts'
import { freePort, makeTempDir, startProcess, waitFor } from '../harness/process.ts'
import { repoRoot } from '../support/processes.ts'

const readme = readFileSync(join(repoRoot, 'README.md'), 'utf8')
const scripts = Object.keys(
  (JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as { scripts: object }).scripts,
)

interface Section {
  heading: string
  lines: string[]
}

/**
 * A Markdown page's sections of one heading level (2: `## `), each with its lines up to the next
 * heading of that level or above; headings in code blocks do not count.
 */
function sections(markdown: string, level = 2): Section[] {
  const out: Section[] = [{ heading: '', lines: [] }]
  let fenced = false
  for (const line of markdown.split('\n')) {
    if (line.startsWith('```')) fenced = !fenced
    const heading = fenced ? null : /^(#+) (.*)$/.exec(line)
    if (heading !== null && heading[1]!.length <= level) {
      out.push({ heading: heading[1]!.length === level ? heading[2]!.trim() : '', lines: [] })
    } else out.at(-1)!.lines.push(line)
  }
  return out
}

function section(heading: string, markdown = readme, level = 2, page = 'README'): Section {
  const found = sections(markdown, level).find((s) => s.heading === heading)
  if (found === undefined) {
    throw new Error(`${page} has no section "${'#'.repeat(level)} ${heading}"`)
  }
  return found
}

/** The shell lines of a section's ```sh blocks, continuation lines joined, comments removed. */
function shellLines(s: Section): string[] {
  const out: string[] = []
  let inShell = false
  let pending = ''
  for (const line of s.lines) {
    if (line.startsWith('```')) {
      inShell = !inShell && line.trim() === '```sh'
      continue
    }
    if (!inShell) continue
    const text = pending + line.replace(/(^|\s)#.*$/, '').trim()
    if (text.endsWith('\\')) {
      pending = text.slice(0, -1) + ' '
      continue
    }
    pending = ''
    if (text !== '') out.push(text)
  }
  return out
}

/** The inline code spans of README that are npm commands. */
function inlineCommands(markdown: string): string[] {
  const withoutBlocks = markdown.replace(/```[\s\S]*?```/g, '')
  return [...withoutBlocks.matchAll(/`(npm (?:run|test)[^`]*)`/g)].map((m) => m[1]!)
}

interface Command {
  /** As README shows it. */
  shown: string
  env: Record<string, string>
  script: string
  /** What follows `--`, placeholders (`ID`, `[...]`) made concrete. */
  args: string[]
}

const ORG_A = '0b6cbe1e-8c0a-4f3e-9d55-6d3b9b1f0a01'
const ORG_B = '0b6cbe1e-8c0a-4f3e-9d55-6d3b9b1f0a02'

/** The npm commands of one shell line (`npm ci && npm run demo` is two; `npm ci` is none). */
function commands(line: string): Command[] {
  return line.split('&&').flatMap((part): Command[] => {
    const words = part.trim().split(/\s+/)
    const env: Record<string, string> = {}
    while (words[0] !== undefined && /^[A-Z_][A-Z0-9_]*=/.test(words[0])) {
      const [name, ...value] = words.shift()!.split('=')
      env[name!] = value.join('=')
    }
    if (words[0] !== 'npm') return []
    let script: string
    let rest: string[]
    if (words[1] === 'test') [script, rest] = ['test', words.slice(2)]
    else if (words[1] === 'run' && words[2] !== undefined)
      [script, rest] = [words[2], words.slice(3)]
    else return []
    // `[-- --org ID]... [--repair]`: the optional parts, all given.
    const concrete = rest
      .map((w) => w.replace(/[[\]]|\.\.\./g, ''))
      .filter((w) => w !== '')
      .map((w) => (w === 'ID[,ID]' || w === 'ID,ID' ? `${ORG_A},${ORG_B}` : w === 'ID' ? ORG_A : w))
    const dashes = concrete.indexOf('--')
    return [
      {
        shown: part.trim(),
        env,
        script,
        args: dashes === -1 ? [] : concrete.slice(dashes + 1),
      },
    ]
  })
}

const QUICK_START = section('Quick start')
const RUNNING = section('Running it for real')
const OPERATORS = section("Operators' commands")
const DEVELOPMENT = section('Development')

const blockCommands = [QUICK_START, RUNNING, OPERATORS, DEVELOPMENT].flatMap((s) =>
  shellLines(s).flatMap(commands),
)
const allCommands = [...blockCommands, ...inlineCommands(readme).flatMap(commands)]

interface Run {
  code: number | null
  stdout: string
  stderr: string
}

/** `npm run <script> -- <args>` from the repository, as a user types it. */
function npm(script: string, args: string[], env: Record<string, string>): Promise<Run> {
  return new Promise((resolve, reject) => {
    const npmArgs = script === 'test' ? ['test'] : ['run', '--silent', script]
    const child = spawn('npm', [...npmArgs, ...(args.length > 0 ? ['--', ...args] : [])], {
      cwd: repoRoot,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()))
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()))
    const timer = setTimeout(() => child.kill('SIGKILL'), 110_000)
    child.on('error', reject)
    child.on('close', (code) => {
      clearTimeout(timer)
      resolve({ code, stdout, stderr })
    })
  })
}

/** The variables a command reads, by the schema of its configuration. */
function schemaOf(name: keyof typeof environmentSchemas): Record<string, z.ZodType> {
  const shape: Record<string, z.ZodType> = environmentSchemas[name].shape
  return shape
}

/** A parsed value as README's tables write it: `16777216`, `info`, `127.0.0.1:9092`. */
function shown(value: unknown): string {
  if (Array.isArray(value)) return value.map(shown).join(',')
  return typeof value === 'string' ? value : JSON.stringify(value)
}

const CONFIGURED: Record<string, keyof typeof environmentSchemas> = {
  projector: 'projector',
  verify: 'verify',
  api: 'api',
  demo: 'demo',
}

describe("README's commands", () => {
  it('shows the quick start and the operators commands', () => {
    expect(shellLines(QUICK_START)).toEqual(['npm ci && npm run demo', 'npm test'])
    const operators = blockCommands.filter((c) => ['projector', 'verify'].includes(c.script))
    expect(operators.map((c) => c.args[0] ?? '(none)')).toEqual(
      expect.arrayContaining(['(none)', '--from-file', '--rebuild', '--org', '--help']),
    )
  })

  it('names only npm scripts that exist', () => {
    for (const command of allCommands) {
      expect(scripts, `README: ${command.shown}`).toContain(command.script)
    }
  })

  it('sets only variables that the command reads', () => {
    for (const command of allCommands) {
      const config = CONFIGURED[command.script]
      if (config === undefined) continue
      for (const name of Object.keys(command.env)) {
        expect(Object.keys(schemaOf(config)), `README: ${command.shown}`).toContain(name)
      }
    }
  })

  // Every argument check comes before the configuration is read: with a LOG_LEVEL no command
  // takes, a command line that parses ends at the configuration (exit 2, naming LOG_LEVEL),
  // touching nothing; one that does not parse ends earlier, naming the argument.
  const parsed = [
    ...new Map(
      allCommands
        .filter((c) => c.script === 'projector' || c.script === 'verify')
        .map((c) => [c.shown, c]),
    ).values(),
  ]
  it.each(parsed.map((c) => [c.shown, c] as const))('parses as shown: %s', async (_, command) => {
    const run = await npm(command.script, command.args, {
      ...command.env,
      LOG_LEVEL: 'not-a-level',
    })
    if (command.args.includes('--help')) {
      expect(run.code, run.stderr).toBe(0)
      expect(run.stdout).toMatch(new RegExp(`^usage: npm run ${command.script}`))
      return
    }
    expect(run.stderr).toMatch(/invalid configuration:\n\s+LOG_LEVEL/)
    expect(run.stderr).not.toContain('usage:')
    expect(run.code).toBe(2)
  })
})

describe("README's commands that need no Kafka, run", () => {
  let tmp: ReturnType<typeof makeTempDir>
  let dataset: DatasetSummary
  let eventsFile: string

  beforeAll(async () => {
    tmp = makeTempDir('readme')
    eventsFile = join(tmp.path, 'events.ndjson')
    dataset = await writeDataset(eventsFile, {
      organizations: 2,
      providersPerOrganization: 20,
      schemas: false,
    })
  })

  afterAll(() => tmp?.remove())

  it('`--from-file`, then `npm run api` serving what it wrote', async () => {
    const fromFile = blockCommands.find((c) => c.args[0] === '--from-file')
    if (fromFile === undefined) throw new Error("README's operators' commands show no --from-file")
    const dataDir = join(tmp.path, 'data')
    const args = fromFile.args.map((a) => (a === 'events.ndjson' ? eventsFile : a))
    const applied = await npm(fromFile.script, args, { DATA_DIR: dataDir, LOG_LEVEL: 'warn' })
    expect(applied.code, applied.stderr).toBe(0)
    expect(currentGeneration(dataDir)).toBeDefined()

    const api = blockCommands.find((c) => c.script === 'api')
    if (api === undefined) throw new Error('README shows no npm run api')
    expect(Object.keys(api.env).sort()).toEqual(['DATA_DIR', 'PORT'])
    const [port, adminPort] = [await freePort(), await freePort()]
    const serving = startProcess('api', 'npm', ['run', api.script], {
      cwd: repoRoot,
      env: {
        PATH: process.env.PATH ?? '',
        HOME: process.env.HOME ?? tmp.path,
        DATA_DIR: dataDir,
        PORT: String(port),
        // Beside whatever else runs on this machine: the admin port, unshown, is free too.
        ADMIN_PORT: String(adminPort),
      },
      logFile: join(tmp.path, 'api.log'),
    })
    try {
      const organization = dataset.organizations[0]!
      const key = organization.keys.find((k) => k.scopes.includes('providers:read:sensitive'))!
      const status = await waitFor(
        'npm run api to serve the file',
        async () => {
          try {
            const response = await fetch(`http://127.0.0.1:${port}/api/v1/providers?limit=5`, {
              headers: { authorization: `Bearer ${key.rawKey}` },
            })
            return response.status
          } catch {
            return undefined
          }
        },
        { timeoutMs: 60_000, process: serving },
      )
      expect(status, serving.logTail()).toBe(200)
    } finally {
      await serving.stop(5_000)
    }
  })
})

describe("the configuration tables (README's, and verify's in docs/operations.md)", () => {
  interface Row {
    names: string[]
    defaults: string
  }

  /** Each table of these lines, under the line that introduces it. */
  function tables(lines: string[]): Map<string, Row[]> {
    const out = new Map<string, Row[]>()
    let label = ''
    for (const line of lines) {
      if (!line.startsWith('|')) {
        if (line.trim() !== '') label = line.trim()
        continue
      }
      const cells = line
        .split('|')
        .slice(1, -1)
        .map((c) => c.trim())
      const names = [...(cells[0] ?? '').matchAll(/`([A-Z_][A-Z0-9_]*)`/g)].map((m) => m[1]!)
      if (names.length === 0) continue
      out.set(label, [...(out.get(label) ?? []), { names, defaults: cells[1] ?? '' }])
    }
    return out
  }

  const byTable = tables(section('Configuration').lines)
  // verify's own variables sit beside its grants, in docs/operations.md.
  const verifyConfiguration = section(
    "verify's configuration",
    readFileSync(join(repoRoot, 'docs/operations.md'), 'utf8'),
    3,
    'docs/operations.md',
  )
  const table = (prefix: string): Row[] => {
    const found = [...byTable].find(([label]) => label.startsWith(prefix))
    if (found === undefined) throw new Error(`README's configuration has no table "${prefix}..."`)
    return found[1]
  }
  const projectorNames = Object.keys(schemaOf('projector'))
  const cases: Array<[string, Row[], string[], keyof typeof environmentSchemas]> = [
    ['projector', table('Projector'), projectorNames, 'projector'],
    ['api', table('Api'), Object.keys(schemaOf('api')), 'api'],
    [
      'verify',
      [...tables(verifyConfiguration.lines).values()].flat(),
      Object.keys(schemaOf('verify')).filter((n) => !projectorNames.includes(n)),
      'verify',
    ],
  ]

  it.each(cases)('the %s table names exactly the variables it reads', (_, rows, read) => {
    expect(rows.flatMap((r) => r.names).sort()).toEqual([...read].sort())
  })

  // A default shown as literals (`127.0.0.1`, `9464`) is the schema's; one shown in words
  // ("number of cores", "`<prefix>.dlq`", from other settings) is computed where it is loaded.
  it.each(cases)('the %s table shows its defaults', (_, rows, __, config) => {
    const shape = schemaOf(config)
    for (const { names, defaults } of rows) {
      const literals = [...defaults.matchAll(/`([^`]*)`/g)].map((m) => m[1]!)
      if (literals.length !== names.length || defaults.replace(/`[^`]*`|,|\s/g, '') !== '') continue
      names.forEach((name, i) => {
        const parsed = shape[name]!.safeParse(undefined)
        // Skipped: the api's DATA_DIR, which parses only where it exists, and defaults left
        // unset here and computed where the configuration is loaded.
        if (!parsed.success || parsed.data === undefined) return
        expect(shown(parsed.data), name).toBe(literals[i])
      })
    }
  })
})

describe("the project's Markdown links", () => {
  function markdownFiles(dir: string): string[] {
    return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
      const path = join(dir, entry.name)
      if (entry.isDirectory()) {
        return ['node_modules', '.cache', '.git', 'data'].includes(entry.name)
          ? []
          : markdownFiles(path)
      }
      return entry.name.endsWith('.md') ? [path] : []
    })
  }

  /** GitHub's anchors of a file's headings. */
  function anchors(path: string): Set<string> {
    const out = new Set<string>()
    const seen = new Map<string, number>()
    let fenced = false
    for (const line of readFileSync(path, 'utf8').split('\n')) {
      if (line.startsWith('```')) fenced = !fenced
      const heading = fenced ? null : /^#+\s+(.*)$/.exec(line)
      if (heading === null) continue
      const slug = heading[1]!
        .trim()
        .toLowerCase()
        .replace(/[^\p{L}\p{N}_\- ]/gu, '')
        .replace(/ /g, '-')
      const n = seen.get(slug) ?? 0
      seen.set(slug, n + 1)
      out.add(n === 0 ? slug : `${slug}-${n}`)
    }
    return out
  }

  it('lead to files and headings that exist', () => {
    const broken: string[] = []
    for (const file of markdownFiles(repoRoot)) {
      const text = readFileSync(file, 'utf8').replace(/```[\s\S]*?```/g, '')
      for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        if (/^[a-z]+:/.test(target!)) continue
        const [path, anchor] = target!.split('#') as [string, string | undefined]
        const resolved = path === '' ? file : normalize(join(dirname(file), path))
        // The contract lives beside the project, in ../shared.
        if (relative(repoRoot, resolved).startsWith('..')) continue
        const where = `${relative(repoRoot, file)}: ${target}`
        if (!existsSync(resolved)) broken.push(`${where} (no such file)`)
        else if (anchor !== undefined && !anchors(resolved).has(anchor)) {
          broken.push(`${where} (no such heading)`)
        }
      }
    }
    expect(broken).toEqual([])
  })
})
