//! Numbers with units on the command line and in budgets files: sizes, times, percentages and
//! address ranges. Every value is checked for range here, so that a typo gets one line and
//! never a panic.

use std::time::Duration;

/// A number (fractions allowed) and what follows it, the unit, trimmed.
fn number_and_unit(s: &str) -> Option<(f64, &str)> {
    let t = s.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num.parse().ok()?;
    n.is_finite().then_some((n, unit.trim()))
}

/// A size in bytes: a number (fractions allowed) with an optional unit, case-insensitive:
/// `B`; binary `K`/`KiB`, `M`/`MiB`, `G`/`GiB`, `T`/`TiB`; decimal `KB`, `MB`, `GB`, `TB`
/// (powers of 1000, as GNU coreutils reads them). `4096`, `512KiB`, `1.5GiB`, `64MB`.
/// Computed in decimal, exactly, and a fraction of a byte dropped: a budget of `72.2656KiB`
/// (73,999.97 bytes) allows 73,999 bytes, never 74,000.
///
/// # Errors
/// A message for a malformed number, an unknown unit, or a size beyond 2^64 - 1 bytes.
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let malformed = || format!("`{s}` is not a size (try 524288, 512KiB or 1.5GiB)");
    let t = s.trim();
    if t.starts_with('-') {
        return Err(format!("`{s}` is negative: a size is 0 or more"));
    }
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let mult: u128 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        "t" | "tib" => 1 << 40,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        _ => {
            return Err(format!(
                "unknown unit in `{s}` (use B, KiB, MiB, GiB, TiB, or KB, MB, GB, TB for powers of 1000)"
            ))
        }
    };
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    if (int.is_empty() && frac.is_empty()) || frac.contains('.') {
        return Err(malformed());
    }
    // Bytes = digits x unit / 10^places. Any size below 2^64 with at most 17 places keeps
    // digits x unit below 2^64 x 10^17 < 2^128, so an overflow means too large.
    if frac.len() > 17 {
        return Err(format!("`{s}` has more than 17 decimal places"));
    }
    let too_large = || format!("`{s}` is too large");
    let digits: u128 = match format!("{int}{frac}").trim_start_matches('0') {
        "" => 0,
        d if d.len() > 38 => return Err(too_large()),
        d => d.parse().map_err(|_| malformed())?,
    };
    let bytes = digits.checked_mul(mult).ok_or_else(too_large)? / 10u128.pow(frac.len() as u32);
    u64::try_from(bytes).map_err(|_| too_large())
}

/// `v` rounded to a u64, `None` past 2^64 - 1.
fn whole(v: f64) -> Option<u64> {
    let v = v.round();
    // 2^64 itself is the first f64 past u64::MAX.
    (v < 18_446_744_073_709_551_616.0).then_some(v as u64)
}

/// A sampling rate: a size of at least one byte.
pub fn parse_size(s: &str) -> Result<u64, String> {
    match parse_bytes(s)? {
        0 => Err("the sampling rate must be at least 1 byte".into()),
        v => Ok(v),
    }
}

/// A percentage, `10%` or `10` (at least 0).
pub fn parse_percent(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let v: f64 =
        t.strip_suffix('%').unwrap_or(t).trim().parse().map_err(|_| format!("`{s}` is not a percentage (try 10%)"))?;
    if v.is_finite() && v >= 0.0 {
        Ok(v)
    } else {
        Err(format!("`{s}` is not a percentage of 0 or more"))
    }
}

/// A time in nanoseconds: a number (fractions allowed) with a unit, `ns`, `us` (`µs`), `ms`,
/// `s`, `m` (`min`) or `h`; nanoseconds without one. `250ms`, `1.5s`, `2m`.
///
/// # Errors
/// A message for a malformed number, an unknown unit, or more than 2^64 - 1 ns (584 years).
pub fn parse_time(s: &str) -> Result<u64, String> {
    parse_time_or(s, 1.0)
}

/// A duration: as [`parse_time`], but a plain number is seconds (`10`, `0.5`, `250ms`, `1.5m`).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    parse_time_or(s, 1e9).map(Duration::from_nanos)
}

