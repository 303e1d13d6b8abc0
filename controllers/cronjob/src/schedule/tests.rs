//! Tables from robfig/cron v3.0.1 `parser_test.go` and `spec_test.go`.

use super::*;

fn tz(name: &str) -> TimeZone {
    jiff::tz::db().get(name).expect("zone")
}

/// Parses robfig's test time formats: `Mon Jul 9 15:04[:05] 2012` (in UTC, the local zone of
/// these tests), `2012-03-11T00:00:00-0500` (in a fixed zone of that offset), either optionally
/// prefixed with `TZ=<zone> ` (then that zone is the time's location). Returns the instant
/// and the zone it is expressed in; `""` is Go's zero time.
fn time(value: &str) -> (Timestamp, TimeZone) {
    if value.is_empty() {
        return (zero_time(), TimeZone::UTC);
    }
    let (zone, value) = match value.strip_prefix("TZ=") {
        Some(rest) => {
            let (name, v) = rest.split_once(' ').expect("TZ=<zone> <time>");
            (Some(tz(name)), v)
        }
        None => (None, value),
    };
    if let Ok(z) = jiff::fmt::strtime::parse("%Y-%m-%dT%H:%M:%S%z", value) {
        let ts = z.to_timestamp().expect("timestamp");
        let zone = zone.unwrap_or_else(|| TimeZone::fixed(z.offset().expect("offset")));
        return (ts, zone);
    }
    let parts: Vec<&str> = value.split_whitespace().collect();
    assert_eq!(parts.len(), 5, "{value}");
    let month = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ]
    .iter()
    .position(|m| *m == parts[1])
    .expect("month") as i64
        + 1;
    let day: i64 = parts[2].parse().expect("day");
    let hms: Vec<i64> = parts[3]
        .split(':')
        .map(|p| p.parse().expect("hms"))
        .collect();
    let year: i64 = parts[4].parse().expect("year");
    let zone = zone.unwrap_or(TimeZone::UTC);
    let u = go_date(
        year,
        month,
        day,
        hms[0],
        hms[1],
        hms.get(2).copied().unwrap_or(0),
        &zone,
    );
    (Timestamp::from_second(u).expect("ts"), zone)
}

#[test]
fn activation() {
    let cases: &[(&str, &str, bool)] = &[
        ("Mon Jul 9 15:00 2012", "0/15 * * * *", true),
        ("Mon Jul 9 15:45 2012", "0/15 * * * *", true),
        ("Mon Jul 9 15:40 2012", "0/15 * * * *", false),
        ("Mon Jul 9 15:05 2012", "5/15 * * * *", true),
        ("Mon Jul 9 15:20 2012", "5/15 * * * *", true),
        ("Mon Jul 9 15:50 2012", "5/15 * * * *", true),
        ("Sun Jul 15 15:00 2012", "0/15 * * Jul *", true),
        ("Sun Jul 15 15:00 2012", "0/15 * * Jun *", false),
        ("Sun Jul 15 08:30 2012", "30 08 ? Jul Sun", true),
        ("Sun Jul 15 08:30 2012", "30 08 15 Jul ?", true),
        ("Mon Jul 16 08:30 2012", "30 08 ? Jul Sun", false),
        ("Mon Jul 16 08:30 2012", "30 08 15 Jul ?", false),
        ("Mon Jul 9 15:00 2012", "@hourly", true),
        ("Mon Jul 9 15:04 2012", "@hourly", false),
        ("Mon Jul 9 15:00 2012", "@daily", false),
        ("Mon Jul 9 00:00 2012", "@daily", true),
        ("Mon Jul 9 00:00 2012", "@weekly", false),
        ("Sun Jul 8 00:00 2012", "@weekly", true),
        ("Sun Jul 8 01:00 2012", "@weekly", false),
        ("Sun Jul 8 00:00 2012", "@monthly", false),
        ("Sun Jul 1 00:00 2012", "@monthly", true),
        // Both day fields restricted: either may match.
        ("Sun Jul 15 00:00 2012", "* * 1,15 * Sun", true),
        ("Fri Jun 15 00:00 2012", "* * 1,15 * Sun", true),
        ("Wed Aug 1 00:00 2012", "* * 1,15 * Sun", true),
        ("Sun Jul 15 00:00 2012", "* * */10 * Sun", true),
        // One starred: both must match.
        ("Sun Jul 15 00:00 2012", "* * * * Mon", false),
        ("Mon Jul 9 00:00 2012", "* * 1,15 * *", false),
        ("Sun Jul 15 00:00 2012", "* * 1,15 * *", true),
        ("Sun Jul 15 00:00 2012", "* * */2 * Sun", true),
        // Not robfig's: the yearly descriptors and names.
        ("Sun Jan 1 00:00 2012", "@yearly", true),
        ("Sun Jan 1 00:00 2012", "@annually", true),
        ("Mon Jan 2 00:00 2012", "@yearly", false),
        ("Sun Jan 1 00:00 2012", "@midnight", true),
        ("Mon Jul 9 03:00 2012", "0 3 * * 1", true),
        ("Tue Jul 10 03:00 2012", "0 3 * * 1", false),
        ("Tue Jul 10 04:00 2012", "0 0-23/2 * * *", true),
        ("Tue Jul 10 05:00 2012", "0 */2 * * *", false),
        ("Tue Jul 10 05:00 2012", "0 * * * MON-fri", true),
        ("Sat Jul 14 05:00 2012", "0 * * * mon-FRI", false),
    ];
    for (t, spec, expected) in cases {
        let sched = parse_standard(spec).unwrap_or_else(|e| panic!("{spec}: {e}"));
        let (at, zone) = time(t);
        let actual = sched.next(at - jiff::SignedDuration::from_secs(1), &zone);
        assert_eq!(actual == at, *expected, "{spec} on {t}: next = {actual}");
    }
}

