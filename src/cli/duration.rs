//! Duration flags: Go `time.Duration` syntax, from the runtime's [`GoDuration`].

pub use rkcm_runtime::duration::GoDuration;

pub(super) fn parse_duration(s: &str) -> Result<GoDuration, String> {
    s.parse::<GoDuration>().map_err(|e| e.to_string())
}
