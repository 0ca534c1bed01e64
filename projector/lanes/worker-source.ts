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
const result = await build({
  entryPoints: [process.argv[1]],
  bundle: true,
  platform: 'node',
  format: 'cjs',
  target: 'node20',
  write: false,
  logLevel: 'error',
  plugins: [moduleUrls],
})
process.stdout.write(result.outputFiles[0].text)
`

const bundles = new Map<string, string>()

/** The source of a worker (`eval: true`) that runs the TypeScript module at `moduleUrl`. */
export function workerSource(moduleUrl: URL): string {
  let source = bundles.get(moduleUrl.href)
  if (source === undefined) {
    source = execFileSync(
      process.execPath,
      ['--input-type=module', '-e', BUNDLER, fileURLToPath(moduleUrl)],
      // Resolved from this project: esbuild is its dependency, wherever the process started.
      {
        cwd: fileURLToPath(new URL('../..', import.meta.url)),
        encoding: 'utf8',
        maxBuffer: 2 ** 28,
      },
    )
    bundles.set(moduleUrl.href, source)
  }
  return source
}