#[test]
#[allow(
    clippy::too_many_lines,
    reason = "one test of a sequence of cases, read top to bottom"
)]
fn next() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "Mon Jul 9 14:45 2012",
            "0 0/15 * * * *",
            "Mon Jul 9 15:00 2012",
        ),
        (
            "Mon Jul 9 14:59 2012",
            "0 0/15 * * * *",
            "Mon Jul 9 15:00 2012",
        ),
        (
            "Mon Jul 9 14:59:59 2012",
            "0 0/15 * * * *",
            "Mon Jul 9 15:00 2012",
        ),
        (
            "Mon Jul 9 15:45 2012",
            "0 20-35/15 * * * *",
            "Mon Jul 9 16:20 2012",
        ),
        (
            "Mon Jul 9 23:46 2012",
            "0 */15 * * * *",
            "Tue Jul 10 00:00 2012",
        ),
        (
            "Mon Jul 9 23:45 2012",
            "0 20-35/15 * * * *",
            "Tue Jul 10 00:20 2012",
        ),
        (
            "Mon Jul 9 23:35:51 2012",
            "15/35 20-35/15 * * * *",
            "Tue Jul 10 00:20:15 2012",
        ),
        (
            "Mon Jul 9 23:35:51 2012",
            "15/35 20-35/15 1/2 * * *",
            "Tue Jul 10 01:20:15 2012",
        ),
        (
            "Mon Jul 9 23:35:51 2012",
            "15/35 20-35/15 10-12 * * *",
            "Tue Jul 10 10:20:15 2012",
        ),
        (
            "Mon Jul 9 23:35:51 2012",
            "15/35 20-35/15 1/2 */2 * *",
            "Thu Jul 11 01:20:15 2012",
        ),
        (
            "Mon Jul 9 23:35:51 2012",
            "15/35 20-35/15 * 9-20 * *",
            "Wed Jul 10 00:20:15 2012",
        ),
        (
            "Mon Jul 9 23:35:51 2012",
            "15/35 20-35/15 * 9-20 Jul *",
            "Wed Jul 10 00:20:15 2012",
        ),
        (
            "Mon Jul 9 23:35 2012",
            "0 0 0 9 Apr-Oct ?",
            "Thu Aug 9 00:00 2012",
        ),
        (
            "Mon Jul 9 23:35 2012",
            "0 0 0 */5 Apr,Aug,Oct Mon",
            "Tue Aug 1 00:00 2012",
        ),
        (
            "Mon Jul 9 23:35 2012",
            "0 0 0 */5 Oct Mon",
            "Mon Oct 1 00:00 2012",
        ),
        (
            "Mon Jul 9 23:35 2012",
            "0 0 0 * Feb Mon",
            "Mon Feb 4 00:00 2013",
        ),
        (
            "Mon Jul 9 23:35 2012",
            "0 0 0 * Feb Mon/2",
            "Fri Feb 1 00:00 2013",
        ),
        (
            "Mon Dec 31 23:59:45 2012",
            "0 * * * * *",
            "Tue Jan 1 00:00:00 2013",
        ),
        (
            "Mon Jul 9 23:35 2012",
            "0 0 0 29 Feb ?",
            "Mon Feb 29 00:00 2016",
        ),
        // Spring forward, 2am EST -> 3am EDT.
        (
            "2012-03-11T00:00:00-0500",
            "TZ=America/New_York 0 30 2 11 Mar ?",
            "2013-03-11T02:30:00-0400",
        ),
        (
            "2012-03-11T00:00:00-0500",
            "TZ=America/New_York 0 0 * * * ?",
            "2012-03-11T01:00:00-0500",
        ),
        (
            "2012-03-11T01:00:00-0500",
            "TZ=America/New_York 0 0 * * * ?",
            "2012-03-11T03:00:00-0400",
        ),
        (
            "2012-03-11T03:00:00-0400",
            "TZ=America/New_York 0 0 * * * ?",
            "2012-03-11T04:00:00-0400",
        ),
        (
            "2012-03-11T04:00:00-0400",
            "TZ=America/New_York 0 0 * * * ?",
            "2012-03-11T05:00:00-0400",
        ),
        (
            "2012-03-11T00:00:00-0500",
            "CRON_TZ=America/New_York 0 0 * * * ?",
            "2012-03-11T01:00:00-0500",
        ),
        (
            "2012-03-11T01:00:00-0500",
            "CRON_TZ=America/New_York 0 0 * * * ?",
            "2012-03-11T03:00:00-0400",
        ),
        (
            "2012-03-11T03:00:00-0400",
            "CRON_TZ=America/New_York 0 0 * * * ?",
            "2012-03-11T04:00:00-0400",
        ),
        (
            "2012-03-11T04:00:00-0400",
            "CRON_TZ=America/New_York 0 0 * * * ?",
            "2012-03-11T05:00:00-0400",
        ),
        (
            "2012-03-11T00:00:00-0500",
            "TZ=America/New_York 0 0 1 * * ?",
            "2012-03-11T01:00:00-0500",
        ),
        (
            "2012-03-11T01:00:00-0500",
            "TZ=America/New_York 0 0 1 * * ?",
            "2012-03-12T01:00:00-0400",
        ),
        // 2am does not exist that day: skipped.
        (
            "2012-03-11T00:00:00-0500",
            "TZ=America/New_York 0 0 2 * * ?",
            "2012-03-12T02:00:00-0400",
        ),
        // Fall back, 2am EDT -> 1am EST.
        (
            "2012-11-04T00:00:00-0400",
            "TZ=America/New_York 0 30 2 04 Nov ?",
            "2012-11-04T02:30:00-0500",
        ),
        (
            "2012-11-04T01:45:00-0400",
            "TZ=America/New_York 0 30 1 04 Nov ?",
            "2012-11-04T01:30:00-0500",
        ),
        (
            "2012-11-04T00:00:00-0400",
            "TZ=America/New_York 0 0 * * * ?",
            "2012-11-04T01:00:00-0400",
        ),
        (
            "2012-11-04T01:00:00-0400",
            "TZ=America/New_York 0 0 * * * ?",
            "2012-11-04T01:00:00-0500",
        ),
        (
            "2012-11-04T01:00:00-0500",
            "TZ=America/New_York 0 0 * * * ?",
            "2012-11-04T02:00:00-0500",
        ),
        // 1am runs twice.
        (
            "2012-11-04T00:00:00-0400",
            "TZ=America/New_York 0 0 1 * * ?",
            "2012-11-04T01:00:00-0400",
        ),
        (
            "2012-11-04T01:00:00-0400",
            "TZ=America/New_York 0 0 1 * * ?",
            "2012-11-04T01:00:00-0500",
        ),
        (
            "2012-11-04T01:00:00-0500",
            "TZ=America/New_York 0 0 1 * * ?",
            "2012-11-05T01:00:00-0500",
        ),
        (
            "2012-11-04T00:00:00-0400",
            "TZ=America/New_York 0 0 2 * * ?",
            "2012-11-04T02:00:00-0500",
        ),
        (
            "2012-11-04T02:00:00-0500",
            "TZ=America/New_York 0 0 2 * * ?",
            "2012-11-05T02:00:00-0500",
        ),
        (
            "2012-11-04T00:00:00-0400",
            "TZ=America/New_York 0 0 3 * * ?",
            "2012-11-04T03:00:00-0500",
        ),
        (
            "2012-11-04T03:00:00-0500",
            "TZ=America/New_York 0 0 3 * * ?",
            "2012-11-05T03:00:00-0500",
        ),
        // The same, with the zone coming from the time instead of the schedule.
        (
            "TZ=America/New_York 2012-11-04T00:00:00-0400",
            "0 0 * * * ?",
            "2012-11-04T01:00:00-0400",
        ),
        (
            "TZ=America/New_York 2012-11-04T01:00:00-0400",
            "0 0 * * * ?",
            "2012-11-04T01:00:00-0500",
        ),
        (
            "TZ=America/New_York 2012-11-04T01:00:00-0500",
            "0 0 * * * ?",
            "2012-11-04T02:00:00-0500",
        ),
        (
            "TZ=America/New_York 2012-11-04T00:00:00-0400",
            "0 0 1 * * ?",
            "2012-11-04T01:00:00-0400",
        ),
        (
            "TZ=America/New_York 2012-11-04T01:00:00-0400",
            "0 0 1 * * ?",
            "2012-11-04T01:00:00-0500",
        ),
        (
            "TZ=America/New_York 2012-11-04T01:00:00-0500",
            "0 0 1 * * ?",
            "2012-11-05T01:00:00-0500",
        ),
        (
            "TZ=America/New_York 2012-11-04T00:00:00-0400",
            "0 0 2 * * ?",
            "2012-11-04T02:00:00-0500",
        ),
        (
            "TZ=America/New_York 2012-11-04T02:00:00-0500",
            "0 0 2 * * ?",
            "2012-11-05T02:00:00-0500",
        ),
        (
            "TZ=America/New_York 2012-11-04T00:00:00-0400",
            "0 0 3 * * ?",
            "2012-11-04T03:00:00-0500",
        ),
        (
            "TZ=America/New_York 2012-11-04T03:00:00-0500",
            "0 0 3 * * ?",
            "2012-11-05T03:00:00-0500",
        ),
        // Unsatisfiable.
        ("Mon Jul 9 23:35 2012", "0 0 0 30 Feb ?", ""),
        ("Mon Jul 9 23:35 2012", "0 0 0 31 Apr ?", ""),
        (
            "TZ=America/New_York 2012-11-04T00:00:00-0400",
            "0 0 3 3 * ?",
            "2012-12-03T03:00:00-0500",
        ),
        // Midnight that does not exist (robfig issue 157).
        (
            "2018-10-17T05:00:00-0400",
            "TZ=America/Sao_Paulo 0 0 9 10 * ?",
            "2018-11-10T06:00:00-0500",
        ),
        (
            "2018-02-14T05:00:00-0500",
            "TZ=America/Sao_Paulo 0 0 9 22 * ?",
            "2018-02-22T07:00:00-0500",
        ),
    ];
    for (t, spec, expected) in cases {
        let sched = parse_with_seconds(spec).unwrap_or_else(|e| panic!("{spec}: {e}"));
        let (at, zone) = time(t);
        let (want, _) = time(expected);
        assert_eq!(sched.next(at, &zone), want, "{t}, {spec:?}");
    }
}

