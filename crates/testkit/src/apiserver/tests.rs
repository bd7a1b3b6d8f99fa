//! The fixture's pure parts: reading a CRD manifest, the kubeconfig.

use super::*;

#[test]
fn a_crd_manifest_names_what_serving_its_resources_takes() {
    let crd: Value = serde_saphyr::from_str(
        "kind: CustomResourceDefinition\nmetadata: {name: widgets.example.dev}\n\
         spec:\n  group: example.dev\n  names: {plural: widgets}\n  versions:\n  \
         - {name: v1beta1, served: true, storage: false}\n  \
         - {name: v1, served: true, storage: true}\n",
    )
    .unwrap();
    let names = CrdNames::of(&crd).unwrap();
    assert_eq!(
        [names.name, names.group, names.plural, names.version],
        ["widgets.example.dev", "example.dev", "widgets", "v1"]
    );
}

#[test]
fn a_manifest_that_is_not_a_crd_is_refused() {
    let config_map: Value =
        serde_saphyr::from_str("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n").unwrap();
    assert_eq!(
        CrdNames::of(&config_map).err(),
        Some("kind CustomResourceDefinition")
    );
    let no_storage: Value = serde_saphyr::from_str(
        "kind: CustomResourceDefinition\nmetadata: {name: a.b}\nspec:\n  group: b\n  \
         names: {plural: a}\n  versions: [{name: v1, served: true, storage: false}]\n",
    )
    .unwrap();
    assert_eq!(CrdNames::of(&no_storage).err(), Some("a storage version"));
}

#[test]
fn the_kubeconfig_names_the_server_and_the_client_certificate() {
    let text = kubeconfig(Path::new("/d"), 4321);
    let config: Value = serde_saphyr::from_str(&text).unwrap();
    let cluster = &config["clusters"][0]["cluster"];
    assert_eq!(cluster["server"], "https://127.0.0.1:4321");
    assert_eq!(cluster["certificate-authority"], "/d/ca.crt");
    assert_eq!(
        config["users"][0]["user"]["client-certificate"],
        "/d/client.crt"
    );
    assert_eq!(config["users"][0]["user"]["client-key"], "/d/client.key");
    assert_eq!(config["current-context"], "corral-test");
}

#[test]
fn ports_are_distinct_free_and_below_the_ephemeral_range() {
    for _ in 0..20 {
        let ports = free_ports().unwrap();
        assert!(ports.iter().all(|port| PORTS.contains(port)), "{ports:?}");
        assert!(
            ports[0] != ports[1] && ports[1] != ports[2] && ports[0] != ports[2],
            "{ports:?}"
        );
        for port in ports {
            drop(TcpListener::bind(("127.0.0.1", port)).unwrap());
        }
    }
}
