//! Cron schedules as the CronJob controller reads them: `ParseStandard` and `Next` of
//! `github.com/robfig/cron/v3` v3.0.1 (`parser.go`, `spec.go`, `constantdelay.go`), the
//! library upstream vendors.
//!
//! Parity matters more than elegance here: which instants a schedule yields (including the
//! daylight-saving quirks of robfig's field-by-field search, which adds calendar days with Go's
//! `time.Date` normalization and hours as absolute durations) decides which Jobs exist and
//! what they are called. So this module reproduces Go's `time.Date` zone resolution and the
//! search loop step by step, on whole seconds, and takes zone offsets from jiff's tz database.
//!
//! - 5 fields: minute, hour, day of month, month (`1-12` or `jan`..`dec`), day of week (`0-6` or
//!   `sun`..`sat`); each a comma list of `*`, `?`, `N`, `N-M`, optionally `/step`.
//! - Day of month and day of week: if either field is "starred" (`*`/`?` without a step above
//!   1) both must match, otherwise either may match.
//! - `@yearly`, `@annually`, `@monthly`, `@weekly`, `@daily`, `@midnight`, `@hourly`,
//!   `@every <Go duration>`.
//! - A `TZ=<zone> ` or `CRON_TZ=<zone> ` prefix sets the schedule's zone; without one the
//!   schedule is evaluated in the zone of the time it is asked about (the controller's local
//!   zone).

use std::fmt;

use jiff::Timestamp;
use jiff::tz::TimeZone;
use rkcm_runtime::duration::GoDuration;

/// Set in a field's bits when the field was written `*` or `?` (robfig's `starBit`).
pub const STAR_BIT: u64 = 1 << 63;

/// Seconds from the Unix epoch to Go's zero time (`0001-01-01T00:00:00Z`), which robfig
/// returns when a schedule never fires within five years.
const GO_ZERO_UNIX: i64 = -62_135_596_800;

/// Go's zero `time.Time`: what [`Schedule::next`] returns when nothing matches.
pub fn zero_time() -> Timestamp {
    Timestamp::from_second(GO_ZERO_UNIX).unwrap_or(Timestamp::MIN)
}

/// True for Go's zero time.
pub fn is_zero(t: Timestamp) -> bool {
    t == zero_time()
}

/// A schedule that cannot be parsed; the message is robfig's, word for word.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError(pub String);

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ParseError {}

fn err<T>(msg: String) -> Result<T, ParseError> {
    Err(ParseError(msg))
}

/// Where a schedule's wall-clock fields are read.
#[derive(Debug, Clone)]
pub enum Location {
    /// No `TZ=` prefix (or `TZ=Local`): the zone of the time passed to `next`.
    Local,
    /// A loaded zone.
    Zone(TimeZone),
}

/// Bit sets of one 6-field (seconds first) cron specification (robfig `SpecSchedule`).
#[derive(Debug, Clone)]
pub struct SpecSchedule {
    pub second: u64,
    pub minute: u64,
    pub hour: u64,
    pub dom: u64,
    pub month: u64,
    pub dow: u64,
    pub location: Location,
}

/// A parsed schedule.
#[derive(Debug, Clone)]
pub enum Schedule {
    Spec(SpecSchedule),
    /// `@every <d>`: `d` truncated to whole seconds, at least 1 s (robfig
    /// `ConstantDelaySchedule`).
    Every {
        delay_seconds: i64,
    },
}

struct Bounds {
    min: u64,
    max: u64,
    names: &'static [(&'static str, u64)],
}

const SECONDS: Bounds = Bounds {
    min: 0,
    max: 59,
    names: &[],
};
const MINUTES: Bounds = Bounds {
    min: 0,
    max: 59,
    names: &[],
};
const HOURS: Bounds = Bounds {
    min: 0,
    max: 23,
    names: &[],
};
const DOM: Bounds = Bounds {
    min: 1,
    max: 31,
    names: &[],
};
const MONTHS: Bounds = Bounds {
    min: 1,
    max: 12,
    names: &[
        ("jan", 1),
        ("feb", 2),
        ("mar", 3),
        ("apr", 4),
        ("may", 5),
        ("jun", 6),
        ("jul", 7),
        ("aug", 8),
        ("sep", 9),
        ("oct", 10),
        ("nov", 11),
        ("dec", 12),
    ],
};
const DOW: Bounds = Bounds {
    min: 0,
    max: 6,
    names: &[
        ("sun", 0),
        ("mon", 1),
        ("tue", 2),
        ("wed", 3),
        ("thu", 4),
        ("fri", 5),
        ("sat", 6),
    ],
};

