//! Retention policies: which versions a `forget` keeps and which it removes
//! (docs/STORAGE.md, "Expiry"; docs/API.md, `POST .../forget`).
//!
//! The rules mean what `restic forget`'s `--keep-*` options mean, so that users can bring
//! the policy they already run elsewhere: each source's versions form their own group, and
//! a version is kept when any rule keeps it.
//! - `keep_last` N: the N newest versions.
//! - `keep_hourly` / `daily` / `weekly` / `monthly` / `yearly` N: walking from the newest
//!   version to the oldest, a version is kept when its hour (day, ISO week, month, year)
//!   differs from that of the last version the rule kept, until the rule has kept N. So
//!   each of the N most recent periods that hold a version keeps its newest version.
//! - `keep_within` a span: every version whose time is at or after the group's newest time
//!   minus the span. Years and months are calendar ones, subtracted from the newest time's
//!   UTC date (a month before March 31 is the end of February); weeks, days, hours and
//!   minutes are fixed lengths.
//!
//! The time of a version is its manifest's `time` (the backup's start, by the client's
//! clock, in unix milliseconds), and every period is a UTC one, so a selection does not
//! depend on the server's time zone or on daylight saving. "Newest" orders by time, then by
//! id (a later commit has a higher id) for equal times.
//!
//! This module is pure: it chooses, the caller removes. A policy with no rule that can keep
//! anything ([`Policy::is_empty`]) keeps everything here; callers refuse it, because a
//! policy that keeps nothing is far more often a mistake than a wish to delete every version.

use std::{cmp::Reverse, collections::BTreeMap, fmt, str::FromStr};

use chrono::{DateTime, Datelike, Months, Utc};
use serde::{Deserialize, Deserializer, Serialize};

/// The largest count a `keep_*` rule accepts, and the largest number in a span.
pub const MAX_COUNT: u32 = 1_000_000;

const MINUTE_MS: i64 = 60_000;
const HOUR_MS: i64 = 60 * MINUTE_MS;
const DAY_MS: i64 = 24 * HOUR_MS;

/// A retention policy: the JSON `policy` object of `forget`, or the CLI's `--keep-*` flags.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Policy {
    #[serde(deserialize_with = "count", skip_serializing_if = "Option::is_none")]
    pub keep_last: Option<u32>,
    #[serde(deserialize_with = "count", skip_serializing_if = "Option::is_none")]
    pub keep_hourly: Option<u32>,
    #[serde(deserialize_with = "count", skip_serializing_if = "Option::is_none")]
    pub keep_daily: Option<u32>,
    #[serde(deserialize_with = "count", skip_serializing_if = "Option::is_none")]
    pub keep_weekly: Option<u32>,
    #[serde(deserialize_with = "count", skip_serializing_if = "Option::is_none")]
    pub keep_monthly: Option<u32>,
    #[serde(deserialize_with = "count", skip_serializing_if = "Option::is_none")]
    pub keep_yearly: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub keep_within: Option<Span>,
}

fn count<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    match Option::<u64>::deserialize(d)? {
        None => Ok(None),
        Some(n) if n <= MAX_COUNT as u64 => Ok(Some(n as u32)),
        Some(n) => Err(serde::de::Error::custom(format!(
            "count {n} is out of range (0..={MAX_COUNT})"
        ))),
    }
}

/// A rule of a policy: why a version is kept. Serialises as `"last"`, `"hourly"`, ...
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Reason {
    Last,
    Hourly,
    Daily,
    Weekly,
    Monthly,
    Yearly,
    Within,
}

/// A `keep_within` duration such as `30d`, `36h`, `90min`, or combined `1y6m2d`: `y` years,
/// `m` months, `w` weeks, `d` days, `h` hours, `min` minutes (`m` is months, as in restic).
/// Weeks are stored as days.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Span {
    pub years: u32,
    pub months: u32,
    pub days: u32,
    pub hours: u32,
    pub minutes: u32,
}

impl Span {
    /// The earliest time (unix ms) within this span of `newest`. `i64::MIN` when that lies
    /// before any representable date, so that everything is within.
    pub fn cutoff(&self, newest: i64) -> i64 {
        let months = self.years as u64 * 12 + self.months as u64;
        let Ok(months) = u32::try_from(months) else {
            return i64::MIN;
        };
        let Some(start) = utc(newest).checked_sub_months(Months::new(months)) else {
            return i64::MIN;
        };
        // Without months to subtract, `newest` itself is the start, not `utc`'s clamped form.
        let start = if months == 0 {
            newest
        } else {
            start.timestamp_millis()
        };
        let fixed = self.days as i64 * DAY_MS
            + self.hours as i64 * HOUR_MS
            + self.minutes as i64 * MINUTE_MS;
        start.checked_sub(fixed).unwrap_or(i64::MIN)
    }
}

