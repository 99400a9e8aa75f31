//! Bytes both ways between a forward's TCP client and its SSH channel, handing russh's own
//! buffers across instead of copying them through a staging buffer.
//!
//! `copy_bidirectional` over a `ChannelStream` copies every received packet once more (into its
//! buffer) and writes one packet per syscall; this hands each packet's `Bytes` to `writev`,
//! as many as have arrived, and sends what it reads from the client as owned `Bytes`
//! (`data_bytes`). Half-closes pass through as `copy_bidirectional` passes them: the client's
//! EOF becomes the channel's EOF and the other way round; the channel closes when both
//! directions are done.

use std::io::IoSlice;

use bytes::{Buf as _, Bytes, BytesMut};
use russh::client::Msg;
use russh::{Channel, ChannelMsg};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

use super::live::Meter;

/// Bytes read from the client per channel message: one full SSH packet.
const READ: usize = 32 * 1024;

/// At most this many packets go into one `writev` (the kernel's limit is 1024 slices).
const BATCH: usize = 64;

/// Copies until both directions are done, counting on `meter` as bytes pass; the bytes moved
/// each way (up to the server, down to the client), or the first error.
pub(crate) async fn run(
    socket: TcpStream,
    channel: Channel<Msg>,
    meter: &Meter,
) -> std::io::Result<(u64, u64)> {
    let (from_client, to_client) = socket.into_split();
    let (from_server, to_server) = channel.split();
    let up = async {
        let moved = up(from_client, &to_server, meter).await;
        // The client is done sending (or failed): the server reads EOF.
        let _ = to_server.eof().await;
        moved
    };
    let moved = tokio::try_join!(up, down(from_server, to_client, meter));
    let _ = to_server.close().await;
    moved
}

async fn up(
    mut from: OwnedReadHalf,
    to: &russh::ChannelWriteHalf<Msg>,
    meter: &Meter,
) -> std::io::Result<u64> {
    let mut moved = 0;
    let mut buf = BytesMut::new();
    loop {
        // Fresh room each time: the last packet's bytes are russh's until it has sent them.
        buf.reserve(READ);
        let n = from.read_buf(&mut buf).await?;
        if n == 0 {
            return Ok(moved);
        }
        moved += n as u64;
        to.data_bytes(buf.split().freeze())
            .await
            .map_err(std::io::Error::other)?;
        meter.up(n as u64);
    }
}

async fn down(
    mut from: russh::ChannelReadHalf,
    mut to: OwnedWriteHalf,
    meter: &Meter,
) -> std::io::Result<u64> {
    let mut moved = 0;
    let mut batch: Vec<Bytes> = Vec::with_capacity(BATCH);
    let mut open = true;
    while open {
        // Wait for one message, then take whatever else has already arrived.
        let mut next = from.wait().await;
        loop {
            match next {
                Some(ChannelMsg::Data { data }) => batch.push(data),
                // EOF, close, or the connection gone: nothing more will come.
                Some(ChannelMsg::Eof | ChannelMsg::Close) | None => {
                    open = false;
                    break;
                }
                Some(_) => {}
            }
            if batch.len() == BATCH {
                break;
            }
            // Polled once: a message already queued, else on to the write.
            tokio::select! {
                biased;
                msg = from.wait() => next = msg,
                () = std::future::ready(()) => break,
            }
        }
        let written = write_all(&mut to, &mut batch).await?;
        meter.down(written);
        moved += written;
    }
    to.shutdown().await?;
    Ok(moved)
}

/// Writes every buffer in `batch` (vectored), leaving it empty; the bytes written.
async fn write_all<W: tokio::io::AsyncWrite + Unpin>(
    to: &mut W,
    batch: &mut Vec<Bytes>,
) -> std::io::Result<u64> {
    let mut written = 0;
    let mut first = 0;
    while first < batch.len() {
        let slices: Vec<IoSlice<'_>> = batch[first..].iter().map(|b| IoSlice::new(b)).collect();
        let mut n = to.write_vectored(&slices).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        written += n as u64;
        while n > 0 {
            let head = &mut batch[first];
            let take = n.min(head.len());
            head.advance(take);
            n -= take;
            if head.is_empty() {
                first += 1;
            }
        }
        while first < batch.len() && batch[first].is_empty() {
            first += 1;
        }
    }
    batch.clear();
    Ok(written)
}

#[cfg(test)]
#[expect(
    clippy::disallowed_methods,
    reason = "#[tokio::test] builds its own runtime"
)]
mod tests {
    use super::*;

    /// A peer that takes a few bytes per write: every buffer still arrives whole and in order.
    #[tokio::test]
    async fn partial_vectored_writes_send_every_buffer_in_order() {
        let (mut ours, mut theirs) = tokio::io::duplex(7);
        let parts: Vec<Bytes> = ["", "alpha", "", "b", "a longer third buffer", "z"]
            .into_iter()
            .map(Bytes::from)
            .collect();
        let want: Vec<u8> = parts.iter().flat_map(|b| b.to_vec()).collect();
        let reader = tokio::spawn(async move {
            let mut got = Vec::new();
            theirs.read_to_end(&mut got).await.map(|_| got)
        });
        let mut batch = parts;
        let written = write_all(&mut ours, &mut batch).await.expect("written");
        drop(ours);
        assert_eq!(written, want.len() as u64);
        assert!(batch.is_empty());
        assert_eq!(reader.await.expect("joined").expect("read"), want);
    }
}
