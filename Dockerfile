# The replica's image: one image, two commands (`npm run projector`, `npm run api`), as in
# docker-compose.yml. TypeScript runs through tsx; there is no build step.

# Dependencies are installed in a stage with a compiler, in case better-sqlite3 has no prebuilt
# binary for the platform; the runtime stage stays slim.
FROM node:20-slim AS deps
RUN apt-get update \
  && apt-get install -y --no-install-recommends python3 make g++ \
  && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev && npm cache clean --force

FROM node:20-slim
ENV NODE_ENV=production
WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
COPY package.json package-lock.json tsconfig.json ./
COPY src ./src
COPY schema ./schema
COPY projector ./projector
COPY api ./api
COPY scripts ./scripts
RUN mkdir -p /data && chown node:node /data
ENV DATA_DIR=/data
VOLUME ["/data"]
USER node
EXPOSE 8080
CMD ["npm", "run", "api"]
