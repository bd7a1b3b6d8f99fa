"""Generate and import Python stubs for corral's .proto files (grpcio-tools, at run time).

Stubs are generated once per content of proto/proto into a cache directory inside the
virtualenv (`<venv>/corral-stubs/<hash>`), written to a temporary directory first and renamed
into place, so concurrent peers neither race nor leave directories behind. When the
interpreter's prefix is not writable, a temporary directory removed at exit is used instead.
"""

import atexit
import hashlib
import importlib
import os
import shutil
import sys
import tempfile

from grpc_tools import protoc

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROTO_ROOT = os.path.join(_REPO, "proto", "proto")

_generated_dir = None


def _protos():
    protos = []
    for directory, _, files in os.walk(PROTO_ROOT):
        for name in files:
            if name.endswith(".proto"):
                protos.append(os.path.relpath(os.path.join(directory, name), PROTO_ROOT))
    return sorted(protos)


def _content_hash(protos):
    digest = hashlib.sha256()
    for proto in protos:
        digest.update(proto.encode())
        with open(os.path.join(PROTO_ROOT, proto), "rb") as f:
            digest.update(f.read())
    return digest.hexdigest()[:16]


def _compile_into(out, protos):
    for proto in protos:
        code = protoc.main(
            ["grpc_tools.protoc", "-I" + PROTO_ROOT, "--python_out=" + out, "--grpc_python_out=" + out, proto]
        )
        if code != 0:
            raise RuntimeError("protoc failed on %s (exit %d)" % (proto, code))


def _generate():
    global _generated_dir
    if _generated_dir is not None:
        return _generated_dir
    protos = _protos()
    cache_root = os.path.join(sys.prefix, "corral-stubs")
    target = os.path.join(cache_root, _content_hash(protos))
    try:
        if not os.path.isdir(target):
            os.makedirs(cache_root, exist_ok=True)
            scratch = tempfile.mkdtemp(prefix=".building-", dir=cache_root)
            try:
                _compile_into(scratch, protos)
                os.rename(scratch, target)
            except OSError:
                # Another peer renamed its copy first: use that one.
                shutil.rmtree(scratch, ignore_errors=True)
                if not os.path.isdir(target):
                    raise
    except PermissionError:
        target = tempfile.mkdtemp(prefix="corral-peer-stubs-")
        atexit.register(shutil.rmtree, target, True)
        _compile_into(target, protos)
    sys.path.insert(0, target)
    _generated_dir = target
    return target


def load(package):
    """Return (messages_module, grpc_module) for a proto directory such as
    'deviceplugin/v1beta1' (its file is api.proto unless given as 'dir/file')."""
    _generate()
    if package.endswith(".proto"):
        base = package[: -len(".proto")]
    else:
        base = package + "/api"
    # protoc's Python generator writes `dra-health/...` as `dra_health/...`.
    module = base.replace("/", ".").replace("-", "_")
    return importlib.import_module(module + "_pb2"), importlib.import_module(module + "_pb2_grpc")
