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

When it lists `v1alpha1.DRAResourceHealth` (what 1.36 drivers serve) or `v1.DRAResourceHealth`
in `--versions`, it serves that health service: every `NodeWatchResources` stream gets the
health of every prepared device at once and again at every change. A line `health STATUS
[MESSAGE]` on stdin (STATUS: Healthy, Unhealthy or Unknown) sets every device's health
(Healthy by default), `--health-timeout SECONDS` is sent as `health_check_timeout_seconds`.

It runs until stdin closes or it gets SIGTERM/SIGINT, printing one JSON object per line:
{"event": "ready", ...}, {"event": "registration", "registered": bool, "error": str},
{"event": "prepare" | "unprepare", "version": "v1" | "v1beta1", "claims": [{namespace,
name, uid}]}, {"event": "health_stream", "version": ...} when a stream opens,
{"event": "health", "status": ...} when told, and finally {"ok": true, "event": "stopped"}.
"""

import json
import os
import signal
import sys
import threading
import time
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


def _make_plugin(pb, pb_grpc, version, args, prepared, health):
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
                with health.cond:
                    prepared[claim.uid] = device
                    health.generation += 1
                    health.cond.notify_all()
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
                with health.cond:
                    prepared.pop(claim.uid, None)
                    health.generation += 1
                    health.cond.notify_all()
            return response

    return Plugin()


class Health:
    """The devices' health, shared by every stream; streams wake on each change."""

    def __init__(self):
        self.cond = threading.Condition()
        self.status = "Healthy"
        self.message = ""
        self.generation = 0
        self.stopped = False

    def set(self, status, message):
        with self.cond:
            self.status, self.message = status, message
            self.generation += 1
            self.cond.notify_all()

    def stop(self):
        with self.cond:
            self.stopped = True
            self.cond.notify_all()


_HEALTH_CODES = {"Unknown": 0, "Healthy": 1, "Unhealthy": 2}


def _make_health(pb, pb_grpc, version, args, prepared, health):
    class HealthService(pb_grpc.DRAResourceHealthServicer):
        def NodeWatchResources(self, request, context):
            emit({"event": "health_stream", "version": version})
            seen = -1
            while context.is_active():
                with health.cond:
                    while health.generation == seen and not health.stopped and context.is_active():
                        health.cond.wait(0.2)
                    if health.stopped:
                        return
                    seen = health.generation
                    status, message = health.status, health.message
                    devices = sorted(prepared.values())
                response = pb.NodeWatchResourcesResponse()
                for device in devices:
                    response.devices.add(
                        device=pb.DeviceIdentifier(pool_name=args.pool, device_name=device),
                        health=_HEALTH_CODES[status],
                        last_updated_time=int(time.time()),
                        health_check_timeout_seconds=args.health_timeout,
                        message=message,
                    )
                yield response

    return HealthService()


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
    health = Health()

    plugin_server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    served = []
    for version in ("v1", "v1beta1"):
        if version + ".DRAPlugin" in versions or (version == "v1" and not served and "v1beta1.DRAPlugin" not in versions):
            pb, pb_grpc = stubs.load("dra/" + version)
            pb_grpc.add_DRAPluginServicer_to_server(
                _make_plugin(pb, pb_grpc, version, args, prepared, health), plugin_server
            )
            served.append(version)
    for version in ("v1", "v1alpha1"):
        if version + ".DRAResourceHealth" in versions:
            pb, pb_grpc = stubs.load("dra-health/" + version)
            pb_grpc.add_DRAResourceHealthServicer_to_server(
                _make_health(pb, pb_grpc, version, args, prepared, health), plugin_server
            )
            served.append(version + ".DRAResourceHealth")
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
        # The parent closing our stdin (or dying) ends the driver; `health STATUS [MESSAGE]`
        # lines set the devices' health.
        try:
            for line in sys.stdin:
                words = line.split(None, 2)
                if len(words) >= 2 and words[0] == "health" and words[1] in _HEALTH_CODES:
                    message = words[2].strip() if len(words) == 3 else ""
                    health.set(words[1], message)
                    emit({"event": "health", "status": words[1], "message": message})
        finally:
            done.set()

    threading.Thread(target=watch_stdin, daemon=True).start()
    done.wait()
    health.stop()
    reg_server.stop(0.5).wait()
    plugin_server.stop(0.5).wait()
    for path in (reg_socket, endpoint):
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
    return {"ok": True, "event": "stopped", "prepared": sorted(prepared)}
