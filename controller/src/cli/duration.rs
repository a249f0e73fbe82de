//! Parsing of duration flags such as `90s`, `5m`, `1h30m` or `250ms`.

use std::time::Duration;

/// Parses a duration made of `<number><unit>` parts with units `ms`, `s`, `m`, `h`
/// (`1h30m`, `90s`, `250ms`); a bare number means seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err("empty duration".to_owned());
    }
    if let Ok(seconds) = text.parse::<u64>() {
        return Ok(Duration::from_secs(seconds));
    }
    let mut total = Duration::ZERO;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if digits == 0 {
            return Err(format!(
                "{text:?} is not a duration such as 90s, 5m or 1h30m"
            ));
        }
        let value: u64 = rest[..digits]
            .parse()
            .map_err(|_| format!("{text:?} has a number out of range"))?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let part = match &rest[..unit_len] {
            "ms" => Duration::from_millis(value),
            "s" => Duration::from_secs(value),
            "m" => Duration::from_secs(value.saturating_mul(60)),
            "h" => Duration::from_secs(value.saturating_mul(3600)),
            unit => {
                return Err(format!(
                    "{text:?} has unknown unit {unit:?} (use ms, s, m or h)"
                ))
            }
        };
        total = total.saturating_add(part);
        rest = &rest[unit_len..];
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_with_units_add_up() {
        let cases = [
            ("90", 90_000),
            ("90s", 90_000),
            ("5m", 300_000),
            ("1h30m", 5_400_000),
            ("250ms", 250),
            ("2m5s", 125_000),
        ];
        for (text, millis) in cases {
            assert_eq!(
                parse_duration(text),
                Ok(Duration::from_millis(millis)),
                "{text}"
            );
        }
    }

    #[test]
    fn malformed_durations_are_rejected_with_the_reason() {
        assert_eq!(parse_duration(""), Err("empty duration".to_owned()));
        assert!(parse_duration("soon")
            .unwrap_err()
            .contains("not a duration"));
        assert!(parse_duration("5d")
            .unwrap_err()
            .contains("unknown unit \"d\""));
        assert!(parse_duration("m5").unwrap_err().contains("not a duration"));
    }
}