/// A time in ns, a plain number counting `plain` ns.
fn parse_time_or(s: &str, plain: f64) -> Result<u64, String> {
    let (n, unit) = number_and_unit(s).ok_or_else(|| format!("`{s}` is not a time (try 250ms, 1.5s or 2m)"))?;
    let mult = match unit {
        "" => plain,
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        "m" | "min" => 60e9,
        "h" => 3600e9,
        _ => return Err(format!("unknown unit in `{s}` (use ns, us, ms, s, m or h)")),
    };
    whole(n * mult).ok_or_else(|| format!("`{s}` is too long (at most 584 years)"))
}

/// `LO-HI`, hexadecimal with or without `0x`.
pub fn parse_range(s: &str) -> Result<(u64, u64), String> {
    let bad = || format!("`{s}` is not an address range (try 0x55d0c0000000-0x55d0c1000000)");
    let (lo, hi) = s.split_once('-').ok_or_else(bad)?;
    let hex = |x: &str| u64::from_str_radix(x.trim().trim_start_matches("0x"), 16).map_err(|_| bad());
    let (lo, hi) = (hex(lo)?, hex(hi)?);
    if lo >= hi {
        return Err(format!("`{s}`: the range is empty"));
    }
    Ok((lo, hi))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_and_ranges_parse() {
        assert_eq!(parse_time("250ms"), Ok(250_000_000));
        assert_eq!(parse_time("1.5s"), Ok(1_500_000_000));
        assert_eq!(parse_time("2000"), Ok(2000));
        assert!(parse_time("3 weeks").is_err());
        assert_eq!(parse_range("0x10-0x20"), Ok((16, 32)));
        assert!(parse_range("0x20-0x10").is_err());
    }

    #[test]
    fn durations_take_minutes_and_refuse_what_overflows() {
        assert_eq!(parse_duration("10"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("0.5"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("1.5m"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("5min"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        for bad in ["99999999999999999999", "1e20", "1e30s", "-1", "inf", "NaN", "", "2 fortnights"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
        assert!(parse_time("99999999999h").is_err());
    }

    #[test]
    fn sizes_parse_with_binary_and_decimal_units() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("512KiB"), Ok(512 << 10));
        assert_eq!(parse_size("512k"), Ok(512 << 10));
        assert_eq!(parse_size("1MiB"), Ok(1 << 20));
        assert_eq!(parse_bytes("1.5GiB"), Ok(3 << 29));
        assert_eq!(parse_bytes("4MB"), Ok(4_000_000));
        assert_eq!(parse_bytes("1.5GB"), Ok(1_500_000_000));
        assert_eq!(parse_bytes("16TiB"), Ok(16 << 40));
        assert!(parse_bytes("16777216TiB").is_err());
        assert!(parse_bytes("-3").is_err());
        assert!(parse_size("0").is_err());
        assert!(parse_size("12 parsecs").is_err());
        assert!(parse_size("").is_err());
        for bad in [".", "1.2.3", "1e3", "0x10", "inf", "NaN"] {
            assert!(parse_bytes(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn sizes_are_exact_and_drop_a_fraction_of_a_byte() {
        // 72.2656 KiB is 73,999.97 bytes: a budget of it must not allow 74,000.
        assert_eq!(parse_bytes("72.2656KiB"), Ok(73_999));
        assert_eq!(parse_bytes("73999.6"), Ok(73_999));
        assert_eq!(parse_bytes("0.9999999999GiB"), Ok(1_073_741_823));
        // Decimal fractions that binary floating point misses stay exact.
        assert_eq!(parse_bytes("4.35KB"), Ok(4_350));
        assert_eq!(parse_bytes("1.1MB"), Ok(1_100_000));
        assert_eq!(parse_bytes(".5KiB"), Ok(512));
        assert_eq!(parse_bytes("000000000000000000000000000000000000000000042"), Ok(42));
        assert_eq!(parse_bytes("18446744073709551615"), Ok(u64::MAX));
        assert!(parse_bytes("18446744073709551616").is_err());
        assert!(parse_bytes("0.000000000000000001").is_err(), "18 places");
    }

    #[test]
    fn budgets_take_zero_and_percentages() {
        assert_eq!(parse_bytes("0"), Ok(0));
        assert_eq!(parse_bytes("64MiB"), Ok(64 << 20));
        assert_eq!(parse_percent("10%"), Ok(10.0));
        assert_eq!(parse_percent("2.5"), Ok(2.5));
        assert!(parse_percent("-3%").is_err());
        assert!(parse_percent("ten").is_err());
    }
}
