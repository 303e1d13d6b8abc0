//! The controller's name, its upstream defaults and its configuration.

/// Canonical name of the controller (`--controllers`; alias `ttl-after-finished`).
pub const NAME: &str = "ttl-after-finished-controller";

/// Upstream default of `--concurrent-ttl-after-finished-syncs`.
pub const DEFAULT_WORKERS: usize = 5;

/// Configuration: the worker tasks (`--concurrent-ttl-after-finished-syncs`, defined once in
/// the binary's command line, which builds this). `Default` equals upstream.
pub type Config = rkcm_runtime::controller::Workers<DEFAULT_WORKERS>;