impl FromStr for Span {
    type Err = String;

    fn from_str(text: &str) -> Result<Span, String> {
        let bad =
            |why: String| format!("bad duration {text:?}: {why} (e.g. 30d, 36h, 90min, 1y6m)");
        if text.is_empty() {
            return Err(bad("empty".into()));
        }
        let mut weeks = None;
        let (mut y, mut mo, mut d, mut h, mut mi) = (None, None, None, None, None);
        let mut rest = text;
        while !rest.is_empty() {
            let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
            if digits == 0 {
                return Err(bad(format!("expected a number at {rest:?}")));
            }
            let number: u32 = match rest[..digits].parse() {
                Ok(n) if n <= MAX_COUNT => n,
                _ => return Err(bad(format!("number {} above {MAX_COUNT}", &rest[..digits]))),
            };
            rest = &rest[digits..];
            let unit_len = rest.bytes().take_while(u8::is_ascii_alphabetic).count();
            let unit = &rest[..unit_len];
            rest = &rest[unit_len..];
            let slot = match unit {
                "y" => &mut y,
                "m" => &mut mo,
                "w" => &mut weeks,
                "d" => &mut d,
                "h" => &mut h,
                "min" => &mut mi,
                "" => return Err(bad(format!("number {number} has no unit"))),
                _ => return Err(bad(format!("unknown unit {unit:?}"))),
            };
            if slot.replace(number).is_some() {
                return Err(bad(format!("unit {unit:?} given twice")));
            }
        }
        let span = Span {
            years: y.unwrap_or(0),
            months: mo.unwrap_or(0),
            days: d.unwrap_or(0) + weeks.unwrap_or(0) * 7,
            hours: h.unwrap_or(0),
            minutes: mi.unwrap_or(0),
        };
        if span == Span::default() {
            return Err(bad("must be longer than zero".into()));
        }
        Ok(span)
    }
}

impl TryFrom<String> for Span {
    type Error = String;
    fn try_from(text: String) -> Result<Span, String> {
        text.parse()
    }
}

impl From<Span> for String {
    fn from(span: Span) -> String {
        span.to_string()
    }
}

impl fmt::Display for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts = [
            (self.years, "y"),
            (self.months, "m"),
            (self.days, "d"),
            (self.hours, "h"),
            (self.minutes, "min"),
        ];
        let mut any = false;
        for (n, unit) in parts {
            if n > 0 {
                write!(f, "{n}{unit}")?;
                any = true;
            }
        }
        if !any {
            f.write_str("0d")?;
        }
        Ok(())
    }
}

impl Policy {
    /// True when no rule can keep a version: every count absent or 0 and no `keep_within`.
    pub fn is_empty(&self) -> bool {
        self.counts().iter().all(|(_, n)| n.unwrap_or(0) == 0) && self.keep_within.is_none()
    }

    fn counts(&self) -> [(Reason, Option<u32>); 6] {
        [
            (Reason::Last, self.keep_last),
            (Reason::Hourly, self.keep_hourly),
            (Reason::Daily, self.keep_daily),
            (Reason::Weekly, self.keep_weekly),
            (Reason::Monthly, self.keep_monthly),
            (Reason::Yearly, self.keep_yearly),
        ]
    }