#[test]
fn next_in_fixed_zone() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "2016-01-03T13:09:03+0530",
            "14 14 * * *",
            "2016-01-03T14:14:00+0530",
        ),
        (
            "2016-01-03T04:09:03+0530",
            "14 14 * * ?",
            "2016-01-03T14:14:00+0530",
        ),
        (
            "2016-01-03T14:09:03+0530",
            "14 14 * * *",
            "2016-01-03T14:14:00+0530",
        ),
        (
            "2016-01-03T14:00:00+0530",
            "14 14 * * ?",
            "2016-01-03T14:14:00+0530",
        ),
    ];
    for (t, spec, expected) in cases {
        let sched = parse_standard(spec).expect("parses");
        let (at, zone) = time(t);
        let (want, _) = time(expected);
        assert_eq!(sched.next(at, &zone), want, "{t}, {spec:?}");
    }
}

#[test]
fn every() {
    let at: Timestamp = "2016-05-19T10:00:00.5Z".parse().expect("ts");
    let cases: &[(&str, i64)] = &[
        ("@every 5m", 300),
        ("@every 1h30m", 5400),
        ("@every 90s", 90),
        ("@every 1.5s", 1),
        ("@every 10ms", 1),
        ("@every -5m", 1),
        ("@every 0", 1),
        ("@every 2h", 7200),
    ];
    for (spec, secs) in cases {
        let sched = parse_standard(spec).unwrap_or_else(|e| panic!("{spec}: {e}"));
        assert!(
            matches!(sched, Schedule::Every { delay_seconds } if delay_seconds == *secs),
            "{spec}"
        );
        let want: Timestamp = "2016-05-19T10:00:00Z".parse().expect("ts");
        assert_eq!(
            sched.next(at, &TimeZone::UTC),
            want + jiff::SignedDuration::from_secs(*secs),
            "{spec}"
        );
    }
}

