"""Generate and import Python stubs for corral's .proto files (grpcio-tools, at run time)."""

import importlib
import os
import sys
import tempfile

from grpc_tools import protoc

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROTO_ROOT = os.path.join(_REPO, "proto", "proto")

_generated_dir = None


def _generate():
    global _generated_dir
    if _generated_dir is not None:
        return _generated_dir
    out = tempfile.mkdtemp(prefix="corral-peer-stubs-")
    protos = []
    for directory, _, files in os.walk(PROTO_ROOT):
        for name in files:
            if name.endswith(".proto"):
                protos.append(os.path.relpath(os.path.join(directory, name), PROTO_ROOT))
    for proto in sorted(protos):
        # Generated for every API; directories with '-' (dra-health) are generated but are
        # not importable by name, and nothing loads them yet.
        code = protoc.main(
            [
                "grpc_tools.protoc",
                "-I" + PROTO_ROOT,
                "--python_out=" + out,
                "--grpc_python_out=" + out,
                proto,
            ]
        )
        if code != 0:
            raise RuntimeError("protoc failed on %s (exit %d)" % (proto, code))
    sys.path.insert(0, out)
    _generated_dir = out
    return out


def load(package):
    """Return (messages_module, grpc_module) for a proto directory such as
    'deviceplugin/v1beta1' (its file is api.proto unless given as 'dir/file')."""
    _generate()
    if package.endswith(".proto"):
        base = package[: -len(".proto")]
    else:
        base = package + "/api"
    module = base.replace("/", ".")
    return importlib.import_module(module + "_pb2"), importlib.import_module(module + "_pb2_grpc")