    /// Reads the CLI's `--keep-last N`, `--keep-hourly N`, `--keep-daily N`,
    /// `--keep-weekly N`, `--keep-monthly N`, `--keep-yearly N` and `--keep-within SPAN`
    /// (also as `--keep-x=V`), in any order. Every other argument is returned, in order, for
    /// the caller's own flags; so is an argument that follows one of them, which means a
    /// value of the caller's that itself starts with `--keep-` is read as a rule here.
    pub fn from_args<'a>(args: &[&'a str]) -> Result<(Policy, Vec<&'a str>), String> {
        let mut policy = Policy::default();
        let mut rest = Vec::new();
        let mut i = 0;
        while i < args.len() {
            let arg = args[i];
            i += 1;
            if !arg.starts_with("--keep-") {
                rest.push(arg);
                continue;
            }
            let (flag, value) = match arg.split_once('=') {
                Some((flag, value)) => (flag, value),
                None => {
                    let Some(value) = args.get(i) else {
                        return Err(format!("{arg} needs a value"));
                    };
                    i += 1;
                    (arg, *value)
                }
            };
            let name = &flag["--keep-".len()..];
            if name == "within" {
                if policy.keep_within.is_some() {
                    return Err(format!("{flag} given twice"));
                }
                policy.keep_within = Some(value.parse().map_err(|e| format!("{flag}: {e}"))?);
                continue;
            }
            let slot = match name {
                "last" => &mut policy.keep_last,
                "hourly" => &mut policy.keep_hourly,
                "daily" => &mut policy.keep_daily,
                "weekly" => &mut policy.keep_weekly,
                "monthly" => &mut policy.keep_monthly,
                "yearly" => &mut policy.keep_yearly,
                _ => {
                    return Err(format!(
                        "unknown flag {flag} (known: --keep-last, --keep-hourly, --keep-daily, \
                         --keep-weekly, --keep-monthly, --keep-yearly, --keep-within)"
                    ))
                }
            };
            let n = match value.parse::<u32>() {
                Ok(n) if n <= MAX_COUNT => n,
                _ => {
                    return Err(format!(
                        "{flag}: {value:?} is not a count (an integer 0..={MAX_COUNT})"
                    ))
                }
            };
            if slot.replace(n).is_some() {
                return Err(format!("{flag} given twice"));
            }
        }
        Ok((policy, rest))
    }
}

/// What a selection needs of a version (as the index lists it).
pub use super::index::versions::VersionMeta;

/// The outcome of a policy: the versions kept, each with the rules that keep it (in the
/// order of [`Reason`]; none under an empty policy), and the versions removed. Both lists
/// run newest first (time, then id, descending).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selection {
    pub keep: Vec<(i64, Vec<Reason>)>,
    pub remove: Vec<i64>,
}

/// Applies `policy` to each source's versions separately, or, with `source`, to that
/// source's versions only (the others then appear in neither list).
pub fn select(versions: &[VersionMeta], policy: &Policy, source: Option<&str>) -> Selection {
    let mut groups: BTreeMap<&str, Vec<&VersionMeta>> = BTreeMap::new();
    for v in versions {
        if source.is_none_or(|s| s == v.source) {
            groups.entry(&v.source).or_default().push(v);
        }
    }
    let mut keep = Vec::new();
    let mut remove = Vec::new();
    for group in groups.values_mut() {
        group.sort_by_key(|v| Reverse((v.time, v.id)));
        for (v, reasons) in group.iter().zip(reasons(group, policy)) {
            if reasons.is_empty() && !policy.is_empty() {
                remove.push((v.time, v.id));
            } else {
                keep.push(((v.time, v.id), reasons));
            }
        }
    }
    keep.sort_by_key(|k| Reverse(k.0));
    remove.sort_by_key(|&r| Reverse(r));
    Selection {
        keep: keep.into_iter().map(|((_, id), r)| (id, r)).collect(),
        remove: remove.into_iter().map(|(_, id)| id).collect(),
    }
}

/// The reasons each version of one group (sorted newest first) is kept for.
fn reasons(group: &[&VersionMeta], policy: &Policy) -> Vec<Vec<Reason>> {
    let mut out = vec![Vec::new(); group.len()];
    for (reason, n) in policy.counts() {
        let mut left = n.unwrap_or(0);
        let mut last_kept = None;
        for (v, r) in group.iter().zip(out.iter_mut()) {
            if left == 0 {
                break;
            }
            let key = bucket(reason, v.time);
            if key.is_none() || key != last_kept {
                r.push(reason);
                last_kept = key;
                left -= 1;
            }
        }
    }
    if let (Some(span), Some(newest)) = (policy.keep_within, group.first()) {
        let cutoff = span.cutoff(newest.time);
        for (v, r) in group.iter().zip(out.iter_mut()) {
            if v.time < cutoff {
                break;
            }
            r.push(Reason::Within);
        }
    }
    out
}

/// The UTC period of `time` that `reason` keeps one version of; `None` for `keep_last`,
/// under which every version stands alone (even beside one of the same time). Keys never
/// decrease as time grows.
fn bucket(reason: Reason, time: i64) -> Option<i64> {
    Some(match reason {
        Reason::Last | Reason::Within => return None,
        Reason::Hourly => time.div_euclid(HOUR_MS),
        Reason::Daily => time.div_euclid(DAY_MS),
        Reason::Weekly => {
            let week = utc(time).iso_week();
            week.year() as i64 * 100 + week.week() as i64
        }
        Reason::Monthly => {
            let t = utc(time);
            t.year() as i64 * 100 + t.month() as i64
        }
        Reason::Yearly => utc(time).year() as i64,
    })
}

