// Jars from Maven Central, resolved once per pom into the cache and reused by later runs.
// Each bundle is a pom under test/harness/maven/<name>/ listing what a Kafka distribution's libs/
// (or a Connect plugin directory) would hold; `mvn dependency:copy-dependencies` materializes it.
import { createHash } from 'node:crypto'
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs'
import { join, resolve } from 'node:path'
import { cacheDir, repoRoot } from './paths.ts'
import { HarnessError, runAsync, which } from './process.ts'

export type Bundle = 'kafka' | 'connect' | 'debezium'

/** The versions the poms pin; override with REPLICA_KAFKA_VERSION / REPLICA_DEBEZIUM_VERSION. */
export const versions = {
  kafka: process.env.REPLICA_KAFKA_VERSION ?? '3.9.2',
  debezium: process.env.REPLICA_DEBEZIUM_VERSION ?? '3.2.3.Final',
}

const DEPENDENCY_PLUGIN = 'org.apache.maven.plugins:maven-dependency-plugin:3.8.1'

function pomFile(bundle: Bundle): string {
  return resolve(repoRoot, 'test/harness/maven', bundle, 'pom.xml')
}

function properties(bundle: Bundle): Record<string, string> {
  return bundle === 'debezium'
    ? { 'debezium.version': versions.debezium }
    : { 'kafka.version': versions.kafka }
}

export function requireJava(): string {
  const java = which('java')
  if (java === undefined) {
    throw new HarnessError(
      'java not found on PATH: Kafka and Debezium need Java 17+ (apt-get install -y openjdk-17-jre-headless)',
    )
  }
  return java
}

/**
 * The directory holding every jar of `bundle`, downloading them on first use. The directory name
 * carries a hash of the pom and versions, so editing a pom resolves again instead of reusing
 * stale jars.
 */
export async function resolveBundle(bundle: Bundle): Promise<string> {
  const pom = pomFile(bundle)
  const props = properties(bundle)
  const key = createHash('sha256')
    .update(readFileSync(pom))
    .update(JSON.stringify(props))
    .digest('hex')
    .slice(0, 12)
  const version = Object.values(props)[0] ?? ''
  const target = join(cacheDir(), 'maven', `${bundle}-${version}-${key}`)
  if (existsSync(join(target, '.complete'))) return target

  const mvn = which('mvn')
  if (mvn === undefined) {
    throw new HarnessError(
      `mvn not found on PATH: the harness resolves ${bundle} from Maven Central with Maven (apt-get install -y maven)`,
    )
  }
  mkdirSync(join(cacheDir(), 'maven'), { recursive: true })
  // Resolve into a private dir and rename: concurrent runs never see a half-copied bundle.
  const staging = `${target}.tmp-${process.pid}-${Date.now()}`
  try {
    await runAsync(mvn, [
      '-q',
      '-B',
      '-f',
      pom,
      ...Object.entries(props).map(([name, value]) => `-D${name}=${value}`),
      `${DEPENDENCY_PLUGIN}:copy-dependencies`,
      `-DoutputDirectory=${staging}`,
      '-DincludeScope=runtime',
    ])
  } catch (error) {
    rmSync(staging, { recursive: true, force: true })
    const message = error instanceof Error ? error.message : String(error)
    throw new HarnessError(`mvn failed resolving ${bundle} (${pom}): ${message}`)
  }
  if (!readdirSync(staging).some((f) => f.endsWith('.jar'))) {
    throw new HarnessError(`mvn resolved no jars for ${bundle} into ${staging}`)
  }
  writeFileSync(join(staging, '.complete'), new Date().toISOString())
  try {
    renameSync(staging, target)
  } catch {
    // Another run finished first: its copy is as good as ours.
    rmSync(staging, { recursive: true, force: true })
  }
  return target
}

/** A java -cp value for one or more bundle directories (the JVM expands `dir/*`). */
export function classpath(...dirs: string[]): string {
  return dirs.map((d) => join(d, '*')).join(':')
}
