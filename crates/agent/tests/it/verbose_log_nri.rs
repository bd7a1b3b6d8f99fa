//! The real `corral run --nri` at the kubelet's `-v=4` in JSON, against corral's NRI runtime
//! end (ttrpc over a unix socket) and a fake kubelet's podresources API (gRPC): pinned
//! containers, one aligned to a device the kubelet names, Burstable ones, a refused one.
//! The ttrpc, HTTP/2 and gRPC internals stay under 10 % of the lines, no line repeats a
//! key, and the refusal's explanation in NRI's error text and in the log stays bounded.

use std::time::Duration;

use corral_proto::nri::NriError;
use corral_proto::nri::api;
use corral_proto::podresources::v1::pod_resources_lister_server::PodResourcesListerServer;
use corral_proto::tonic;
use tokio::net::UnixListener;

use crate::nri::{FakeKubelet, adjusted_cpus, connect, container, create, pod, start_with};
use crate::support::{FakeServer, sigterm, wait_exit};

/// A refusal's text (NRI's error, the log line) is well under this.
const MAX_TEXT: usize = 64 * 1024;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v4_in_nri_mode_keeps_transport_internals_out_and_explanations_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let kubelet = dir.path().join("kubelet.sock");
    let router =
        tonic::transport::Server::builder().add_service(PodResourcesListerServer::new(FakeKubelet));
    let server = FakeServer::start(&kubelet, router);
    let root = dir.path().join("root");
    let socket = dir.path().join("nri.sock");
    let nri = UnixListener::bind(&socket).unwrap();
    let flags = [
        "--kubelet-pod-resources-socket",
        kubelet.to_str().unwrap(),
        "-v=4",
        "--logging-format=json",
    ];
    let mut agent = start_with(&root, &socket, &flags);
    let conn = connect(&nri).await;
    let _: api::SynchronizeResponse = conn
        .call("Synchronize", &api::SynchronizeRequest::default())
        .await
        .unwrap();

    for at in 0..10 {
        let burstable = pod(&format!("b{at}-uid"), "/burstable");
        create(
            &conn,
            &burstable,
            &container(&burstable, &format!("shared-{at}"), 500, 0),
        )
        .await
        .unwrap();
    }
    let plain = pod("plain-uid", "");
    create(&conn, &plain, &container(&plain, "plain", 2000, 2000))
        .await
        .unwrap();
    let mut gpu = pod("gpu-uid", "");
    gpu.name = "gpu-pod".into();
    let aligned = create(&conn, &gpu, &container(&gpu, "aligned", 2000, 2000))
        .await
        .unwrap();
    assert!(
        adjusted_cpus(&aligned)
            .iter()
            .all(|cpu| (8..16).contains(&cpu))
    );
    let greedy = pod("x-uid", "");
    let err = create(
        &conn,
        &greedy,
        &container(&greedy, "greedy", 12_000, 12_000),
    )
    .await
    .unwrap_err();
    let NriError::Status { source, .. } = err else {
        panic!("not a status: {err}");
    };
    assert!(
        source.message.starts_with("TopologyAffinityError"),
        "{}",
        source.message
    );
    assert!(source.message.contains("NUMA 0 free"), "{}", source.message);
    assert!(
        source.message.len() < MAX_TEXT,
        "{} bytes",
        source.message.len()
    );

    sigterm(&agent.0);
    assert!(
        wait_exit(&mut agent.0, Duration::from_secs(60)).is_some(),
        "corral did not stop"
    );
    drop(conn);
    server.stop().await;
    let log = std::fs::read_to_string(root.with_extension("log")).unwrap();
    let lines: Vec<&str> = log.lines().collect();
    assert!(lines.len() > 20, "{log}");
    let rejected: Vec<&&str> = lines
        .iter()
        .filter(|line| line.contains(" rejected\","))
        .collect();
    assert_eq!(rejected.len(), 1, "{log}");
    assert!(rejected[0].contains("NUMA 0 free"), "{}", rejected[0]);
    let mut from_dependencies = Vec::new();
    for line in &lines {
        assert_eq!(
            corral_testkit::repeated_keys(line),
            Vec::<String>::new(),
            "{line}"
        );
        let doc: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|err| panic!("{err}: {line}"));
        assert!(doc.is_object(), "{line}");
        assert!(line.len() < MAX_TEXT, "a line of {} bytes", line.len());
        if let Some(logger) = doc["logger"].as_str() {
            from_dependencies.push(logger.to_owned());
        }
    }
    assert!(
        from_dependencies.len() * 10 < lines.len(),
        "{} of {} lines from dependencies: {from_dependencies:?}",
        from_dependencies.len(),
        lines.len()
    );
    // ttrpc and NRI are corral's own code (corral_proto): their per-message chatter counts.
    let transport = lines
        .iter()
        .filter(|line| line.contains("ttrpc") || line.contains("\"logger\":\"h2"))
        .count();
    assert!(
        transport * 10 < lines.len(),
        "{transport} transport lines of {}: {log}",
        lines.len()
    );
    eprintln!(
        "{} lines, {} from dependencies, {transport} transport; NRI error {} bytes",
        lines.len(),
        from_dependencies.len(),
        source.message.len()
    );
}