/// `ms` as a UTC date and time, clamped to the dates chrono represents (a client clock can
/// be anything; far-off times then share the first or last week, month or year).
fn utc(ms: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(ms).unwrap_or(if ms < 0 {
        DateTime::<Utc>::MIN_UTC
    } else {
        DateTime::<Utc>::MAX_UTC
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::NaiveDate;
    use std::collections::HashSet;

    /// Unix ms of a UTC date and time.
    fn at(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> i64 {
        NaiveDate::from_ymd_opt(y, mo, d)
            .unwrap()
            .and_hms_opt(h, mi, 0)
            .unwrap()
            .and_utc()
            .timestamp_millis()
    }

    fn v(id: i64, source: &str, time: i64) -> VersionMeta {
        VersionMeta {
            id,
            source: source.into(),
            time,
        }
    }

    /// One version per given time, ids 1.. in the given order, all of source "s".
    fn series(times: &[i64]) -> Vec<VersionMeta> {
        times
            .iter()
            .enumerate()
            .map(|(i, &t)| v(i as i64 + 1, "s", t))
            .collect()
    }

    fn kept_ids(s: &Selection) -> Vec<i64> {
        s.keep.iter().map(|(id, _)| *id).collect()
    }

    fn policy(json: &str) -> Policy {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn keep_last_keeps_the_n_newest_ties_by_id() {
        let t = at(2024, 5, 1, 12, 0);
        // ids 1..=5; 3 and 4 share a time, so 4 counts as the newer.
        let vs = series(&[t, t + 1000, t + 2000, t + 2000, t - 5000]);
        let s = select(&vs, &policy(r#"{"keep_last": 3}"#), None);
        assert_eq!(kept_ids(&s), vec![4, 3, 2]);
        assert!(s.keep.iter().all(|(_, r)| r == &[Reason::Last]));
        assert_eq!(s.remove, vec![1, 5]);
        let s = select(&vs, &policy(r#"{"keep_last": 2}"#), None);
        assert_eq!(kept_ids(&s), vec![4, 3]);
        let s = select(&vs, &policy(r#"{"keep_last": 9}"#), None);
        assert_eq!(s.keep.len(), 5);
        assert!(s.remove.is_empty());
    }

    #[test]
    fn keep_hourly_keeps_the_newest_in_each_hour() {
        let vs = series(&[
            at(2024, 1, 1, 10, 5),    // 1
            at(2024, 1, 1, 10, 55),   // 2: newest of 10:00
            at(2024, 1, 1, 11, 0),    // 3: 11:00 starts a new hour
            at(2024, 1, 1, 12, 59),   // 4
            at(2024, 1, 1, 12, 1),    // 5
            at(2023, 12, 31, 23, 59), // 6
        ]);
        let s = select(&vs, &policy(r#"{"keep_hourly": 3}"#), None);
        assert_eq!(kept_ids(&s), vec![4, 3, 2]);
        assert_eq!(s.remove, vec![5, 1, 6]);
        let s = select(&vs, &policy(r#"{"keep_hourly": 10}"#), None);
        assert_eq!(kept_ids(&s), vec![4, 3, 2, 6]);
    }

    #[test]
    fn keep_daily_counts_days_that_have_a_version() {
        let vs = series(&[
            at(2020, 12, 31, 23, 59), // 1
            at(2021, 1, 1, 0, 0),     // 2
            at(2021, 1, 1, 18, 0),    // 3: newest of Jan 1
            at(2021, 1, 5, 9, 0),     // 4: Jan 2..4 have none
            at(2020, 12, 31, 0, 1),   // 5
            at(2020, 12, 20, 0, 0),   // 6
        ]);
        let s = select(&vs, &policy(r#"{"keep_daily": 3}"#), None);
        assert_eq!(kept_ids(&s), vec![4, 3, 1]);
        assert_eq!(s.remove, vec![2, 5, 6]);
    }

    #[test]
    fn keep_weekly_uses_iso_weeks_across_the_year_end() {
        // 2020-12-28 (Mon) .. 2021-01-03 (Sun) is ISO week 53 of 2020; 2021-01-04 starts
        // week 1 of 2021; 2020-12-27 (Sun) ends week 52.
        let vs = series(&[
            at(2020, 12, 27, 23, 0), // 1: 2020-W52
            at(2020, 12, 28, 0, 0),  // 2: 2020-W53
            at(2020, 12, 31, 12, 0), // 3: 2020-W53
            at(2021, 1, 1, 12, 0),   // 4: 2020-W53, the newest of that week
            at(2021, 1, 3, 23, 59),  // 5: 2020-W53, newer still
            at(2021, 1, 4, 0, 0),    // 6: 2021-W01
        ]);
        let s = select(&vs, &policy(r#"{"keep_weekly": 2}"#), None);
        assert_eq!(kept_ids(&s), vec![6, 5]);
        let s = select(&vs, &policy(r#"{"keep_weekly": 5}"#), None);
        assert_eq!(kept_ids(&s), vec![6, 5, 1]);
        assert_eq!(s.remove, vec![4, 3, 2]);
        // A calendar-year bucket splits the same week.
        let s = select(&vs, &policy(r#"{"keep_yearly": 5}"#), None);
        assert_eq!(kept_ids(&s), vec![6, 3]);
    }

    #[test]
    fn keep_monthly_and_yearly() {
        let vs = series(&[
            at(2022, 6, 15, 0, 0),    // 1
            at(2023, 1, 31, 23, 59),  // 2
            at(2023, 2, 1, 0, 0),     // 3
            at(2023, 2, 28, 8, 0),    // 4
            at(2023, 12, 31, 23, 59), // 5
            at(2024, 2, 29, 0, 0),    // 6
            at(2024, 1, 1, 0, 0),     // 7
        ]);
        let s = select(&vs, &policy(r#"{"keep_monthly": 4}"#), None);
        assert_eq!(kept_ids(&s), vec![6, 7, 5, 4]);
        assert_eq!(s.remove, vec![3, 2, 1]);
        let s = select(&vs, &policy(r#"{"keep_yearly": 2}"#), None);
        assert_eq!(kept_ids(&s), vec![6, 5]);
        let s = select(&vs, &policy(r#"{"keep_yearly": 3}"#), None);
        assert_eq!(kept_ids(&s), vec![6, 5, 1]);
    }

    #[test]
    fn keep_within_subtracts_calendar_months_from_the_newest() {
        let newest = at(2024, 3, 31, 12, 0);
        let vs = series(&[
            newest,
            at(2024, 3, 1, 0, 0),    // 2
            at(2024, 2, 29, 12, 0),  // 3: exactly one month before (Feb has no 31st)
            at(2024, 2, 29, 11, 59), // 4
            at(2024, 2, 28, 0, 0),   // 5
        ]);
        let s = select(&vs, &policy(r#"{"keep_within": "1m"}"#), None);
        assert_eq!(kept_ids(&s), vec![1, 2, 3]);
        assert!(s.keep.iter().all(|(_, r)| r == &[Reason::Within]));
        assert_eq!(s.remove, vec![4, 5]);
        // Not a leap year: a month before 2023-03-31 is 2023-02-28.
        let span: Span = "1m".parse().unwrap();
        assert_eq!(span.cutoff(at(2023, 3, 31, 0, 0)), at(2023, 2, 28, 0, 0));
        // A year before Feb 29 is Feb 28; months and days combine.
        let span: Span = "1y".parse().unwrap();
        assert_eq!(span.cutoff(at(2024, 2, 29, 6, 0)), at(2023, 2, 28, 6, 0));
        let span: Span = "1y6m2d3h30min".parse().unwrap();
        assert_eq!(span.cutoff(at(2024, 8, 31, 12, 0)), at(2023, 2, 26, 8, 30));
        let span: Span = "2w".parse().unwrap();
        assert_eq!(span.cutoff(at(2021, 1, 3, 0, 0)), at(2020, 12, 20, 0, 0));
        // Far past what chrono represents: everything is within.
        let span: Span = "1000000y".parse().unwrap();
        assert_eq!(span.cutoff(0), i64::MIN);
    }

    #[test]
    fn keep_within_is_relative_to_each_sources_newest() {
        let vs = vec![
            v(1, "a", at(2024, 1, 10, 0, 0)),
            v(2, "a", at(2024, 1, 1, 0, 0)),
            v(3, "b", at(2023, 6, 10, 0, 0)),
            v(4, "b", at(2023, 6, 5, 0, 0)),
            v(5, "b", at(2023, 5, 1, 0, 0)),
        ];
        let s = select(&vs, &policy(r#"{"keep_within": "7d"}"#), None);
        assert_eq!(kept_ids(&s), vec![1, 3, 4]);
        assert_eq!(s.remove, vec![2, 5]);
    }

    #[test]
    fn reasons_accumulate_across_rules() {
        let vs = series(&[
            at(2024, 1, 1, 9, 0),  // 1
            at(2024, 1, 2, 9, 0),  // 2
            at(2024, 1, 2, 10, 0), // 3
            at(2024, 1, 3, 9, 0),  // 4
            at(2023, 11, 5, 0, 0), // 5
        ]);
        let p = policy(
            r#"{"keep_last": 2, "keep_daily": 3, "keep_monthly": 2, "keep_yearly": 0,
                "keep_within": "12h"}"#,
        );
        let s = select(&vs, &p, None);
        use Reason::*;
        assert_eq!(
            s.keep,
            vec![
                (4, vec![Last, Daily, Monthly, Within]),
                (3, vec![Last, Daily]),
                (1, vec![Daily]),
                (5, vec![Monthly]),
            ]
        );
        assert_eq!(s.remove, vec![2]);
    }

    #[test]
    fn sources_are_separate_groups_and_the_filter_leaves_others_alone() {
        let t = at(2024, 4, 1, 0, 0);
        let vs = vec![
            v(1, "a", t),
            v(2, "b", t + 1),
            v(3, "a", t + 2),
            v(4, "b", t + 3),
            v(5, "c", t - 1),
        ];
        let p = policy(r#"{"keep_last": 1}"#);
        let s = select(&vs, &p, None);
        assert_eq!(kept_ids(&s), vec![4, 3, 5]);
        assert_eq!(s.remove, vec![2, 1]);
        let s = select(&vs, &p, Some("a"));
        assert_eq!(kept_ids(&s), vec![3]);
        assert_eq!(s.remove, vec![1]);
        let s = select(&vs, &p, Some("nobody"));
        assert_eq!(s, Selection::default());
    }

    #[test]
    fn an_empty_policy_keeps_everything() {
        let vs = series(&[1, 2, 3]);
        for p in [
            Policy::default(),
            policy(r#"{"keep_last": 0, "keep_daily": 0}"#),
        ] {
            assert!(p.is_empty());
            let s = select(&vs, &p, None);
            assert_eq!(s.keep, vec![(3, vec![]), (2, vec![]), (1, vec![])]);
            assert!(s.remove.is_empty());
        }
        assert!(!policy(r#"{"keep_yearly": 1}"#).is_empty());
        assert!(!policy(r#"{"keep_within": "1min"}"#).is_empty());
        assert_eq!(
            select(&[], &policy(r#"{"keep_last": 1}"#), None),
            Selection::default()
        );
    }

    #[test]
    fn times_far_outside_the_calendar_do_not_panic() {
        let vs = series(&[i64::MIN, -1, 0, i64::MAX, i64::MAX - 1]);
        let p = policy(
            r#"{"keep_hourly": 9, "keep_daily": 9, "keep_weekly": 9, "keep_monthly": 9,
                "keep_yearly": 9, "keep_within": "1000000y"}"#,
        );
        let s = select(&vs, &p, None);
        assert_eq!(s.keep.len(), 5);
        assert!(s.keep.iter().all(|(_, r)| r.contains(&Reason::Within)));
    }

    #[test]
    fn policy_json_is_checked() {
        let p = policy(r#"{"keep_last": 5, "keep_within": "1y6m", "keep_daily": null}"#);
        assert_eq!(p.keep_last, Some(5));
        assert_eq!(p.keep_daily, None);
        let within = p.keep_within.unwrap();
        assert_eq!((within.years, within.months, within.days), (1, 6, 0));
        assert_eq!(
            policy(r#"{"keep_last": 1000000}"#).keep_last,
            Some(MAX_COUNT)
        );
        for bad in [
            r#"{"keep_last": 1000001}"#,
            r#"{"keep_last": -1}"#,
            r#"{"keep_last": 1.5}"#,
            r#"{"keep_last": "3"}"#,
            r#"{"keep_lst": 3}"#,
            r#"{"keep_within": 30}"#,
            r#"{"keep_within": "30"}"#,
            r#"{"keep_within": "0d"}"#,
        ] {
            assert!(
                serde_json::from_str::<Policy>(bad).is_err(),
                "{bad} was accepted"
            );
        }
        let err = serde_json::from_str::<Policy>(r#"{"keep_last": 2000000}"#).unwrap_err();
        assert!(err.to_string().contains("out of range"), "{err}");
        // A policy serialises to what it was read from.
        let back = serde_json::to_string(&p).unwrap();
        assert_eq!(back, r#"{"keep_last":5,"keep_within":"1y6m"}"#);
        assert_eq!(
            serde_json::to_string(&Reason::Within).unwrap(),
            r#""within""#
        );
    }

    #[test]
    fn spans_parse_and_reject_clearly() {
        let s: Span = "90min".parse().unwrap();
        assert_eq!(s.minutes, 90);
        assert_eq!(s.months, 0);
        let s: Span = "90m".parse().unwrap();
        assert_eq!(s.months, 90);
        let s: Span = "2w3d".parse().unwrap();
        assert_eq!(s.days, 17);
        let s: Span = "36h".parse().unwrap();
        assert_eq!(s.to_string(), "36h");
        assert_eq!("1y6m2d".parse::<Span>().unwrap().to_string(), "1y6m2d");
        for (bad, why) in [
            ("", "empty"),
            ("30", "no unit"),
            ("d", "expected a number"),
            ("3x", "unknown unit"),
            ("3mins", "unknown unit"),
            ("1d2d", "twice"),
            ("0y0d", "longer than zero"),
            ("1000001d", "above"),
            ("99999999999999999999d", "above"),
            ("-3d", "expected a number"),
            ("3 d", "no unit"),
            ("1d ", "expected a number"),
        ] {
            let err = bad.parse::<Span>().unwrap_err();
            assert!(err.contains(why), "{bad:?}: {err}");
        }
    }

    #[test]
    fn cli_flags_parse_in_any_order_and_pass_the_rest_through() {
        let args = [
            "--source",
            "Photos",
            "--keep-daily",
            "7",
            "--dry-run",
            "--keep-within=1y6m",
            "--keep-last",
            "0",
        ];
        let (p, rest) = Policy::from_args(&args).unwrap();
        assert_eq!(rest, vec!["--source", "Photos", "--dry-run"]);
        assert_eq!(p.keep_daily, Some(7));
        assert_eq!(p.keep_last, Some(0));
        assert_eq!(p.keep_within, Some("1y6m".parse().unwrap()));
        assert_eq!(p.keep_hourly, None);
        let (p, rest) = Policy::from_args(&[
            "--keep-hourly=1",
            "--keep-weekly",
            "2",
            "--keep-monthly",
            "3",
            "--keep-yearly",
            "4",
        ])
        .unwrap();
        assert!(rest.is_empty());
        assert_eq!(
            (p.keep_hourly, p.keep_weekly, p.keep_monthly, p.keep_yearly),
            (Some(1), Some(2), Some(3), Some(4))
        );
        let (p, _) = Policy::from_args(&[]).unwrap();
        assert!(p.is_empty());
        for (args, why) in [
            (&["--keep-lats", "3"][..], "unknown flag --keep-lats"),
            (&["--keep-last"][..], "needs a value"),
            (&["--keep-last", "-1"][..], "not a count"),
            (&["--keep-last", "many"][..], "not a count"),
            (&["--keep-last=1000001"][..], "not a count"),
            (&["--keep-daily", "1", "--keep-daily=2"][..], "given twice"),
            (&["--keep-within", "5q"][..], "--keep-within: bad duration"),
            (&["--keep-within=1d", "--keep-within=2d"][..], "given twice"),
        ] {
            let err = Policy::from_args(args).unwrap_err();
            assert!(err.contains(why), "{args:?}: {err}");
        }
    }

    /// A small deterministic generator, so that a failure is reproducible.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    /// The ISO week of a UTC time, named by the day number of its Monday, computed without
    /// chrono: day 0 (1970-01-01) is a Thursday.
    fn oracle_week(time: i64) -> i64 {
        let day = time.div_euclid(DAY_MS);
        day - (day + 3).rem_euclid(7)
    }

    /// A period of the oracle: a number naming the hour (day, ...) of a time.
    type Period = fn(i64) -> i64;

    /// The expected selection, computed another way: for a period rule, the distinct
    /// periods that hold a version, the N latest of them, and the newest version in each;
    /// for keep_last, the N first after sorting; for keep_within, a comparison with the
    /// cutoff of each source's newest version.
    fn oracle(versions: &[VersionMeta], policy: &Policy) -> Vec<(i64, Vec<Reason>)> {
        let newer = |a: &VersionMeta, b: &VersionMeta| (a.time, a.id) > (b.time, b.id);
        let mut reasons: BTreeMap<i64, Vec<Reason>> = BTreeMap::new();
        let sources: HashSet<&str> = versions.iter().map(|v| v.source.as_str()).collect();
        for source in sources {
            let group: Vec<&VersionMeta> = versions.iter().filter(|v| v.source == source).collect();
            let periods: [(Reason, Option<u32>, Period); 5] = [
                (Reason::Hourly, policy.keep_hourly, |t| {
                    t.div_euclid(HOUR_MS)
                }),
                (Reason::Daily, policy.keep_daily, |t| t.div_euclid(DAY_MS)),
                (Reason::Weekly, policy.keep_weekly, oracle_week),
                (Reason::Monthly, policy.keep_monthly, |t| {
                    let d = utc(t);
                    d.year() as i64 * 12 + d.month0() as i64
                }),
                (Reason::Yearly, policy.keep_yearly, |t| utc(t).year() as i64),
            ];
            let mut add = |id: i64, r: Reason| reasons.entry(id).or_default().push(r);
            if let Some(n) = policy.keep_last {
                for v in &group {
                    let newer_ones = group.iter().filter(|w| newer(w, v)).count();
                    if newer_ones < n as usize {
                        add(v.id, Reason::Last);
                    }
                }
            }
            for (reason, n, period) in periods {
                let Some(n) = n else { continue };
                let mut distinct: Vec<i64> = group.iter().map(|v| period(v.time)).collect();
                distinct.sort_unstable();
                distinct.dedup();
                let latest: Vec<i64> = distinct.into_iter().rev().take(n as usize).collect();
                for v in &group {
                    let p = period(v.time);
                    let newest_in_period =
                        group.iter().all(|w| period(w.time) != p || !newer(w, v));
                    if latest.contains(&p) && newest_in_period {
                        add(v.id, reason);
                    }
                }
            }
            if let Some(span) = policy.keep_within {
                let newest = group.iter().map(|v| v.time).max().unwrap();
                let back = |d: DateTime<Utc>| {
                    let months = span.years * 12 + span.months;
                    d.checked_sub_months(Months::new(months)).unwrap()
                        - chrono::Duration::days(span.days as i64)
                        - chrono::Duration::hours(span.hours as i64)
                        - chrono::Duration::minutes(span.minutes as i64)
                };
                let cutoff = back(utc(newest)).timestamp_millis();
                for v in &group {
                    if v.time >= cutoff {
                        add(v.id, Reason::Within);
                    }
                }
            }
        }
        let mut out: Vec<(i64, Vec<Reason>)> = reasons.into_iter().collect();
        for (_, r) in &mut out {
            r.sort();
        }
        out
    }

    #[test]
    fn random_series_match_a_brute_force_oracle() {
        let mut rng = Rng(0x5eed);
        let base = at(2020, 12, 20, 0, 0);
        for round in 0..400 {
            // Times cluster around the 2020/2021 year end (a 53-week ISO year), with many
            // shared hours, days and exact ties.
            let spread = [HOUR_MS * 6, DAY_MS * 3, DAY_MS * 40, DAY_MS * 900][round % 4];
            let n = 1 + rng.below(40) as i64;
            let versions: Vec<VersionMeta> = (1..=n)
                .map(|id| {
                    let source = ["a", "b", "c"][rng.below(3) as usize];
                    let time = base + (rng.below(spread as u64 / 60_000) as i64) * 60_000;
                    v(id, source, time)
                })
                .collect();
            let rule = |rng: &mut Rng| match rng.below(3) {
                0 => None,
                _ => Some(rng.below(6) as u32),
            };
            let p = Policy {
                keep_last: rule(&mut rng),
                keep_hourly: rule(&mut rng),
                keep_daily: rule(&mut rng),
                keep_weekly: rule(&mut rng),
                keep_monthly: rule(&mut rng),
                keep_yearly: rule(&mut rng),
                keep_within: match rng.below(3) {
                    0 => None,
                    _ => Some(Span {
                        years: rng.below(2) as u32,
                        months: rng.below(3) as u32,
                        days: rng.below(10) as u32,
                        hours: rng.below(30) as u32,
                        minutes: 1 + rng.below(90) as u32,
                    }),
                },
            };
            if p.is_empty() {
                continue;
            }
            let s = select(&versions, &p, None);
            let mut got = s.keep.clone();
            got.sort();
            assert_eq!(
                got,
                oracle(&versions, &p),
                "round {round}: {p:?} {versions:?}"
            );
            let kept: HashSet<i64> = got.iter().map(|(id, _)| *id).collect();
            let removed: HashSet<i64> = s.remove.iter().copied().collect();
            assert_eq!(kept.len() + removed.len(), versions.len(), "round {round}");
            assert!(kept.is_disjoint(&removed), "round {round}");
            // Restricted to one source, the answer is that source's part of the whole.
            let only_a = select(&versions, &p, Some("a"));
            let is_a = |id: &i64| versions[*id as usize - 1].source == "a";
            let want_keep: Vec<_> = s.keep.iter().filter(|(id, _)| is_a(id)).cloned().collect();
            let want_remove: Vec<_> = s.remove.iter().filter(|id| is_a(id)).copied().collect();
            assert_eq!(only_a.keep, want_keep, "round {round}");
            assert_eq!(only_a.remove, want_remove, "round {round}");
        }
    }
}