/// Loads a zone as Go's `time.LoadLocation` does: `""` and `"UTC"` are UTC, `"Local"` is the
/// local zone, names are case-sensitive, and errors read like Go's.
pub fn load_location(name: &str) -> Result<Location, String> {
    if name.is_empty() || name == "UTC" {
        return Ok(Location::Zone(TimeZone::UTC));
    }
    if name == "Local" {
        return Ok(Location::Local);
    }
    if name.contains("..") || name.starts_with('/') || name.starts_with('\\') {
        return Err("time: invalid location name".to_string());
    }
    match jiff::tz::db().get(name) {
        // jiff looks names up case-insensitively; Go (on Linux) does not.
        Ok(tz) if tz.iana_name() == Some(name) => Ok(Location::Zone(tz)),
        _ => Err(format!("unknown time zone {name}")),
    }
}

/// `cron.ParseStandard`: 5 fields or a descriptor, with an optional `TZ=`/`CRON_TZ=` prefix.
pub fn parse_standard(spec: &str) -> Result<Schedule, ParseError> {
    parse(spec, false)
}

/// The 6-field (seconds first) parser of robfig's own tests; only for tests here.
#[cfg(test)]
pub(crate) fn parse_with_seconds(spec: &str) -> Result<Schedule, ParseError> {
    parse(spec, true)
}

fn parse(spec: &str, with_seconds: bool) -> Result<Schedule, ParseError> {
    if spec.is_empty() {
        return err("empty spec string".to_string());
    }
    let mut spec = spec;
    let mut location = Location::Local;
    if spec.starts_with("TZ=") || spec.starts_with("CRON_TZ=") {
        let Some(space) = spec.find(' ') else {
            // robfig slices with index -1 here and panics; the panic is reported as a
            // parse failure instead of taking the process down.
            return err("runtime error: slice bounds out of range [:-1]".to_string());
        };
        let eq = spec.find('=').unwrap_or(0);
        let name = &spec[eq + 1..space];
        location = match load_location(name) {
            Ok(l) => l,
            Err(e) => return err(format!("provided bad location {name}: {e}")),
        };
        spec = spec[space..].trim();
    }
    if spec.starts_with('@') {
        return parse_descriptor(spec, location);
    }
    let fields: Vec<&str> = spec.split_whitespace().collect();
    let expected = if with_seconds { 6 } else { 5 };
    if fields.len() != expected {
        return err(format!(
            "expected exactly {expected} fields, found {}: [{}]",
            fields.len(),
            fields.join(" ")
        ));
    }
    let mut all: Vec<&str> = Vec::with_capacity(6);
    if !with_seconds {
        all.push("0");
    }
    all.extend(fields);
    Ok(Schedule::Spec(SpecSchedule {
        second: get_field(all[0], &SECONDS)?,
        minute: get_field(all[1], &MINUTES)?,
        hour: get_field(all[2], &HOURS)?,
        dom: get_field(all[3], &DOM)?,
        month: get_field(all[4], &MONTHS)?,
        dow: get_field(all[5], &DOW)?,
        location,
    }))
}

fn get_field(field: &str, r: &Bounds) -> Result<u64, ParseError> {
    let mut bits = 0;
    for expr in field.split(',').filter(|e| !e.is_empty()) {
        bits |= get_range(expr, r)?;
    }
    Ok(bits)
}

fn get_range(expr: &str, r: &Bounds) -> Result<u64, ParseError> {
    let range_and_step: Vec<&str> = expr.split('/').collect();
    let low_and_high: Vec<&str> = range_and_step[0].split('-').collect();
    let single = low_and_high.len() == 1;
    let (start, mut end, mut extra);
    if low_and_high[0] == "*" || low_and_high[0] == "?" {
        start = r.min;
        end = r.max;
        extra = STAR_BIT;
    } else {
        start = parse_int_or_name(low_and_high[0], r.names)?;
        end = match low_and_high.len() {
            1 => start,
            2 => parse_int_or_name(low_and_high[1], r.names)?,
            _ => return err(format!("too many hyphens: {expr}")),
        };
        extra = 0;
    }
    let step = match range_and_step.len() {
        1 => 1,
        2 => {
            let step = parse_uint(range_and_step[1])?;
            if single {
                end = r.max;
            }
            if step > 1 {
                extra = 0;
            }
            step
        }
        _ => return err(format!("too many slashes: {expr}")),
    };
    if start < r.min {
        return err(format!(
            "beginning of range ({start}) below minimum ({}): {expr}",
            r.min
        ));
    }
    if end > r.max {
        return err(format!(
            "end of range ({end}) above maximum ({}): {expr}",
            r.max
        ));
    }
    if start > end {
        return err(format!(
            "beginning of range ({start}) beyond end of range ({end}): {expr}"
        ));
    }
    if step == 0 {
        return err(format!("step of range should be a positive number: {expr}"));
    }
    Ok(get_bits(start, end, step) | extra)
}

