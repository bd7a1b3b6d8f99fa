//! The fixture's credentials: a CA, the serving certificate for 127.0.0.1, a
//! `system:masters` client certificate, and the kubeconfig naming them.

use std::path::Path;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

use super::{ApiServerError, write};

/// The CA (`ca.crt`), the serving certificate for 127.0.0.1 (`server.crt`, `.key`) and the
/// `system:masters` client certificate (`client.crt`, `.key`), PEM, in `dir`.
pub(super) fn write_certificates(dir: &Path) -> Result<(), ApiServerError> {
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "corral test CA");
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca_key = KeyPair::generate()?;
    write(&dir.join("ca.crt"), &ca.self_signed(&ca_key)?.pem())?;
    let issuer = Issuer::new(ca, ca_key);

    let mut server = CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])?;
    server
        .distinguished_name
        .push(DnType::CommonName, "corral test apiserver");
    server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let server_key = KeyPair::generate()?;
    write(
        &dir.join("server.crt"),
        &server.signed_by(&server_key, &issuer)?.pem(),
    )?;
    write(&dir.join("server.key"), &server_key.serialize_pem())?;

    // The Kubernetes user is the CommonName, its groups the Organizations.
    let mut client = CertificateParams::new(Vec::<String>::new())?;
    client
        .distinguished_name
        .push(DnType::CommonName, "corral-test");
    client
        .distinguished_name
        .push(DnType::OrganizationName, "system:masters");
    client.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let client_key = KeyPair::generate()?;
    write(
        &dir.join("client.crt"),
        &client.signed_by(&client_key, &issuer)?.pem(),
    )?;
    write(&dir.join("client.key"), &client_key.serialize_pem())?;
    Ok(())
}

/// A kubeconfig for the server on `port`, with the certificates in `dir`.
pub(super) fn kubeconfig(dir: &Path, port: u16) -> String {
    let file = |name: &str| dir.join(name).display().to_string();
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: corral-test\n  cluster:\n    \
         server: https://127.0.0.1:{port}\n    certificate-authority: {ca}\nusers:\n\
         - name: corral-test\n  user:\n    client-certificate: {cert}\n    client-key: {key}\n\
         contexts:\n- name: corral-test\n  context:\n    cluster: corral-test\n    \
         user: corral-test\ncurrent-context: corral-test\n",
        ca = file("ca.crt"),
        cert = file("client.crt"),
        key = file("client.key"),
    )
}
