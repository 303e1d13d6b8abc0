//! Go `time.Duration` values, parsed and printed with Go's syntax (`time.ParseDuration`,
//! `Duration.String`): the duration flags of the command line and CronJob `@every` schedules.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

// ---------------------------------------------------------------------------------------------
// Go-compatible value types
// ---------------------------------------------------------------------------------------------

/// A Go `time.Duration`: signed nanoseconds, parsed and printed with Go's syntax.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GoDuration(i64);

impl GoDuration {
    pub const fn from_nanos(nanos: i64) -> Self {
        Self(nanos)
    }
    pub const fn from_secs(secs: i64) -> Self {
        Self(secs * 1_000_000_000)
    }
    pub const fn as_nanos(self) -> i64 {
        self.0
    }
    /// The duration as `std::time::Duration`; negative durations become zero.
    pub fn to_std(self) -> Duration {
        Duration::from_nanos(u64::try_from(self.0).unwrap_or(0))
    }
    pub fn is_positive(self) -> bool {
        self.0 > 0
    }
}

impl From<Duration> for GoDuration {
    fn from(d: Duration) -> Self {
        Self(i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
    }
}

/// Error of [`GoDuration::from_str`], worded like Go's `time.ParseDuration`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("time: {0}")]
pub struct DurationError(String);

impl FromStr for GoDuration {
    type Err = DurationError;

