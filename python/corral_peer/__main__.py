"""Command line of corral's foreign gRPC peer. Every command prints one JSON object."""

import argparse
import json
import sys

import grpc

from . import agent_client, device_plugin, dra_driver, podresources_client, stubs
from .channel import AUTHORITY_MODES, open_channel


def _register(args):
    pb, pb_grpc = stubs.load("deviceplugin/v1beta1")
    with open_channel(args.socket, args.authority) as channel:
        stub = pb_grpc.RegistrationStub(channel)
        stub.Register(
            pb.RegisterRequest(
                version=args.version,
                endpoint=args.endpoint + "x" * args.endpoint_padding,
                resource_name=args.resource,
                options=pb.DevicePluginOptions(pre_start_required=args.pre_start_required),
            ),
            timeout=args.timeout,
        )
    return {"ok": True}


def _list_and_watch(args):
    pb, pb_grpc = stubs.load("deviceplugin/v1beta1")
    lists = []
    with open_channel(args.socket, args.authority) as channel:
        stub = pb_grpc.DevicePluginStub(channel)
        stream = stub.ListAndWatch(pb.Empty(), timeout=args.timeout)
        for response in stream:
            lists.append(
                [
                    {
                        "id": d.ID,
                        "health": d.health,
                        "numa": [n.ID for n in d.topology.nodes] if d.HasField("topology") else None,
                    }
                    for d in response.devices
                ]
            )
            if len(lists) >= args.count:
                stream.cancel()
                break
    return {"ok": True, "lists": lists}


def main(argv=None):
    parser = argparse.ArgumentParser(prog="corral_peer", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    def common(p):
        p.add_argument("--socket", required=True, help="unix socket path to dial")
        p.add_argument("--authority", choices=AUTHORITY_MODES, default="default")
        p.add_argument("--timeout", type=float, default=10.0, help="deadline in seconds")

    p = sub.add_parser("register", help="call v1beta1.Registration/Register")
    common(p)
    p.add_argument("--version", default="v1beta1")
    p.add_argument("--endpoint", default="python-plugin.sock")
    p.add_argument("--resource", default="example.com/python")
    p.add_argument("--pre-start-required", action="store_true")
    p.add_argument(
        "--endpoint-padding", type=int, default=0, help="append this many bytes to the endpoint (large messages)"
    )
    p.set_defaults(run=_register)

    p = sub.add_parser("list-and-watch", help="read N lists from v1beta1.DevicePlugin/ListAndWatch")
    common(p)
    p.add_argument("--count", type=int, default=1)
    p.set_defaults(run=_list_and_watch)

    p = sub.add_parser("dra-driver", help="run a DRA driver (registration + DRAPlugin) until stdin closes")
    p.add_argument("--driver", required=True, help="driver name to register as")
    p.add_argument("--registry-dir", required=True, help="plugin registration directory")
    p.add_argument("--plugin-dir", required=True, help="directory of the DRAPlugin socket (dra.sock)")
    p.add_argument("--versions", default="v1.DRAPlugin,v1beta1.DRAPlugin", help="comma-separated supported services")
    p.add_argument("--type", default="DRAPlugin", help="PluginInfo.type to report")
    p.add_argument("--cdi-kind", default="corral.example.com/python", help="CDI vendor/class of the devices")
    p.add_argument("--pool", default="python-pool")
    p.add_argument("--fail", default="", help="answer every claim with this error")
    p.add_argument(
        "--share-id",
        default=None,
        help="give every device this DRAPlugin v1 share_id ({uid} is the claim uid); unset by default",
    )
    p.add_argument(
        "--health-timeout",
        type=int,
        default=0,
        help="health_check_timeout_seconds sent with every device's health (0: the kubelet's default)",
    )
    p.add_argument(
        "--pod-uid",
        default="",
        help="serve as a rolling-update instance: <driver>-<pod uid>-reg.sock and dra-<pod uid>.sock",
    )
    p.set_defaults(run=dra_driver.run)

    p = sub.add_parser("device-plugin", help="serve v1beta1.DevicePlugin and register it")
    p.add_argument("--kubelet-socket", required=True, help="registration socket to register with")
    p.add_argument("--socket", required=True, help="unix socket to serve the plugin on")
    p.add_argument("--authority", choices=AUTHORITY_MODES, default="raw")
    p.add_argument("--timeout", type=float, default=20.0, help="overall deadline in seconds")
    p.add_argument("--resource", default="example.com/python")
    p.add_argument("--devices", type=int, default=2)
    p.add_argument("--numa", default="", help="comma-separated NUMA ids, device i on id i mod n")
    p.add_argument("--exit-after-allocations", type=int, default=1)
    p.set_defaults(run=device_plugin.serve)

    p = sub.add_parser("podresources", help="call podresources v1 List, GetAllocatableResources (and Get)")
    common(p)
    p.add_argument("--pod", default="", help="also Get this pod, as NAMESPACE/NAME")
    p.set_defaults(run=podresources_client.run)

    p = sub.add_parser("agent", help="call corral.v1.Agent Admit, GetPod, ListPods (and PodRemoved)")
    common(p)
    p.add_argument("--pod-json", required=True, help="file holding a v1 Pod manifest as JSON (with metadata.uid)")
    p.add_argument("--remove", action="store_true", help="then PodRemoved the pod")
    p.set_defaults(run=agent_client.run)

    args = parser.parse_args(argv)
    try:
        result = args.run(args)
    except grpc.RpcError as err:
        result = {"ok": False, "code": err.code().name, "details": err.details()}
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")
    return 0 if result.get("ok") else 1


if __name__ == "__main__":
    sys.exit(main())