fn bits(spec: &str) -> [u64; 6] {
    match parse_standard(spec).unwrap_or_else(|e| panic!("{spec}: {e}")) {
        Schedule::Spec(s) => [s.second, s.minute, s.hour, s.dom, s.month, s.dow],
        Schedule::Every { .. } => panic!("{spec} is @every"),
    }
}

#[test]
fn ranges_and_fields() {
    let r = |expr: &str, min, max| {
        get_range(
            expr,
            &Bounds {
                min,
                max,
                names: &[],
            },
        )
    };
    assert_eq!(r("5", 0, 7), Ok(1 << 5));
    assert_eq!(r("0", 0, 7), Ok(1));
    assert_eq!(r("7", 0, 7), Ok(1 << 7));
    assert_eq!(r("5-5", 0, 7), Ok(1 << 5));
    assert_eq!(r("5-6", 0, 7), Ok(1 << 5 | 1 << 6));
    assert_eq!(r("5-7", 0, 7), Ok(1 << 5 | 1 << 6 | 1 << 7));
    assert_eq!(r("5-6/2", 0, 7), Ok(1 << 5));
    assert_eq!(r("5-7/2", 0, 7), Ok(1 << 5 | 1 << 7));
    assert_eq!(r("5-7/1", 0, 7), Ok(1 << 5 | 1 << 6 | 1 << 7));
    assert_eq!(r("*", 1, 3), Ok(1 << 1 | 1 << 2 | 1 << 3 | STAR_BIT));
    assert_eq!(r("*/2", 1, 3), Ok(1 << 1 | 1 << 3));
    assert_eq!(r("*/1", 1, 3), Ok(1 << 1 | 1 << 2 | 1 << 3 | STAR_BIT));
    let errs: &[(&str, u64, u64, &str)] = &[
        ("5--5", 0, 0, "too many hyphens: 5--5"),
        (
            "jan-x",
            0,
            0,
            "failed to parse int from jan: strconv.Atoi: parsing \"jan\": invalid syntax",
        ),
        (
            "2-x",
            1,
            5,
            "failed to parse int from x: strconv.Atoi: parsing \"x\": invalid syntax",
        ),
        ("*/-12", 0, 0, "negative number (-12) not allowed: -12"),
        ("*//2", 0, 0, "too many slashes: *//2"),
        ("1", 3, 5, "beginning of range (1) below minimum (3): 1"),
        ("6", 3, 5, "end of range (6) above maximum (5): 6"),
        (
            "5-3",
            3,
            5,
            "beginning of range (5) beyond end of range (3): 5-3",
        ),
        (
            "*/0",
            0,
            0,
            "step of range should be a positive number: */0",
        ),
    ];
    for (expr, min, max, want) in errs {
        assert_eq!(
            r(expr, *min, *max),
            Err(ParseError(want.to_string())),
            "{expr}"
        );
    }
    let f = |expr: &str| {
        get_field(
            expr,
            &Bounds {
                min: 1,
                max: 7,
                names: &[],
            },
        )
    };
    assert_eq!(f("5"), Ok(1 << 5));
    assert_eq!(f("5,6"), Ok(1 << 5 | 1 << 6));
    assert_eq!(f("5,6,7"), Ok(1 << 5 | 1 << 6 | 1 << 7));
    assert_eq!(f("1,5-7/2,3"), Ok(1 << 1 | 1 << 5 | 1 << 7 | 1 << 3));
    // Empty list items are skipped, as by Go's strings.FieldsFunc.
    assert_eq!(f("5,,6"), Ok(1 << 5 | 1 << 6));
    assert_eq!(all(&MINUTES), 0xfffffffffffffff | STAR_BIT);
    assert_eq!(all(&HOURS), 0xffffff | STAR_BIT);
    assert_eq!(all(&DOM), 0xfffffffe | STAR_BIT);
    assert_eq!(all(&MONTHS), 0x1ffe | STAR_BIT);
    assert_eq!(all(&DOW), 0x7f | STAR_BIT);
    assert_eq!(get_bits(1, 5, 2), 0x2a);
    assert_eq!(get_bits(1, 4, 2), 0xa);
    // A step larger than the range is legal.
    assert_eq!(bits("*/61 * * * *")[1], 1);
}

