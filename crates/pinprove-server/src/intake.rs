//! How request bytes come in: a few proof requests received at a time,
//! every other request held to a small size, and a bound on connections.
//!
//! tonic reads a unary request whole before the handler runs, so without
//! a bound every concurrent proof request would hold up to its method's
//! limit (tens of MB) in memory at once. Here a proof request's body is
//! read only once it holds one of [`JobsConfig::max_receiving`] places;
//! until then HTTP/2 flow control keeps its client from sending more than
//! a window. Other methods carry ids and numbers: their bodies are cut off
//! past a few KiB. Connections beyond [`MAX_CONNECTIONS`] are closed as
//! they are accepted.
//!
//! [`JobsConfig::max_receiving`]: crate::config::JobsConfig::max_receiving

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use http_body::{Body as HttpBody, Frame, SizeHint};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{AcquireError, OwnedSemaphorePermit, Semaphore};
use tokio_stream::{Stream, StreamExt};
use tonic::Status;
use tonic::body::Body;
use tonic::server::NamedService;
use tonic::transport::server::Connected;
use tower::Service;

use crate::codec::SMALL_MESSAGE_BYTES;

/// Connections served at once; more are closed as they are accepted.
pub const MAX_CONNECTIONS: usize = 256;
/// Requests in flight on one connection (Curio keeps up to `MaxPending`,
/// 10 by default, on its one channel).
pub const MAX_STREAMS_PER_CONNECTION: u32 = 128;
/// HTTP/2 flow-control windows: what a client may send before the daemon
/// reads it, per request and per connection.
pub const STREAM_WINDOW: u32 = 1 << 20;
/// See [`STREAM_WINDOW`].
pub const CONNECTION_WINDOW: u32 = 2 << 20;

/// Whether `path` is a method that carries a proof request.
fn carries_proof(path: &str) -> bool {
    path.ends_with("/Prove") || path.ends_with("/SubmitProof")
}

/// The service with its request bodies gated and bounded.
#[derive(Clone)]
pub(crate) struct Intake<S> {
    inner: S,
    receiving: Arc<Semaphore>,
}

impl<S> Intake<S> {
    /// `inner`, receiving at most `receiving` proof requests at once.
    pub(crate) fn new(inner: S, receiving: usize) -> Self {
        Intake {
            inner,
            receiving: Arc::new(Semaphore::new(receiving)),
        }
    }
}

impl<S: NamedService> NamedService for Intake<S> {
    const NAME: &'static str = S::NAME;
}

impl<S> Service<http::Request<Body>> for Intake<S>
where
    S: Service<http::Request<Body>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        let path = req.uri().path();
        let method = path.rsplit('/').next().unwrap_or("").to_string();
        let gated = carries_proof(path);
        let receiving = Arc::clone(&self.receiving);
        let req = req.map(|inner| {
            Body::new(Bounded {
                inner,
                waiting: gated.then(|| Box::pin(receiving.acquire_owned()) as Acquiring),
                permit: None,
                header: [0; 5],
                seen: 0,
                max: if gated {
                    crate::codec::max_message_bytes()
                } else {
                    SMALL_MESSAGE_BYTES
                },
                method,
            })
        });
        self.inner.call(req)
    }
}

type Acquiring = Pin<Box<dyn Future<Output = Result<OwnedSemaphorePermit, AcquireError>> + Send>>;

/// A request body read only with a place (proof requests), holding one
/// gRPC message of at most `max` bytes: a message whose frame header
/// declares more is refused before any of it is buffered, and so is one
/// whose body runs past its declared length.
struct Bounded {
    inner: Body,
    waiting: Option<Acquiring>,
    permit: Option<OwnedSemaphorePermit>,
    /// The gRPC frame header: a compression flag and the message length.
    header: [u8; 5],
    /// Body bytes seen so far.
    seen: usize,
    max: usize,
    method: String,
}

impl Bounded {
    /// Takes note of `data`; `Err` once the message is known to be larger
    /// than `max`.
    fn count(&mut self, data: &[u8]) -> Result<(), Status> {
        for (i, &b) in data.iter().take(5usize.saturating_sub(self.seen)).enumerate() {
            self.header[self.seen + i] = b;
        }
        self.seen += data.len();
        if self.seen >= 5 {
            let declared =
                u32::from_be_bytes([self.header[1], self.header[2], self.header[3], self.header[4]]) as usize;
            if declared > self.max || self.seen > self.max + 5 {
                return Err(Status::resource_exhausted(format!(
                    "a {} request is at most {} bytes; this one is {} bytes",
                    self.method,
                    self.max,
                    declared.max(self.seen - 5)
                )));
            }
        }
        Ok(())
    }
}

impl HttpBody for Bounded {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let this = &mut *self;
        if let Some(waiting) = this.waiting.as_mut() {
            match waiting.as_mut().poll(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Ok(permit)) => {
                    this.permit = Some(permit);
                    this.waiting = None;
                }
                Poll::Ready(Err(_)) => return Poll::Ready(Some(Err(Status::unavailable("the daemon is stopping")))),
            }
        }
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref()
                    && let Err(refused) = this.count(data)
                {
                    this.permit = None;
                    return Poll::Ready(Some(Err(refused)));
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(None) => {
                this.permit = None;
                Poll::Ready(None)
            }
            other => other,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// A connection holding one of the [`MAX_CONNECTIONS`] places.
pub(crate) struct Limited<IO> {
    io: IO,
    _place: OwnedSemaphorePermit,
}

impl<IO: Connected> Connected for Limited<IO> {
    type ConnectInfo = IO::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.io.connect_info()
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for Limited<IO> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Limited<IO> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

/// `incoming` with at most [`MAX_CONNECTIONS`] connections open: one
/// beyond is closed at once (and logged, at most once a minute).
pub(crate) fn limit_connections<IO, E>(
    incoming: impl Stream<Item = Result<IO, E>>,
) -> impl Stream<Item = Result<Limited<IO>, E>> {
    let places = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let started = Instant::now();
    let last_warning = Arc::new(AtomicU64::new(0));
    incoming.filter_map(move |conn| match conn {
        Err(e) => Some(Err(e)),
        Ok(io) => match Arc::clone(&places).try_acquire_owned() {
            Ok(place) => Some(Ok(Limited { io, _place: place })),
            Err(_) => {
                let now = started.elapsed().as_secs() + 60;
                let last = last_warning.load(Ordering::Relaxed);
                if now >= last + 60
                    && last_warning
                        .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                        .is_ok()
                {
                    tracing::warn!(open = MAX_CONNECTIONS, "a connection beyond the limit was closed");
                }
                drop(io);
                None
            }
        },
    })
}
