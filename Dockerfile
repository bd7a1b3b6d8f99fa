# The node agent's image where a registry is reachable: docker build -t corral:dev .
# Offline, `cargo xtask image` assembles the same layout without a base image
# (target/image/corral-oci.tar): /usr/local/bin/corral, a `corral` user 65532 that owns the
# state dir /var/lib/corral, the same entrypoint and default arguments (the NRI DaemonSet's,
# but --node-name). The DaemonSets run it as root (the runtime's NRI socket is root's);
# `--user 65532` runs `corral --version`, `topology` and the other read-only commands.
FROM rust:1.89-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release -p corral-agent --bin corral --locked

FROM debian:bookworm-slim
RUN groupadd --system --gid 65532 corral \
 && useradd --system --uid 65532 --gid 65532 --home-dir /var/lib/corral --no-create-home \
      --shell /usr/sbin/nologin corral \
 && install -d -o 65532 -g 65532 -m 0755 /var/lib/corral
COPY --from=build /src/target/release/corral /usr/local/bin/corral
ENTRYPOINT ["/usr/local/bin/corral"]
CMD ["run", "-c", "/etc/corral/config.yaml", "--root", "/var/lib/corral", "--host-root", "/host"]
