import { defineConfig } from 'drizzle-kit'

export default defineConfig({
  dialect: 'sqlite',
  schema: './schema/organization-db.ts',
  out: './schema/migrations/organization',
})
