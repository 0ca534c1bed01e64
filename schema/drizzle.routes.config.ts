import { defineConfig } from 'drizzle-kit'

export default defineConfig({
  dialect: 'sqlite',
  schema: './schema/routes-db.ts',
  out: './schema/migrations/routes',
})
