# citygate as a container: Node 24 runs the TypeScript sources directly.
# The admin console (/console) is built in its own stage with the dev dependencies (Vite);
# the image keeps only its built files.
FROM node:24-slim AS console
WORKDIR /app
COPY package.json package-lock.json ./
COPY console ./console
COPY src/kernel/console.ts ./src/kernel/console.ts
RUN npm ci --ignore-scripts --no-audit --no-fund && node console/build.ts

FROM node:24-slim
WORKDIR /app
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=43127 \
    LOCAL_LOGIN=false \
    DATABASE_PATH=/data/citygate.sqlite
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund && npm cache clean --force
COPY src ./src
COPY bin ./bin
COPY --from=console /app/console/dist ./console/dist
VOLUME ["/data"]
EXPOSE 43127
# ready: the process takes traffic (its database reachable, not draining); see README, Health
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s \
  CMD node -e "fetch('http://127.0.0.1:'+process.env.PORT+'/health/ready').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"
CMD ["node", "src/cli/main.ts", "serve"]
