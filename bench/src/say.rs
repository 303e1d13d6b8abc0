//! The bench's progress lines.

/// Progress on stderr, timestamped like the plane's scripts.
macro_rules! say {
    ($($arg:tt)*) => {
        eprintln!("[bench {}] {}", jiff::Zoned::now().strftime("%H:%M:%S"), format_args!($($arg)*))
    };
}