    /// Go `time.ParseDuration`: `[-+]?([0-9]*(\.[0-9]*)?[a-z]+)+`, or `0`.
    fn from_str(orig: &str) -> Result<Self, Self::Err> {
        let invalid = || DurationError(format!("invalid duration {orig:?}"));
        let mut s = orig;
        let mut neg = false;
        if let Some(rest) = s.strip_prefix('-') {
            neg = true;
            s = rest;
        } else if let Some(rest) = s.strip_prefix('+') {
            s = rest;
        }
        if s == "0" {
            return Ok(Self(0));
        }
        if s.is_empty() {
            return Err(invalid());
        }
        let mut total: u128 = 0;
        while !s.is_empty() {
            // The number: integer part, optional fraction; at least one digit.
            let int_len = s.bytes().take_while(u8::is_ascii_digit).count();
            let int_part = &s[..int_len];
            s = &s[int_len..];
            let mut frac_part = "";
            if let Some(rest) = s.strip_prefix('.') {
                let frac_len = rest.bytes().take_while(u8::is_ascii_digit).count();
                frac_part = &rest[..frac_len];
                s = &rest[frac_len..];
            }
            if int_part.is_empty() && frac_part.is_empty() {
                return Err(invalid());
            }
            let unit_len = s
                .find(|c: char| c == '.' || c.is_ascii_digit())
                .unwrap_or(s.len());
            let unit = &s[..unit_len];
            s = &s[unit_len..];
            if unit.is_empty() {
                return Err(DurationError(format!("missing unit in duration {orig:?}")));
            }
            let scale: u128 = match unit {
                "ns" => 1,
                "us" | "\u{00b5}s" | "\u{03bc}s" => 1_000,
                "ms" => 1_000_000,
                "s" => 1_000_000_000,
                "m" => 60_000_000_000,
                "h" => 3_600_000_000_000,
                _ => {
                    return Err(DurationError(format!(
                        "unknown unit {unit:?} in duration {orig:?}"
                    )));
                }
            };
            let int: u128 = if int_part.is_empty() {
                0
            } else {
                int_part.parse().map_err(|_| invalid())?
            };
            let mut value = int.checked_mul(scale).ok_or_else(invalid)?;
            // Like Go, fraction digits beyond the unit's precision are dropped.
            let mut frac_scale = scale;
            for d in frac_part.bytes() {
                frac_scale /= 10;
                if frac_scale == 0 {
                    break;
                }
                value += u128::from(d - b'0') * frac_scale;
            }
            total = total.checked_add(value).ok_or_else(invalid)?;
            if total > 1u128 << 63 {
                return Err(invalid());
            }
        }
        if neg {
            Ok(Self(
                i64::try_from(-(total as i128)).map_err(|_| invalid())?,
            ))
        } else {
            Ok(Self(i64::try_from(total).map_err(|_| invalid())?))
        }
    }
}

impl fmt::Display for GoDuration {
    /// Go `Duration.String()`: `0s`, `500ms`, `1.5µs`, `15s`, `1m30s`, `12h0m0s`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 == 0 {
            return f.write_str("0s");
        }
        let sign = if self.0 < 0 { "-" } else { "" };
        let u = self.0.unsigned_abs();
        fn frac(v: u64, digits: u32) -> String {
            // `v` holds `digits` fractional digits; print them without trailing zeros.
            let s = format!("{v:0width$}", width = digits as usize);
            let s = s.trim_end_matches('0');
            if s.is_empty() {
                String::new()
            } else {
                format!(".{s}")
            }
        }
        if u < 1_000_000_000 {
            let (whole, rest, digits, unit) = if u < 1_000 {
                (u, 0, 0, "ns")
            } else if u < 1_000_000 {
                (u / 1_000, u % 1_000, 3, "\u{00b5}s")
            } else {
                (u / 1_000_000, u % 1_000_000, 6, "ms")
            };
            let fr = if digits == 0 {
                String::new()
            } else {
                frac(rest, digits)
            };
            return write!(f, "{sign}{whole}{fr}{unit}");
        }
        let secs = u / 1_000_000_000;
        let fr = frac(u % 1_000_000_000, 9);
        let (h, m, s) = (secs / 3600, (secs / 60) % 60, secs % 60);
        if h > 0 {
            write!(f, "{sign}{h}h{m}m{s}{fr}s")
        } else if secs >= 60 {
            write!(f, "{sign}{m}m{s}{fr}s")
        } else {
            write!(f, "{sign}{s}{fr}s")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duration_parsing_follows_go() {
        let ok = |s: &str| s.parse::<GoDuration>().expect(s).as_nanos();
        assert_eq!(ok("0"), 0);
        assert_eq!(ok("15s"), 15_000_000_000);
        assert_eq!(ok("1m30s"), 90_000_000_000);
        assert_eq!(ok("12h0m0s"), 12 * 3600 * 1_000_000_000);
        assert_eq!(ok("500ms"), 500_000_000);
        assert_eq!(ok("1.5s"), 1_500_000_000);
        assert_eq!(ok(".5s"), 500_000_000);
        assert_eq!(ok("1h1m1s1ms1us1ns"), 3_661_001_001_001);
        assert_eq!(ok("1µs"), 1_000);
        assert_eq!(ok("1μs"), 1_000);
        assert_eq!(ok("-1.5h"), -5_400_000_000_000);
        assert_eq!(ok("+10s"), 10_000_000_000);
        assert_eq!(ok("2562047h47m16.854775807s"), i64::MAX);
        let err = |s: &str| s.parse::<GoDuration>().expect_err(s).to_string();
        assert_eq!(err(""), r#"time: invalid duration """#);
        assert_eq!(err("1"), r#"time: missing unit in duration "1""#);
        assert_eq!(err("1x"), r#"time: unknown unit "x" in duration "1x""#);
        assert_eq!(err("."), r#"time: invalid duration ".""#);
        assert_eq!(err("2."), r#"time: missing unit in duration "2.""#);
        assert_eq!(err("s"), r#"time: invalid duration "s""#);
        assert_eq!(err("-"), r#"time: invalid duration "-""#);
        assert_eq!(
            err("9999999999h"),
            r#"time: invalid duration "9999999999h""#
        );
    }

    #[test]
    fn duration_display_follows_go() {
        let show = |n: i64| GoDuration::from_nanos(n).to_string();
        assert_eq!(show(0), "0s");
        assert_eq!(show(1), "1ns");
        assert_eq!(show(1_500), "1.5µs");
        assert_eq!(show(500_000_000), "500ms");
        assert_eq!(show(15_000_000_000), "15s");
        assert_eq!(show(90_000_000_000), "1m30s");
        assert_eq!(show(60_000_000_000), "1m0s");
        assert_eq!(show(12 * 3_600_000_000_000), "12h0m0s");
        assert_eq!(show(1_500_000_000), "1.5s");
        assert_eq!(show(-2_000_000_000), "-2s");
        for s in ["15s", "1m30s", "12h0m0s", "500ms", "1.5s", "2h3m4.005s"] {
            assert_eq!(s.parse::<GoDuration>().expect(s).to_string(), s);
        }
    }
}