fn parse_int_or_name(expr: &str, names: &[(&str, u64)]) -> Result<u64, ParseError> {
    let lower = expr.to_lowercase();
    if let Some((_, v)) = names.iter().find(|(n, _)| *n == lower) {
        return Ok(*v);
    }
    parse_uint(expr)
}

/// robfig `mustParseInt`: Go's `strconv.Atoi`, then negative numbers refused.
fn parse_uint(expr: &str) -> Result<u64, ParseError> {
    match go_atoi(expr) {
        Err(e) => err(format!("failed to parse int from {expr}: {e}")),
        Ok(n) if n < 0 => err(format!("negative number ({n}) not allowed: {expr}")),
        Ok(n) => Ok(n as u64),
    }
}

/// Go's `strconv.Atoi` on a 64-bit platform, with its error text.
fn go_atoi(s: &str) -> Result<i64, String> {
    let syntax = || format!("strconv.Atoi: parsing {s:?}: invalid syntax");
    let range = || format!("strconv.Atoi: parsing {s:?}: value out of range");
    let (neg, digits) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() {
        return Err(syntax());
    }
    let mut n: u64 = 0;
    for b in digits.bytes() {
        if !b.is_ascii_digit() {
            return Err(syntax());
        }
        n = n
            .checked_mul(10)
            .and_then(|n| n.checked_add(u64::from(b - b'0')))
            .ok_or_else(range)?;
    }
    if neg {
        if n > 1 << 63 {
            return Err(range());
        }
        Ok((n as i64).wrapping_neg())
    } else {
        i64::try_from(n).map_err(|_| range())
    }
}

fn get_bits(min: u64, max: u64, step: u64) -> u64 {
    let mut bits = 0u64;
    let mut i = min;
    while i <= max {
        bits |= 1u64.checked_shl(i as u32).unwrap_or(0);
        match i.checked_add(step) {
            Some(n) => i = n,
            None => break,
        }
    }
    bits
}

fn all(r: &Bounds) -> u64 {
    get_bits(r.min, r.max, 1) | STAR_BIT
}

fn parse_descriptor(descriptor: &str, location: Location) -> Result<Schedule, ParseError> {
    let spec = |minute, hour, dom, month, dow| {
        Ok(Schedule::Spec(SpecSchedule {
            second: 1,
            minute,
            hour,
            dom,
            month,
            dow,
            location: location.clone(),
        }))
    };
    match descriptor {
        "@yearly" | "@annually" => return spec(1, 1, 1 << 1, 1 << 1, all(&DOW)),
        "@monthly" => return spec(1, 1, 1 << 1, all(&MONTHS), all(&DOW)),
        "@weekly" => return spec(1, 1, all(&DOM), all(&MONTHS), 1),
        "@daily" | "@midnight" => return spec(1, 1, all(&DOM), all(&MONTHS), all(&DOW)),
        "@hourly" => return spec(1, all(&HOURS), all(&DOM), all(&MONTHS), all(&DOW)),
        _ => {}
    }
    if let Some(d) = descriptor.strip_prefix("@every ") {
        return match d.parse::<GoDuration>() {
            Ok(duration) => {
                let nanos = duration.as_nanos().max(1_000_000_000);
                Ok(Schedule::Every {
                    delay_seconds: nanos / 1_000_000_000,
                })
            }
            Err(e) => err(format!("failed to parse duration {descriptor}: {e}")),
        };
    }
    err(format!("unrecognized descriptor: {descriptor}"))
}

impl Schedule {
    /// robfig `Schedule.Next`: the first activation strictly after `t`, or [`zero_time`]
    /// when none exists within five years. `local` is the zone `t` is expressed in (Go's
    /// `t.Location()`; the controller's local zone), used by schedules without a zone.
    pub fn next(&self, t: Timestamp, local: &TimeZone) -> Timestamp {
        let secs = floor_second(t);
        match self {
            Schedule::Every { delay_seconds } => from_unix(secs.saturating_add(*delay_seconds)),
            Schedule::Spec(s) => {
                // Go's zero time is in UTC, whatever the caller's zone.
                let utc = TimeZone::UTC;
                let local = if secs == GO_ZERO_UNIX { &utc } else { local };
                let loc = match &s.location {
                    Location::Local => local,
                    Location::Zone(tz) => tz,
                };
                match s.next_unix(secs, loc) {
                    Some(u) => from_unix(u),
                    None => zero_time(),
                }
            }
        }
    }
}

fn floor_second(t: Timestamp) -> i64 {
    let n = t.as_nanosecond();
    i64::try_from(n.div_euclid(1_000_000_000)).unwrap_or(GO_ZERO_UNIX)
}

fn from_unix(u: i64) -> Timestamp {
    Timestamp::from_second(u).unwrap_or(Timestamp::MAX)
}

