# The shardmerge job image used by docker-compose.yml.
FROM eclipse-temurin:17-jre
RUN apt-get update && apt-get install -y --no-install-recommends python3.11 python3.11-venv maven \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /opt/shardmerge
COPY . .
RUN SHARDMERGE_PYTHON=python3.11 scripts/bootstrap
ENV PATH=/opt/shardmerge/.venv/bin:$PATH
CMD ["shardmerge", "--help"]
