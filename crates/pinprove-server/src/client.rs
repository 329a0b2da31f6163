//! A client of the daemon, for the `prove` and `status` commands and
//! tests: dials `host:port`, `http://host:port` or `unix:///path`, sends
//! the bearer token when given, and allows the daemon's message sizes.

use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::Interceptor;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, Endpoint};

use crate::MAX_MESSAGE_BYTES;
use crate::pb::proving_engine_client::ProvingEngineClient;

/// Adds `authorization: Bearer <token>` to every call, when there is one.
#[derive(Clone)]
pub struct BearerToken(Option<MetadataValue<Ascii>>);

impl Interceptor for BearerToken {
    fn call(&mut self, mut req: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        if let Some(v) = &self.0 {
            req.metadata_mut().insert("authorization", v.clone());
        }
        Ok(req)
    }
}

/// A connected client.
pub type Client = ProvingEngineClient<InterceptedService<Channel, BearerToken>>;

/// Why a client could not connect.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The address does not parse.
    #[error("not a daemon address: {0:?} (host:port, http://host:port or unix:///path)")]
    Address(String),
    /// The token is not a valid header value.
    #[error("the bearer token has characters a header cannot carry")]
    Token,
    /// Connecting failed.
    #[error("connecting to {0}")]
    Connect(String, #[source] tonic::transport::Error),
}

/// The URI of a daemon address as given on the command line.
pub fn uri(addr: &str) -> String {
    let a = addr.trim();
    if a.starts_with("unix:") || a.starts_with("http://") || a.starts_with("https://") {
        a.to_string()
    } else {
        format!("http://{a}")
    }
}

/// Connects to the daemon at `addr`, with `token` if it needs one.
pub async fn connect(addr: &str, token: Option<&str>) -> Result<Client, ClientError> {
    let uri = uri(addr);
    let endpoint = Endpoint::from_shared(uri.clone()).map_err(|_| ClientError::Address(addr.to_string()))?;
    let channel = endpoint
        .http2_adaptive_window(true)
        .connect()
        .await
        .map_err(|e| ClientError::Connect(uri, e))?;
    let token = match token {
        Some(t) => Some(format!("Bearer {}", t.trim()).parse().map_err(|_| ClientError::Token)?),
        None => None,
    };
    Ok(ProvingEngineClient::with_interceptor(channel, BearerToken(token))
        .max_decoding_message_size(MAX_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_MESSAGE_BYTES))
}