#[test]
fn standard_spec_bits() {
    assert_eq!(
        bits("5 * * * *"),
        [1, 1 << 5, all(&HOURS), all(&DOM), all(&MONTHS), all(&DOW)]
    );
    assert_eq!(bits("@yearly"), [1, 1, 1, 1 << 1, 1 << 1, all(&DOW)]);
    assert_eq!(bits("@annually"), bits("0 0 1 1 *"));
    assert_eq!(bits("@monthly"), bits("0 0 1 * *"));
    assert_eq!(bits("@weekly")[..5], bits("0 0 * * 0")[..5]);
    assert_eq!(bits("@daily"), bits("0 0 * * *"));
    assert_eq!(bits("@midnight"), bits("0 0 * * *"));
    assert_eq!(bits("@hourly"), bits("0 * * * *"));
    assert_eq!(bits("0 0 ? * ?"), bits("0 0 * * *"));
    assert_eq!(bits("0 0 * JAN,dec Sun-sat"), bits("0 0 * 1,12 0-6"));
    assert!(matches!(
        parse_standard("CRON_TZ=UTC  5 * * * *"),
        Ok(Schedule::Spec(SpecSchedule {
            location: Location::Zone(_),
            ..
        }))
    ));
    assert!(matches!(
        parse_standard("TZ=Asia/Tokyo @midnight"),
        Ok(Schedule::Spec(SpecSchedule {
            location: Location::Zone(_),
            ..
        }))
    ));
    assert!(matches!(
        parse_standard("5 * * * *"),
        Ok(Schedule::Spec(SpecSchedule {
            location: Location::Local,
            ..
        }))
    ));
}

