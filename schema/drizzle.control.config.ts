import { defineConfig } from 'drizzle-kit'

export default defineConfig({
  dialect: 'sqlite',
  schema: './schema/control-db.ts',
  out: './schema/migrations/control',
})
