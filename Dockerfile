# syntax=docker/dockerfile:1
# sweeper's image: a release build on Debian bookworm, run on distroless (glibc, no shell, no
# package manager) as the nonroot user. TLS is rustls with aws-lc-rs, so no OpenSSL is needed.
#
#   make image IMAGE=localhost/sweeper VERSION=dev      # docker build --build-arg VERSION=dev …
#   kind load docker-image localhost/sweeper:dev        # or push it to a registry the cluster pulls from
#   helm install sweeper deploy/helm/sweeper -n sweeper-system --create-namespace \
#     --set image.repository=localhost/sweeper,image.tag=dev --set external.dryRun=true
# (a dry run first: README, "Install with Helm"). Releases: ghcr.io/sweeper-dev/sweeper.

FROM rust:1.95-bookworm AS builder
WORKDIR /build
COPY . .
# Registry and target caches survive between builds; the binary is copied out of the cached
# target directory in the same step, because a cache mount is not part of the image.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/usr/local/cargo/git \
    --mount=type=cache,target=/build/target \
    cargo build --release --locked -p sweeper --bin sweeper \
 && cp target/release/sweeper /sweeper

FROM gcr.io/distroless/cc-debian12:nonroot
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="sweeper" \
      org.opencontainers.image.description="Garbage-collects what Kubernetes-managed systems leave behind" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.base.name="gcr.io/distroless/cc-debian12:nonroot"
COPY --from=builder /sweeper /sweeper
USER 65532:65532
# /healthz, /readyz, /metrics, /status and the graph queries.
EXPOSE 8080
ENTRYPOINT ["/sweeper"]
CMD ["run"]
