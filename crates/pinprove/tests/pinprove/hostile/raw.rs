//! Requests no generated client sends: raw protobuf bytes to a method, and
//! HTTP by hand.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};

use bytes::{Buf, BufMut};
use pinprove_server::pb;
use prost::Message;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::metadata::MetadataValue;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;

/// Bytes as they are, both ways.
#[derive(Clone, Copy, Default)]
pub struct Raw;

impl Codec for Raw {
    type Encode = Vec<u8>;
    type Decode = Vec<u8>;
    type Encoder = Raw;
    type Decoder = Raw;

    fn encoder(&mut self) -> Raw {
        Raw
    }

    fn decoder(&mut self) -> Raw {
        Raw
    }
}

impl Encoder for Raw {
    type Item = Vec<u8>;
    type Error = tonic::Status;

    fn encode(&mut self, item: Vec<u8>, buf: &mut EncodeBuf<'_>) -> Result<(), tonic::Status> {
        buf.put_slice(&item);
        Ok(())
    }
}

impl Decoder for Raw {
    type Item = Vec<u8>;
    type Error = tonic::Status;

    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<Vec<u8>>, tonic::Status> {
        Ok(Some(buf.copy_to_bytes(buf.remaining()).to_vec()))
    }
}

/// Adds the bearer token.
#[derive(Clone)]
pub struct Bearer(MetadataValue<tonic::metadata::Ascii>);

impl tonic::service::Interceptor for Bearer {
    fn call(&mut self, mut req: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        req.metadata_mut().insert("authorization", self.0.clone());
        Ok(req)
    }
}

/// A channel that sends the token.
pub type Authorized = InterceptedService<Channel, Bearer>;

pub async fn connect(uri: &str, token: &str) -> Authorized {
    let channel = Channel::from_shared(uri.to_string()).unwrap().connect().await.unwrap();
    InterceptedService::new(channel, Bearer(format!("Bearer {token}").parse().unwrap()))
}

/// Sends `message` (protobuf bytes) to `method` of the service.
pub async fn unary(channel: &Authorized, method: &str, message: Vec<u8>) -> Result<Vec<u8>, tonic::Status> {
    let mut grpc = tonic::client::Grpc::new(channel.clone())
        .max_encoding_message_size(usize::MAX)
        .max_decoding_message_size(usize::MAX);
    grpc.ready()
        .await
        .map_err(|e| tonic::Status::unavailable(format!("not ready: {e}")))?;
    let path = http::uri::PathAndQuery::try_from(format!("/cuzk.v1.ProvingEngine/{method}")).unwrap();
    grpc.unary(tonic::Request::new(message), path, Raw)
        .await
        .map(tonic::Response::into_inner)
}

/// `request` with `n` more empty `vanilla_proofs` entries (2 bytes each on
/// the wire), encoded.
pub fn empty_entries(request: &pb::SubmitProofRequest, n: usize) -> Vec<u8> {
    let mut bytes = request.encode_to_vec();
    bytes.reserve(2 * n);
    for _ in 0..n {
        bytes.extend_from_slice(&[0x5a, 0x00]); // field 11, length 0
    }
    bytes
}

/// A `ProveRequest` around an encoded `SubmitProofRequest`.
pub fn prove_of(submit: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(submit.len() + 16);
    out.put_u8(0x0a);
    prost::encoding::encode_varint(submit.len() as u64, &mut out);
    out.extend_from_slice(submit);
    out
}

/// `GET path` with `Host: host` (and a bearer token), the whole response.
pub fn http_get(addr: SocketAddr, path: &str, host: &str, token: Option<&str>) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\n{auth}Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}
