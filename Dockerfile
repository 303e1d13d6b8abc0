# syntax=docker/dockerfile:1
#
# rkcm container image: a release build on the official Rust image, run on distroless/cc.
#
#   docker build -t rkcm:0.1.0 \
#     --build-arg RKCM_GIT_COMMIT="$(git rev-parse HEAD)" \
#     --build-arg RKCM_GIT_TREE_STATE="$(test -z "$(git status --porcelain)" && echo clean || echo dirty)" \
#     --build-arg RKCM_BUILD_DATE="$(date -u +%Y-%m-%dT%H:%M:%SZ)" .
#
# Why glibc + distroless/cc and not a static musl binary on scratch: rkcm is a multi-threaded
# tokio program and musl's allocator serialises allocations across threads (a well-known
# throughput loss for Rust servers on musl); the binary uses rustls/ring, so it needs no
# OpenSSL, only libc and libgcc_s, which distroless/cc provides with CA certificates and
# tzdata, no shell and no package manager. Builder and runtime are both Debian 12 (bookworm),
# so the glibc the binary links against is the one it runs on.

ARG RUST_VERSION=1.95

FROM rust:${RUST_VERSION}-slim-bookworm AS build
WORKDIR /src

# Version stamping, read at compile time by src/serve.rs build_info() (option_env!), exported
# as kubernetes_build_info{git_commit,git_tree_state,build_date,...} and printed by --version.
ARG RKCM_GIT_COMMIT=""
ARG RKCM_GIT_TREE_STATE=""
ARG RKCM_BUILD_DATE="1970-01-01T00:00:00Z"
ENV RKCM_GIT_COMMIT=${RKCM_GIT_COMMIT} \
    RKCM_GIT_TREE_STATE=${RKCM_GIT_TREE_STATE} \
    RKCM_BUILD_DATE=${RKCM_BUILD_DATE} \
    CARGO_TARGET_DIR=/cache/target

# Every workspace member's manifest must be present for cargo to load the workspace, so the
# whole context (trimmed by .dockerignore) is copied. The registry and target caches survive
# between builds (BuildKit cache mounts); the binary is copied out of the cache mount.
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/cache/target \
    RKCM_RUSTC_VERSION="$(rustc --version)" \
    cargo build --release --locked -p rkcm \
 && install -D -m 0755 /cache/target/release/rkcm /out/rkcm \
 && /out/rkcm --version

FROM gcr.io/distroless/cc-debian12:nonroot
ARG RKCM_GIT_COMMIT=""
ARG RKCM_BUILD_DATE="1970-01-01T00:00:00Z"
LABEL org.opencontainers.image.title="rkcm" \
      org.opencontainers.image.description="Kubernetes controller-manager for the workload controllers, written in Rust" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.revision="${RKCM_GIT_COMMIT}" \
      org.opencontainers.image.created="${RKCM_BUILD_DATE}"
COPY --from=build /out/rkcm /usr/local/bin/rkcm
# distroless "nonroot": UID/GID 65532. Numeric, so runAsNonRoot can verify it.
USER 65532:65532
# --secure-port default: /healthz, /livez, /readyz, /metrics over HTTPS.
EXPOSE 10257
ENTRYPOINT ["/usr/local/bin/rkcm"]
