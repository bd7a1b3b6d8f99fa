"""A DRA driver written with grpcio: the foreign peer for corral's DRA plugin registry and
DRAPlugin client.

It registers through a plugin registration directory (pluginregistration v1 `Registration`
on `<registry-dir>/<driver>-reg.sock`) and serves `DRAPlugin` (v1 and/or v1beta1, as it
advertises) on `<plugin-dir>/dra.sock`, as drivers built on upstream's `kubeletplugin`
helper do; with `--pod-uid UID`, as one instance of a rolling update (the helper's
`RollingUpdate(UID)`), on `<driver>-<UID>-reg.sock` and `<plugin-dir>/dra-<UID>.sock`. Every
claim gets one fake device, `<cdi-kind>=py-<claim uid>`, for all requests; with
`--share-id TEMPLATE` its DRAPlugin v1 `share_id` is TEMPLATE with `{uid}` replaced by the
claim uid (v1beta1 has no such field).

It runs until stdin closes or it gets SIGTERM/SIGINT, printing one JSON object per line:
{"event": "ready", ...}, {"event": "registration", "registered": bool, "error": str},
{"event": "prepare" | "unprepare", "version": "v1" | "v1beta1", "claims": [{namespace,
name, uid}]} and finally {"ok": true, "event": "stopped"}.
"""

import json
import os
import signal
import sys
import threading
from concurrent import futures

import grpc

from . import stubs

_print_lock = threading.Lock()


def emit(obj):
    with _print_lock:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()


def _claims(request):
    return [{"namespace": c.namespace, "name": c.name, "uid": c.uid} for c in request.claims]


def _make_plugin(pb, pb_grpc, version, args, prepared):
    class Plugin(pb_grpc.DRAPluginServicer):
        def NodePrepareResources(self, request, context):
            emit({"event": "prepare", "version": version, "claims": _claims(request)})
            response = pb.NodePrepareResourcesResponse()
            for claim in request.claims:
                entry = response.claims[claim.uid]
                if args.fail:
                    entry.error = args.fail
                    continue
                device = "py-" + claim.uid
                prepared[claim.uid] = device
                added = entry.devices.add(
                    pool_name=args.pool,
                    device_name=device,
                    cdi_device_ids=[args.cdi_kind + "=" + device],
                )
                if args.share_id is not None and version == "v1":
                    added.share_id = args.share_id.replace("{uid}", claim.uid)
            return response

        def NodeUnprepareResources(self, request, context):
            emit({"event": "unprepare", "version": version, "claims": _claims(request)})
            response = pb.NodeUnprepareResourcesResponse()
            for claim in request.claims:
                entry = response.claims[claim.uid]
                if args.fail:
                    entry.error = args.fail
                    continue
                prepared.pop(claim.uid, None)
            return response

    return Plugin()


def run(args):
    reg_pb, reg_grpc = stubs.load("pluginregistration/v1")
    versions = [v for v in args.versions.split(",") if v]
    if args.pod_uid:
        endpoint = os.path.join(args.plugin_dir, "dra-" + args.pod_uid + ".sock")
        reg_socket = os.path.join(args.registry_dir, args.driver + "-" + args.pod_uid + "-reg.sock")
    else:
        endpoint = os.path.join(args.plugin_dir, "dra.sock")
        reg_socket = os.path.join(args.registry_dir, args.driver + "-reg.sock")
    os.makedirs(args.plugin_dir, exist_ok=True)
    os.makedirs(args.registry_dir, exist_ok=True)
    prepared = {}

    plugin_server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    served = []
    for version in ("v1", "v1beta1"):
        if version + ".DRAPlugin" in versions or (version == "v1" and not served and "v1beta1.DRAPlugin" not in versions):
            pb, pb_grpc = stubs.load("dra/" + version)
            pb_grpc.add_DRAPluginServicer_to_server(_make_plugin(pb, pb_grpc, version, args, prepared), plugin_server)
            served.append(version)
    plugin_server.add_insecure_port("unix:" + endpoint)
    plugin_server.start()

    class Registration(reg_grpc.RegistrationServicer):
        def GetInfo(self, request, context):
            return reg_pb.PluginInfo(
                type=args.type, name=args.driver, endpoint=endpoint, supported_versions=versions
            )

        def NotifyRegistrationStatus(self, request, context):
            emit({"event": "registration", "registered": request.plugin_registered, "error": request.error})
            return reg_pb.RegistrationStatusResponse()

    reg_server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    reg_grpc.add_RegistrationServicer_to_server(Registration(), reg_server)
    reg_server.add_insecure_port("unix:" + reg_socket)
    reg_server.start()
    emit({"event": "ready", "registration_socket": reg_socket, "endpoint": endpoint, "served": served})

    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())

    def watch_stdin():
        # The parent closing our stdin (or dying) ends the driver.
        try:
            while sys.stdin.read(1):
                pass
        finally:
            done.set()

    threading.Thread(target=watch_stdin, daemon=True).start()
    done.wait()
    reg_server.stop(0.5).wait()
    plugin_server.stop(0.5).wait()
    for path in (reg_socket, endpoint):
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
    return {"ok": True, "event": "stopped", "prepared": sorted(prepared)}
