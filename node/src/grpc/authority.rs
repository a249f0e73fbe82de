//! Connections of the Unix sockets that accept any `:authority`, as the Go gRPC servers of the
//! kubelet's own plugins do. The HTTP/2 server under tonic (`h2`) resets a request whose
//! `:authority` is not a valid URI authority with `PROTOCOL_ERROR`; gRPC clients built on
//! grpc-core (Python, C++) and grpc-java send the socket path there (plain, as
//! `unix:///...`, or percent-encoded). [`AnyAuthority`] sits between the socket and the server
//! and gives such requests `localhost` instead (its `rewriter` module); the server's answers pass
//! unchanged.
//!
//! Depends on tokio and tonic's connection traits only; the rewriting itself is pure.

mod rewriter;

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{UnixListener, UnixStream};
use tokio_stream::wrappers::UnixListenerStream;
use tokio_stream::{Stream, StreamExt};
use tonic::transport::server::Connected;

use rewriter::Rewriter;

/// How much is read from the socket at once.
const READ_CHUNK: usize = 16 * 1024;

/// A connection whose requests reach the server with an acceptable `:authority`.
pub struct AnyAuthority<T> {
    inner: T,
    rewriter: Rewriter,
    /// Rewritten bytes the server has not read yet.
    ready: Vec<u8>,
    /// How many of `ready` it has read.
    taken: usize,
}

impl<T> AnyAuthority<T> {
    /// Wraps a connection accepted from a client.
    pub fn new(inner: T) -> Self {
        Self {
            inner,
            rewriter: Rewriter::default(),
            ready: Vec::new(),
            taken: 0,
        }
    }
}

/// The connections of `listener`, each accepting any `:authority`.
pub(crate) fn incoming(
    listener: UnixListener,
) -> impl Stream<Item = io::Result<AnyAuthority<UnixStream>>> {
    UnixListenerStream::new(listener).map(|accepted| accepted.map(AnyAuthority::new))
}

impl<T: AsyncRead + Unpin> AsyncRead for AnyAuthority<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            if this.taken < this.ready.len() {
                let available = &this.ready[this.taken..];
                let n = available.len().min(buf.remaining());
                buf.put_slice(&available[..n]);
                this.taken += n;
                if this.taken == this.ready.len() {
                    this.ready.clear();
                    this.taken = 0;
                }
                return Poll::Ready(Ok(()));
            }
            let mut chunk = [0; READ_CHUNK];
            let mut read = ReadBuf::new(&mut chunk);
            match Pin::new(&mut this.inner).poll_read(cx, &mut read) {
                Poll::Ready(Ok(())) if read.filled().is_empty() => return Poll::Ready(Ok(())),
                Poll::Ready(Ok(())) => this.rewriter.feed(read.filled(), &mut this.ready),
                other => return other,
            }
        }
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for AnyAuthority<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

impl<T: Connected> Connected for AnyAuthority<T> {
    type ConnectInfo = T::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.inner.connect_info()
    }
}
