//! The NATS client protocol on the wire: what clients send (`ClientOp`, decoded incrementally
//! by [`decoder::Decoder`]), what the server sends (the `encoder` functions), the JSON of INFO
//! and CONNECT (`handshake`), and `NATS/1.0` header blocks (`headers`).
//!
//! Pure data and parsing: no sockets, no tokio. The async session code lives in `server/`.

pub mod decoder;
pub mod encoder;
pub mod handshake;
pub mod headers;
pub mod op;

pub use decoder::{DecodeError, Decoder};
pub use op::ClientOp;
