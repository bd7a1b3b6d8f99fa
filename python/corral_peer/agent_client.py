"""A client of corral's own admission API (`corral.v1.Agent`) written with Python grpcio, as a
node agent in another language would embed corral: Admit a pod manifest (JSON), read it back
with GetPod and ListPods, and optionally remove it with PodRemoved; reported as JSON."""

import json

from . import stubs
from .channel import open_channel


def _container(c):
    return {
        "name": c.name,
        "kind": c.kind,
        "cpuset": c.cpuset,
        "exclusive_cpus": c.exclusive_cpus,
        "cpu_quota_disabled": c.cpu_quota_disabled,
        "numa_affinity": list(c.numa_affinity),
        "devices": {d.resource: list(d.device_ids) for d in c.devices},
        "memory": [{"type": m.type, "size": m.size, "numa": list(m.numa_affinity)} for m in c.memory],
        "allocated_resources_status": [
            {"name": s.name, "resources": [{"id": r.resource_id, "health": r.health} for r in s.resources]}
            for s in c.allocated_resources_status
        ],
    }


def _pod(p):
    return {
        "uid": p.uid,
        "namespace": p.namespace,
        "name": p.name,
        "containers": [_container(c) for c in p.containers],
    }


def run(args):
    pb, pb_grpc = stubs.load("corral/v1/agent.proto")
    with open(args.pod_json, "rb") as f:
        pod_json = f.read()
    uid = json.loads(pod_json)["metadata"]["uid"]
    with open_channel(args.socket, args.authority) as channel:
        stub = pb_grpc.AgentStub(channel)
        answer = stub.Admit(pb.AdmitRequest(pod_json=pod_json), timeout=args.timeout)
        result = {
            "ok": True,
            "admitted": answer.admitted,
            "reason": answer.reason,
            "message": answer.message,
        }
        if answer.admitted:
            result["allocation"] = _pod(answer.allocation)
            result["get"] = _pod(stub.GetPod(pb.GetPodRequest(pod_uid=uid), timeout=args.timeout))
        listed = stub.ListPods(pb.ListPodsRequest(), timeout=args.timeout)
        result["listed"] = sorted(p.uid for p in listed.pods)
        if args.remove:
            stub.PodRemoved(pb.PodRemovedRequest(pod_uid=uid), timeout=args.timeout)
            listed = stub.ListPods(pb.ListPodsRequest(), timeout=args.timeout)
            result["listed_after_removal"] = sorted(p.uid for p in listed.pods)
    return result
