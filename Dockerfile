# The corral node agent. Build: docker build -t corral:dev .
FROM rust:1.89-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release -p corral-agent --locked

FROM debian:bookworm-slim
COPY --from=build /src/target/release/corral /usr/local/bin/corral
COPY examples/pods /usr/share/corral/examples/pods
ENTRYPOINT ["/usr/local/bin/corral"]
CMD ["run", "--root", "/var/lib/corral", "--host-root", "/host"]
