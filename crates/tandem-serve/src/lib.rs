//! `tandem serve`: one GGUF model behind an OpenAI-compatible API on 127.0.0.1.
//!
//! It is the cloud side users can host themselves and, run by the core's start-up as
//! `tandem serve --stand-in`, the front ends' stand-in cloud when none is configured. Routed
//! decoding sends the whole prompt on every request, so the server keeps the KV cache of the
//! previous request and decodes only the new suffix: a routed reply costs it O(new tokens)
//! per call. It is one engine on one machine; deployments that
//! serve many users point Tandem at vLLM or SGLang, which speak the same API.
//!
//! The JSON it reads and writes is `tandem-wire`'s, the same types Tandem's cloud client uses.
//! The `tandem serve` command (flags, settings) lives in `tandem-cli`.

mod guard;
mod http;
mod listen;
mod model_thread;

pub use guard::{Access, API_KEY_VAR, MAX_BODY, MAX_WAITING};
pub use http::{router, serve_until, start, Running, StopWhen};
pub use listen::{HEADER_TIMEOUT, MAX_CONNECTIONS};
pub use model_thread::{JobError, ModelThread, Refused, ServeOptions, StartError, Stopped};
