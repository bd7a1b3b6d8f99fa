"""corral's foreign gRPC peer: a Python grpcio client and server harness for interop tests.

Real device plugins, DRA drivers and monitoring agents are written in Go and Python; this
package plays their part against corral's unix-socket servers and clients. Stubs are
generated at run time from corral's own .proto files (proto/proto) with grpcio-tools, so
the Python side always speaks exactly the schema the Rust side was generated from.

Run `python -m corral_peer --help` for the commands.
"""
