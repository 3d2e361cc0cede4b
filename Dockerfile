# The shardmerge job image used by docker-compose.yml. .dockerignore keeps history, local
# environments and local data out of it; the job runs as an unprivileged user.
FROM eclipse-temurin:17-jre
RUN apt-get update && apt-get install -y --no-install-recommends python3.11 python3.11-venv maven \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --create-home --uid 10001 shardmerge \
    && mkdir /lake /checkpoint && chown shardmerge:shardmerge /lake /checkpoint
WORKDIR /opt/shardmerge
COPY --chown=shardmerge:shardmerge . .
USER shardmerge
RUN SHARDMERGE_PYTHON=python3.11 scripts/bootstrap
ENV PATH=/opt/shardmerge/.venv/bin:$PATH
CMD ["shardmerge", "--help"]