#[test]
fn parse_errors() {
    let cases: &[(&str, &str)] = &[
        ("", "empty spec string"),
        ("xyz", "expected exactly 5 fields, found 1: [xyz]"),
        ("* * * *", "expected exactly 5 fields, found 4: [* * * *]"),
        (
            "* * * * * *",
            "expected exactly 5 fields, found 6: [* * * * * *]",
        ),
        ("60 0 * * *", "end of range (60) above maximum (59): 60"),
        ("0 60 * * *", "end of range (60) above maximum (23): 60"),
        ("61 * * * *", "end of range (61) above maximum (59): 61"),
        (
            "0 0 * * XYZ",
            "failed to parse int from XYZ: strconv.Atoi: parsing \"XYZ\": invalid syntax",
        ),
        (
            "5 j * * *",
            "failed to parse int from j: strconv.Atoi: parsing \"j\": invalid syntax",
        ),
        ("0 0 0 * *", "beginning of range (0) below minimum (1): 0"),
        ("0 0 * * 7", "end of range (7) above maximum (6): 7"),
        (
            "@every Xm",
            "failed to parse duration @every Xm: time: invalid duration \"Xm\"",
        ),
        (
            "@every 5",
            "failed to parse duration @every 5: time: missing unit in duration \"5\"",
        ),
        (
            "@every 5y",
            "failed to parse duration @every 5y: time: unknown unit \"y\" in duration \"5y\"",
        ),
        ("@every", "unrecognized descriptor: @every"),
        ("@unrecognized", "unrecognized descriptor: @unrecognized"),
        ("@Daily", "unrecognized descriptor: @Daily"),
        (
            "TZ=America/New_York 15/0 * * * *",
            "step of range should be a positive number: 15/0",
        ),
        (
            "TZ=Europe/Pariss * * * * *",
            "provided bad location Europe/Pariss: unknown time zone Europe/Pariss",
        ),
        (
            "TZ=* * * * *",
            "provided bad location *: unknown time zone *",
        ),
        (
            "CRON_TZ=UTC",
            "runtime error: slice bounds out of range [:-1]",
        ),
    ];
    for (spec, want) in cases {
        match parse_standard(spec) {
            Ok(_) => panic!("{spec:?} parsed"),
            Err(e) => assert_eq!(e.0, *want, "{spec:?}"),
        }
    }
}

