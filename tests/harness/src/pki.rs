//! A private CA and the certificates it signs, made at run time with rcgen
//! and written as PEM files to a temp dir, for the TLS tests (NATS, Redis
//! standalone/cluster/sentinel, an https agent).

use std::path::PathBuf;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};

use crate::{RedisCluster, RedisSentinel};

/// A CA and the server and client certificates it signed, as PEM files in
/// a temp dir (removed on Drop): `ca.pem`, `<server>.pem`,
/// `<server>-key.pem`, `client.pem`, `client-key.pem`.
pub struct Pki {
    dir: tempfile::TempDir,
    server: &'static str,
    server_cert_der: Vec<u8>,
    server_key_der: Vec<u8>,
}

impl Pki {
    /// A server certificate `server.pem` (`serverAuth` only, for
    /// `127.0.0.1` and `localhost`) and a client certificate.
    pub fn generate() -> Pki {
        Pki::with_server(
            "server",
            "caucus test server",
            vec![ExtendedKeyUsagePurpose::ServerAuth],
        )
    }

    /// A node certificate `node.pem` with both `serverAuth` and
    /// `clientAuth`, because Redis Cluster nodes and replicas show the same
    /// certificate as client on the bus and to their master, and a client
    /// certificate.
    pub fn generate_for_nodes() -> Pki {
        Pki::with_server(
            "node",
            "caucus test redis node",
            vec![
                ExtendedKeyUsagePurpose::ServerAuth,
                ExtendedKeyUsagePurpose::ClientAuth,
            ],
        )
    }

    fn with_server(
        server: &'static str,
        common_name: &str,
        usages: Vec<ExtendedKeyUsagePurpose>,
    ) -> Pki {
        let dir = tempfile::Builder::new()
            .prefix("caucus-tls-")
            .tempdir()
            .expect("tempdir");
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.distinguished_name
            .push(DnType::CommonName, "caucus test CA");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
        let write = |name: &str, pem: String| {
            std::fs::write(dir.path().join(name), pem).expect("write pem");
        };
        let leaf = |name: &str, file: &str, sans: &[&str], usages: Vec<ExtendedKeyUsagePurpose>| {
            let sans: Vec<String> = sans.iter().map(|s| s.to_string()).collect();
            let mut p = CertificateParams::new(sans).unwrap();
            p.distinguished_name.push(DnType::CommonName, name);
            p.key_usages = vec![
                KeyUsagePurpose::DigitalSignature,
                KeyUsagePurpose::KeyEncipherment,
            ];
            p.extended_key_usages = usages;
            let key = KeyPair::generate().unwrap();
            let cert = p.signed_by(&key, &ca).unwrap();
            write(&format!("{file}.pem"), cert.pem());
            write(&format!("{file}-key.pem"), key.serialize_pem());
            (cert.der().to_vec(), key.serialize_der())
        };
        let (server_cert_der, server_key_der) =
            leaf(common_name, server, &["127.0.0.1", "localhost"], usages);
        leaf(
            "caucus test client",
            "client",
            &["caucus-client"],
            vec![ExtendedKeyUsagePurpose::ClientAuth],
        );
        write("ca.pem", ca.pem());
        Pki {
            dir,
            server,
            server_cert_der,
            server_key_der,
        }
    }

    /// The path of one of the PEM files (`ca.pem`, `client.pem`, ...).
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// [`Pki::path`] as a string, for config files and env.
    pub fn file(&self, name: &str) -> String {
        self.path(name).display().to_string()
    }

    /// The contents of one of the PEM files.
    pub fn read(&self, name: &str) -> Vec<u8> {
        std::fs::read(self.path(name)).expect("read pem")
    }

    /// The server (or node) certificate's PEM file.
    pub fn server_cert(&self) -> PathBuf {
        self.path(&format!("{}.pem", self.server))
    }

    /// The server (or node) certificate's private key PEM file.
    pub fn server_key(&self) -> PathBuf {
        self.path(&format!("{}-key.pem", self.server))
    }

    /// The server certificate, DER-encoded (for an in-process TLS server).
    pub fn server_cert_der(&self) -> &[u8] {
        &self.server_cert_der
    }

    /// The server certificate's private key, PKCS#8 DER.
    pub fn server_key_der(&self) -> &[u8] {
        &self.server_key_der
    }

    /// A TLS Redis Cluster showing the server certificate; needs a
    /// [`Pki::generate_for_nodes`] certificate (nodes are also clients).
    pub fn redis_cluster(&self) -> RedisCluster {
        RedisCluster::start_tls(
            &self.path("ca.pem"),
            &self.server_cert(),
            &self.server_key(),
        )
    }

    /// TLS Sentinels over a TLS master and replica showing the server
    /// certificate; needs a [`Pki::generate_for_nodes`] certificate.
    pub fn redis_sentinel(&self) -> RedisSentinel {
        RedisSentinel::start_tls(
            &self.path("ca.pem"),
            &self.server_cert(),
            &self.server_key(),
        )
    }
}
