// The code a worker thread runs (lanes, the routing thread, the document build's workers): its
// TypeScript module bundled into one script of plain JavaScript, once per process.
//
// Until 2026-11-30 each worker registered tsx's loader on its own thread, then imported its module.
// Since Node 20.6 a loader's hooks run on a thread of their own, one per worker that registers
// them: about 25 MB of resident memory per worker (a worker that opens a SQLite file: 36-39 MB
// through tsx, 11 MB as a bundle), paid by every lane, the routing thread and every build worker.
// A bundle needs no loader. esbuild (what tsx itself compiles with) makes it in a child process,
// so that this stays synchronous for the constructors that start workers; packages stay outside
// it, required from where the module would import them, and each module's `import.meta.url` is
// its own file's.
//
// The modules that run on workers are declared where they are started (`workerModule`), and the
// first worker's source bundles them all in one child: a child each cost the main thread 150-210 ms
// before its first lane could start (2026-12-01), three times in a load.
import { execFileSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'

/** The bundler, run by `node --input-type=module`: the module's path is its first argument. */
const BUNDLER = `
import { build } from 'esbuild'
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { pathToFileURL } from 'node:url'
const moduleUrls = {
  name: 'module-urls',
  setup(b) {
    b.onResolve({ filter: /^[^./]/ }, (args) => ({
      path: args.path.startsWith('node:') ? args.path : createRequire(args.importer).resolve(args.path),
      external: true,
    }))
    b.onLoad({ filter: /\\.ts$/ }, (args) => ({
      contents: readFileSync(args.path, 'utf8').replaceAll(
        'import.meta.url',
        JSON.stringify(pathToFileURL(args.path).href),
      ),
      loader: 'ts',
    }))
  },
}
const entryPoints = process.argv.slice(1)
const bundles = await Promise.all(entryPoints.map(async (entry) => {
  const result = await build({
    entryPoints: [entry],
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: 'node20',
    write: false,
    logLevel: 'error',
    plugins: [moduleUrls],
  })
  return result.outputFiles[0].text
}))
process.stdout.write(JSON.stringify(bundles))
`

/** Modules declared to run on workers, not bundled yet. */
const declared = new Set<string>()
const bundles = new Map<string, string>()

/** Declares a module that runs on workers (bundled with the others, at the first one's start). */
export function workerModule(moduleUrl: URL): URL {
  if (!bundles.has(moduleUrl.href)) declared.add(moduleUrl.href)
  return moduleUrl
}

/** The source of a worker (`eval: true`) that runs the TypeScript module at `moduleUrl`. */
export function workerSource(moduleUrl: URL): string {
  const known = bundles.get(moduleUrl.href)
  if (known !== undefined) return known
  const modules = [moduleUrl.href, ...[...declared].filter((href) => href !== moduleUrl.href)]
  const sources = JSON.parse(
    execFileSync(
      process.execPath,
      ['--input-type=module', '-e', BUNDLER, ...modules.map((href) => fileURLToPath(href))],
      // Resolved from this project: esbuild is its dependency, wherever the process started.
      {
        cwd: fileURLToPath(new URL('../..', import.meta.url)),
        encoding: 'utf8',
        maxBuffer: 2 ** 28,
      },
    ),
  ) as string[]
  modules.forEach((href, i) => {
    bundles.set(href, sources[i]!)
    declared.delete(href)
  })
  return sources[0]!
}