/// Wall-clock fields of an instant in a zone.
struct Fields {
    year: i64,
    month: i64,
    day: i64,
    hour: i64,
    minute: i64,
    second: i64,
    weekday: i64,
}

fn offset(tz: &TimeZone, unix: i64) -> i64 {
    match Timestamp::from_second(unix) {
        Ok(ts) => i64::from(tz.to_offset(ts).seconds()),
        Err(_) => 0,
    }
}

fn fields(unix: i64, tz: &TimeZone) -> Fields {
    let local = unix + offset(tz, unix);
    let days = local.div_euclid(86_400);
    let secs = local.rem_euclid(86_400);
    let (year, month, day) = civil_from_days(days);
    Fields {
        year,
        month,
        day,
        hour: secs / 3600,
        minute: secs % 3600 / 60,
        second: secs % 60,
        // 1970-01-01 was a Thursday; Sunday is 0.
        weekday: (days + 4).rem_euclid(7),
    }
}

/// Go's `time.Date(y, m, d, h, min, s, 0, tz)`: out-of-range fields normalize (month 13 is
/// January of the next year, day 32 rolls into the next month), and a wall time that does not
/// exist or exists twice resolves as Go resolves it: with the offset in force at
/// `local - offset(local read as UTC)`.
fn go_date(y: i64, m: i64, d: i64, h: i64, min: i64, s: i64, tz: &TimeZone) -> i64 {
    let m0 = m - 1;
    let y = y + m0.div_euclid(12);
    let m = m0.rem_euclid(12) + 1;
    let local = (days_from_civil(y, m, 1) + d - 1) * 86_400 + h * 3600 + min * 60 + s;
    let guess = offset(tz, local);
    let utc = local - guess;
    local - offset(tz, utc)
}

fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

fn has(bits: u64, v: i64) -> bool {
    (0..64).contains(&v) && bits & (1u64 << v) != 0
}

impl SpecSchedule {
    fn day_matches(&self, f: &Fields) -> bool {
        let dom = has(self.dom, f.day);
        let dow = has(self.dow, f.weekday);
        if self.dom & STAR_BIT != 0 || self.dow & STAR_BIT != 0 {
            dom && dow
        } else {
            dom || dow
        }
    }

    /// robfig `SpecSchedule.Next` on whole Unix seconds, `t` already floored.
    fn next_unix(&self, t: i64, loc: &TimeZone) -> Option<i64> {
        // Start at the next second.
        let mut t = t + 1;
        let mut added = false;
        let year_limit = fields(t, loc).year + 5;
        'wrap: loop {
            let f = fields(t, loc);
            if f.year > year_limit {
                return None;
            }
            // Month.
            while !has(self.month, fields(t, loc).month) {
                let f = fields(t, loc);
                if !added {
                    added = true;
                    t = go_date(f.year, f.month, 1, 0, 0, 0, loc);
                }
                let f = fields(t, loc);
                t = go_date(f.year, f.month + 1, f.day, f.hour, f.minute, f.second, loc);
                if fields(t, loc).month == 1 {
                    continue 'wrap;
                }
            }
            // Day.
            while !self.day_matches(&fields(t, loc)) {
                let f = fields(t, loc);
                if !added {
                    added = true;
                    t = go_date(f.year, f.month, f.day, 0, 0, 0, loc);
                }
                let f = fields(t, loc);
                t = go_date(f.year, f.month, f.day + 1, f.hour, f.minute, f.second, loc);
                // Midnight may not exist (DST); get back to the start of the day.
                let h = fields(t, loc).hour;
                if h != 0 {
                    if h > 12 {
                        t += (24 - h) * 3600;
                    } else {
                        t -= h * 3600;
                    }
                }
                if fields(t, loc).day == 1 {
                    continue 'wrap;
                }
            }
            // Hour.
            while !has(self.hour, fields(t, loc).hour) {
                if !added {
                    added = true;
                    let f = fields(t, loc);
                    t = go_date(f.year, f.month, f.day, f.hour, 0, 0, loc);
                }
                t += 3600;
                if fields(t, loc).hour == 0 {
                    continue 'wrap;
                }
            }
            // Minute.
            while !has(self.minute, fields(t, loc).minute) {
                if !added {
                    added = true;
                    t -= (t - GO_ZERO_UNIX).rem_euclid(60);
                }
                t += 60;
                if fields(t, loc).minute == 0 {
                    continue 'wrap;
                }
            }
            // Second.
            while !has(self.second, fields(t, loc).second) {
                // Already on a whole second.
                added = true;
                t += 1;
                if fields(t, loc).second == 0 {
                    continue 'wrap;
                }
            }
            return Some(t);
        }
    }
}

#[cfg(test)]
mod tests;
