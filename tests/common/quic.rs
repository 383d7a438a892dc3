//! quinn endpoints over 127.0.0.1 for the quinn tests and `examples/quinn_bulk.rs`:
//! a self-signed certificate made at run time, a server and a client endpoint on the
//! given runtime, each with its own transport settings.

use quinn::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use quinn::{ClientConfig, Endpoint, EndpointConfig, ServerConfig, TransportConfig};
use std::net::SocketAddr;
use std::sync::Arc;

pub const SERVER_NAME: &str = "localhost";

/// A server endpoint and a client endpoint on `runtime`, and the server's address.
/// The client's default config trusts the server's certificate.
pub fn endpoints(
    runtime: Arc<dyn quinn::Runtime>,
    server_transport: TransportConfig,
    client_transport: TransportConfig,
) -> (Endpoint, Endpoint, SocketAddr) {
    let certified = rcgen::generate_simple_self_signed(vec![SERVER_NAME.to_string()])
        .expect("self-signed certificate");
    let cert: CertificateDer<'static> = certified.cert.der().clone();
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(certified.key_pair.serialize_der()));

    let mut server_config =
        ServerConfig::with_single_cert(vec![cert.clone()], key).expect("server config");
    server_config.transport_config(Arc::new(server_transport));
    let server_socket = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind server");
    let server = Endpoint::new(
        EndpointConfig::default(),
        Some(server_config),
        server_socket,
        runtime.clone(),
    )
    .expect("server endpoint");
    let server_addr = server.local_addr().expect("server address");

    let mut roots = quinn::rustls::RootCertStore::empty();
    roots.add(cert).expect("trust the certificate");
    let mut client_config =
        ClientConfig::with_root_certificates(Arc::new(roots)).expect("client config");
    client_config.transport_config(Arc::new(client_transport));
    let client_socket = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind client");
    let mut client = Endpoint::new(EndpointConfig::default(), None, client_socket, runtime)
        .expect("client endpoint");
    client.set_default_client_config(client_config);
    (server, client, server_addr)
}
