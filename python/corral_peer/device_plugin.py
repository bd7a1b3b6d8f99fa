"""A device plugin written with Python grpcio: serves DevicePlugin on a unix socket,
registers with a kubelet (or corral) registration socket using a chosen HTTP/2 :authority,
streams its devices from ListAndWatch and answers Allocate.

It exits after it answered the requested number of Allocate calls (or at its deadline) and
reports what it was asked, so a test can check both sides.
"""

import threading
import time
from concurrent import futures

import grpc

from . import stubs
from .channel import open_channel


def serve(args):
    pb, pb_grpc = stubs.load("deviceplugin/v1beta1")
    numa = [int(n) for n in args.numa.split(",")] if args.numa else []
    base = args.resource.rsplit("/", 1)[-1]

    def device(i):
        d = pb.Device(ID="%s-%d" % (base, i), health="Healthy")
        if numa:
            d.topology.nodes.append(pb.NUMANode(ID=numa[i % len(numa)]))
        return d

    devices = [device(i) for i in range(args.devices)]
    done = threading.Event()
    allocations = []
    lock = threading.Lock()

    class Plugin(pb_grpc.DevicePluginServicer):
        def GetDevicePluginOptions(self, request, context):
            return pb.DevicePluginOptions()

        def ListAndWatch(self, request, context):
            yield pb.ListAndWatchResponse(devices=devices)
            while not done.is_set() and context.is_active():
                done.wait(0.05)

        def GetPreferredAllocation(self, request, context):
            context.abort(grpc.StatusCode.UNIMPLEMENTED, "not offered")

        def Allocate(self, request, context):
            response = pb.AllocateResponse()
            for container in request.container_requests:
                ids = list(container.devices_ids)
                with lock:
                    allocations.append(ids)
                r = response.container_responses.add()
                r.envs["PYTHON_PLUGIN_DEVICES"] = ",".join(ids)
                for i in ids:
                    r.devices.add(container_path="/dev/" + i, host_path="/dev/python/" + i, permissions="rw")
            with lock:
                if len(allocations) >= args.exit_after_allocations:
                    # Let the answer leave before shutting down.
                    threading.Timer(0.2, done.set).start()
            return response

        def PreStartContainer(self, request, context):
            return pb.PreStartContainerResponse()

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    pb_grpc.add_DevicePluginServicer_to_server(Plugin(), server)
    server.add_insecure_port("unix:" + args.socket)
    server.start()
    try:
        endpoint = args.socket.rsplit("/", 1)[-1]
        with open_channel(args.kubelet_socket, args.authority) as channel:
            pb_grpc.RegistrationStub(channel).Register(
                pb.RegisterRequest(version="v1beta1", endpoint=endpoint, resource_name=args.resource),
                timeout=args.timeout,
            )
        finished = done.wait(args.timeout)
    finally:
        done.set()
        server.stop(grace=0.5).wait()
    with lock:
        return {"ok": finished, "allocations": allocations, "devices": len(devices)}
