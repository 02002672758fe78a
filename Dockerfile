# The msgstorm generator image for `msgstorm k8s` (docs/kubernetes.md):
#   docker build -t REGISTRY/msgstorm:TAG .
# Two stages: the release build in the Rust image, then only the binary on distroless's
# glibc base (libc and libgcc, no shell, no package manager; about 30 MB in all), run as
# the image's non-root user.

FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
# The release profile has no debug info already; the image drops the symbol table too
# (panics then name no functions; profile with `--profile profiling` outside the image).
ENV CARGO_PROFILE_RELEASE_STRIP=symbols
RUN cargo build --release --locked --bin msgstorm

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /src/target/release/msgstorm /usr/local/bin/msgstorm
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/msgstorm"]
