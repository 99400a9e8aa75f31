//! The tracing subscriber: quiet by default, `-v`/`-vv` or `RUST_LOG` for more, always stderr.

use tracing_subscriber::EnvFilter;

/// Installs the subscriber once, at start-up.
pub fn init(verbose: u8) {
    let default = match verbose {
        0 => "warn",
        1 => "shiqi_ca_agent=debug,shiqi_ca=debug",
        _ => "shiqi_ca_agent=trace,shiqi_ca=trace",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .init();
}
