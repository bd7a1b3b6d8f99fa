"""Open grpcio channels to unix sockets with a chosen HTTP/2 :authority."""

import urllib.parse

import grpc

# How the client fills :authority, as real clients do:
# - "default": grpcio's own choice for a unix: target, no override;
# - "raw": the socket path itself, as grpc-go clients with a context dialer send it;
# - "encoded": the percent-encoded socket path;
# - "localhost": a plain valid authority;
# - "empty": an empty authority.
AUTHORITY_MODES = ("default", "raw", "encoded", "localhost", "empty")


def authority_for(mode, socket_path):
    if mode == "default":
        return None
    if mode == "raw":
        return socket_path
    if mode == "encoded":
        return urllib.parse.quote(socket_path, safe="")
    if mode == "localhost":
        return "localhost"
    if mode == "empty":
        return ""
    raise ValueError("unknown authority mode %r (one of %s)" % (mode, ", ".join(AUTHORITY_MODES)))


def open_channel(socket_path, mode):
    options = []
    authority = authority_for(mode, socket_path)
    if authority is not None:
        options.append(("grpc.default_authority", authority))
    return grpc.insecure_channel("unix:" + socket_path, options=options)
