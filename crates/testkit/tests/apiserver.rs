//! The real API server fixture: a CRD applied, an object created through it, the server
//! killed (requests fail) and restarted on the same port with the same etcd (the object is
//! read back unchanged). Skips, saying why, without the bundle.

use std::time::{Duration, Instant};

use corral_testkit::{ApiServer, ApiServerBundle, ApiServerError};
use serde_json::Value;

/// A small cluster-scoped CRD, as a project's manifest would be written.
const WIDGET_CRD: &str = "\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.corral.dev
spec:
  group: example.corral.dev
  scope: Cluster
  names:
    plural: widgets
    singular: widget
    kind: Widget
    listKind: WidgetList
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size:
                type: integer
";

const WIDGETS: &str = "/apis/example.corral.dev/v1/widgets";

#[test]
fn an_object_outlives_an_apiserver_restart() {
    let bundle = match ApiServerBundle::locate() {
        Ok(bundle) => bundle,
        Err(why) => {
            eprintln!("skipped: {why}");
            return;
        }
    };
    let started = Instant::now();
    let mut server = ApiServer::start(&bundle).unwrap();
    eprintln!("etcd and the API server ready in {:?}", started.elapsed());
    let crd = server.dir().join("widgets.yaml");
    std::fs::write(&crd, WIDGET_CRD).unwrap();
    server.apply_crd(&crd).unwrap();
    // Applying it again replaces it: still served.
    server.apply_crd(&crd).unwrap();

    let widget = server.dir().join("w1.json");
    let object = r#"{"apiVersion":"example.corral.dev/v1","kind":"Widget","metadata":{"name":"w1"},"spec":{"size":3}}"#;
    std::fs::write(&widget, object).unwrap();
    let created: Value = serde_json::from_str(
        &server
            .kubectl(&["create", "--raw", WIDGETS, "-f", widget.to_str().unwrap()])
            .unwrap(),
    )
    .unwrap();
    let uid = created["metadata"]["uid"].as_str().unwrap().to_owned();
    assert!(!uid.is_empty());

    let url = server.url();
    server.stop_apiserver().unwrap();
    assert!(!server.apiserver_running());
    let w1 = format!("{WIDGETS}/w1");
    match server.kubectl(&["get", "--raw", &w1]) {
        Err(ApiServerError::Kubectl { stderr, .. }) => {
            assert!(stderr.contains("refused"), "{stderr}");
        }
        other => panic!("a stopped API server answered: {other:?}"),
    }

    let restarted = Instant::now();
    server.start_apiserver().unwrap();
    eprintln!("the API server ready again in {:?}", restarted.elapsed());
    let read: Value = serde_json::from_str(
        &server
            .get_when_served(&w1, Duration::from_secs(60))
            .unwrap(),
    )
    .unwrap();
    assert_eq!(read["metadata"]["uid"], uid.as_str());
    assert_eq!(read["spec"]["size"], 3);
    assert_eq!(server.url(), url);
}

/// The project's own NodeResourceTopology CRD (`deploy/crd/`) is accepted by a real API
/// server, and its storage version's list is served.
#[test]
fn the_projects_nrt_crd_is_served() {
    let bundle = match ApiServerBundle::locate() {
        Ok(bundle) => bundle,
        Err(why) => {
            eprintln!("skipped: {why}");
            return;
        }
    };
    let server = ApiServer::start(&bundle).unwrap();
    let crd = corral_testkit::workspace_root().join("deploy/crd/noderesourcetopologies.yaml");
    server.apply_crd(&crd).unwrap();
    let list: Value = serde_json::from_str(
        &server
            .kubectl(&[
                "get",
                "--raw",
                "/apis/topology.node.k8s.io/v1alpha2/noderesourcetopologies",
            ])
            .unwrap(),
    )
    .unwrap();
    assert_eq!(list["kind"], "NodeResourceTopologyList");
}
