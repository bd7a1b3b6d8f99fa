//! `corral-proto`: the kubelet gRPC APIs, generated for tonic.
