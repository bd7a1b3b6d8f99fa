"""A podresources v1 client written with Python grpcio, as monitoring agents dial the
kubelet's pod-resources socket: List, GetAllocatableResources and Get, reported as JSON."""

from . import stubs
from .channel import open_channel


def _memory(m):
    return {
        "type": m.memory_type,
        "size": m.size,
        "numa": [n.ID for n in m.topology.nodes],
    }


def _container(c):
    return {
        "name": c.name,
        "cpu_ids": list(c.cpu_ids),
        "devices": [{"resource": d.resource_name, "ids": list(d.device_ids)} for d in c.devices],
        "memory": [_memory(m) for m in c.memory],
        "dynamic_resources": [
            {
                "claim_name": d.claim_name,
                "claim_namespace": d.claim_namespace,
                "claim_resources": [
                    {
                        "driver": r.driver_name,
                        "pool": r.pool_name,
                        "device": r.device_name,
                        "cdi_devices": [x.name for x in r.cdi_devices],
                        # optional string: absent is None, not "".
                        "share_id": r.share_id if r.HasField("share_id") else None,
                    }
                    for r in d.claim_resources
                ],
            }
            for d in c.dynamic_resources
        ],
    }


def _pod(p):
    return {
        "name": p.name,
        "namespace": p.namespace,
        "containers": [_container(c) for c in p.containers],
        # v1.37: a pod managed at pod level reports its whole CPU set and memory.
        "cpu_ids": list(p.cpu_ids),
        "memory": [_memory(m) for m in p.memory],
    }


def run(args):
    pb, pb_grpc = stubs.load("podresources/v1")
    with open_channel(args.socket, args.authority) as channel:
        stub = pb_grpc.PodResourcesListerStub(channel)
        listed = stub.List(pb.ListPodResourcesRequest(), timeout=args.timeout)
        allocatable = stub.GetAllocatableResources(pb.AllocatableResourcesRequest(), timeout=args.timeout)
        result = {
            "ok": True,
            "pods": [_pod(p) for p in listed.pod_resources],
            "allocatable_cpu_ids": list(allocatable.cpu_ids),
            "allocatable_memory": [_memory(m) for m in allocatable.memory],
        }
        if args.pod:
            namespace, _, name = args.pod.partition("/")
            got = stub.Get(pb.GetPodResourcesRequest(pod_name=name, pod_namespace=namespace), timeout=args.timeout)
            result["get"] = _pod(got.pod_resources)
    return result