#[test]
fn locations_load_like_go() {
    assert!(matches!(load_location(""), Ok(Location::Zone(_))));
    assert!(matches!(load_location("UTC"), Ok(Location::Zone(_))));
    assert!(matches!(load_location("Local"), Ok(Location::Local)));
    assert!(matches!(load_location("Asia/Tokyo"), Ok(Location::Zone(_))));
    assert_eq!(
        load_location("asia/tokyo").err().as_deref(),
        Some("unknown time zone asia/tokyo")
    );
    assert_eq!(
        load_location("../etc/passwd").err().as_deref(),
        Some("time: invalid location name")
    );
    // "TZ= ..." is UTC, as LoadLocation("") is.
    let s = parse_standard("TZ= 0 9 * * *").expect("parses");
    let at: Timestamp = "2020-01-01T00:00:00Z".parse().expect("ts");
    let tokyo = tz("Asia/Tokyo");
    assert_eq!(
        s.next(at, &tokyo),
        "2020-01-01T09:00:00Z".parse::<Timestamp>().expect("ts")
    );
}

#[test]
fn schedule_zone_overrides_local() {
    let s = parse_standard("TZ=Asia/Tokyo 0 9 * * *").expect("parses");
    let at: Timestamp = "2020-01-01T00:00:00Z".parse().expect("ts");
    // 09:00 in Tokyo is 00:00 UTC; the next one is a day later.
    assert_eq!(
        s.next(at, &TimeZone::UTC),
        "2020-01-02T00:00:00Z".parse::<Timestamp>().expect("ts")
    );
    let local = parse_standard("0 9 * * *").expect("parses");
    assert_eq!(
        local.next(at, &tz("Asia/Tokyo")),
        "2020-01-02T00:00:00Z".parse::<Timestamp>().expect("ts")
    );
    assert_eq!(
        local.next(at, &TimeZone::UTC),
        "2020-01-01T09:00:00Z".parse::<Timestamp>().expect("ts")
    );
}

#[test]
fn go_date_normalizes_like_go() {
    let utc = TimeZone::UTC;
    let ts = |u: i64| Timestamp::from_second(u).expect("ts").to_string();
    assert_eq!(
        ts(go_date(2012, 13, 1, 0, 0, 0, &utc)),
        "2013-01-01T00:00:00Z"
    );
    assert_eq!(
        ts(go_date(2013, 2, 29, 0, 0, 0, &utc)),
        "2013-03-01T00:00:00Z"
    );
    assert_eq!(
        ts(go_date(2012, 1, 32, 0, 0, 0, &utc)),
        "2012-02-01T00:00:00Z"
    );
    // 02:30 does not exist in New York on 2012-03-11: Go resolves it to 01:30 EST.
    let ny = tz("America/New_York");
    assert_eq!(
        ts(go_date(2012, 3, 11, 2, 30, 0, &ny)),
        "2012-03-11T06:30:00Z"
    );
    // 01:30 exists twice on 2012-11-04: Go picks the first (EDT).
    assert_eq!(
        ts(go_date(2012, 11, 4, 1, 30, 0, &ny)),
        "2012-11-04T05:30:00Z"
    );
}

#[test]
fn go_durations() {
    let parse_go_duration = |s: &str| {
        s.parse::<GoDuration>()
            .map(GoDuration::as_nanos)
            .map_err(|e| e.to_string())
    };
    assert_eq!(parse_go_duration("1h30m"), Ok(5_400_000_000_000));
    assert_eq!(parse_go_duration("1.5h"), Ok(5_400_000_000_000));
    assert_eq!(parse_go_duration(".5s"), Ok(500_000_000));
    assert_eq!(parse_go_duration("-1m"), Ok(-60_000_000_000));
    assert_eq!(parse_go_duration("0"), Ok(0));
    assert_eq!(parse_go_duration("300ms"), Ok(300_000_000));
    assert!(parse_go_duration("2562047h").is_ok());
    assert_eq!(
        parse_go_duration("2562048h"),
        Err("time: invalid duration \"2562048h\"".to_string())
    );
    assert_eq!(
        parse_go_duration(""),
        Err("time: invalid duration \"\"".to_string())
    );
    assert_eq!(
        parse_go_duration("."),
        Err("time: invalid duration \".\"".to_string())
    );
}
