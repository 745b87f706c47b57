# loom in a container, for CI jobs and Kubernetes Indexed Jobs (`loom job plan --emit k8s-indexed-job`).
#
#   docker build -t loom-agent .                           # tier B: Landlock + seccomp, no bubblewrap
#   docker build --target with-bwrap -t loom-agent:bwrap .  # also bubblewrap, for tier A where user namespaces work
#   docker build --build-arg AGENT=examples/ci-matrix .     # the agent folder baked in at /opt/agent
#
# Which to use: a default Docker or containerd seccomp profile (Kubernetes' RuntimeDefault) blocks the user
# namespaces bubblewrap needs, so tier B is what works there; the image without bwrap cannot pick anything else.
# The bwrap flavour is for hosts that allow them (hostUsers: false pods, GitHub-hosted VMs); loom tries each tier
# and uses the first that works (`loom doctor` in the image shows it).
#
# The image runs as the non-root user 10001 and writes only to its volumes: /workspace (the checkout), /var/lib/loom
# (LOOM_DATA_HOME: sessions, run state), /tmp, and the results directory, so it runs with readOnlyRootFilesystem.
# The agent's providers and MCP packages are installed at build time (`loom install`, then `loom install --frozen`
# fails the build if anything drifted from .loom/lock.toml): a pod needs no registry at run time. Secrets are never
# baked in: pass them as environment variables or a LOOM_SECRETS_DIR volume.
ARG DEBIAN=bookworm

FROM rust:1-slim-${DEBIAN} AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p loom-cli -p loom-sandbox -p loom-broker \
 && install -D -m 0755 -t /out target/release/loom target/release/loom-sandbox-exec target/release/loom-shim

FROM debian:${DEBIAN}-slim AS base
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates git nodejs npm python3 \
 && rm -rf /var/lib/apt/lists/*
RUN useradd --uid 10001 --user-group --home-dir /var/lib/loom --create-home loom \
 && install -d -o 10001 -g 10001 /workspace /results
COPY --from=build /out/ /usr/local/bin/
ARG AGENT=examples/ci-matrix
COPY ${AGENT}/ /opt/agent/
RUN loom install /opt/agent/agent.toml \
 && loom install --frozen /opt/agent/agent.toml \
 && loom audit /opt/agent/agent.toml > /opt/agent/audit.txt
ENV LOOM_DATA_HOME=/var/lib/loom HOME=/var/lib/loom
WORKDIR /workspace

FROM base AS with-bwrap
RUN apt-get update \
 && apt-get install -y --no-install-recommends bubblewrap \
 && rm -rf /var/lib/apt/lists/*
USER 10001:10001
ENTRYPOINT ["loom"]

FROM base AS tier-b
USER 10001:10001
ENTRYPOINT ["loom"]
