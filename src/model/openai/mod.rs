//! OpenAI-compatible chat completions (OpenAI, vLLM, Ollama, llama.cpp, ...): a thin transport
//! over [`convert`] (request) and [`stream`] (normalisation).

#[cfg(feature = "server")]
pub mod convert;
#[cfg(feature = "server")]
mod provider;
pub mod stream;
pub mod wire;
#[cfg(feature = "server")]
pub use provider::*;
