# citygate as a container: Node 24 runs the TypeScript sources directly.
FROM node:24-slim
WORKDIR /app
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=43127 \
    LOCAL_LOGIN=false \
    DATABASE_PATH=/data/citygate.sqlite
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY src ./src
COPY bin ./bin
VOLUME ["/data"]
EXPOSE 43127
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s \
  CMD node -e "fetch('http://127.0.0.1:'+process.env.PORT+'/health').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"
CMD ["node", "src/cli/main.ts", "serve"]
