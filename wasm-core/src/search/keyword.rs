//! Keyword input: text (its UTF-8 bytes, case-sensitive) or hex for binary keywords.

use super::SearchError;

/// Turns what the user typed into keyword bytes.
///
/// * `hex == false`: the UTF-8 bytes of `text`, unchanged (no trimming, no case folding).
/// * `hex == true`: pairs of hex digits (either case). ASCII whitespace, `:` and `-` between
///   pairs are ignored and one leading `0x` is allowed, so `"de ad be ef"`, `"DEADBEEF"`,
///   `"0xdeadbeef"` and `"de:ad:be:ef"` all give the same 4 bytes. A separator inside a pair
///   or an odd number of digits is an error.
///
/// The result is never empty.
pub fn parse_keyword(text: &str, hex: bool) -> Result<Vec<u8>, SearchError> {
    if !hex {
        if text.is_empty() {
            return Err(SearchError::EmptyKeyword(0));
        }
        return Ok(text.as_bytes().to_vec());
    }
    let t = text.trim();
    let t = t
        .strip_prefix("0x")
        .or_else(|| t.strip_prefix("0X"))
        .unwrap_or(t);
    let mut out = Vec::with_capacity(t.len() / 2);
    let mut high: Option<u8> = None;
    for (pos, c) in t.char_indices() {
        if c.is_ascii_whitespace() || c == ':' || c == '-' {
            if high.is_some() {
                return Err(SearchError::BadHex { position: pos });
            }
            continue;
        }
        let v = c
            .to_digit(16)
            .ok_or(SearchError::BadHex { position: pos })? as u8;
        match high.take() {
            None => high = Some(v),
            Some(h) => out.push(h << 4 | v),
        }
    }
    if high.is_some() {
        return Err(SearchError::BadHex { position: t.len() });
    }
    if out.is_empty() {
        return Err(SearchError::EmptyKeyword(0));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_and_hex() {
        assert_eq!(parse_keyword("DeDup ", false).unwrap(), b"DeDup ");
        assert_eq!(parse_keyword("é", false).unwrap(), vec![0xc3, 0xa9]);
        for s in ["de ad be ef", "DEADBEEF", "0xdeadbeef", " de:ad-BE\tef "] {
            assert_eq!(
                parse_keyword(s, true).unwrap(),
                vec![0xde, 0xad, 0xbe, 0xef],
                "{s}"
            );
        }
        assert_eq!(parse_keyword("00", true).unwrap(), vec![0]);
        assert!(parse_keyword("", false).is_err());
        assert!(parse_keyword("  ", true).is_err());
        assert!(parse_keyword("abc", true).is_err());
        assert!(parse_keyword("a bc", true).is_err());
        assert!(parse_keyword("zz", true).is_err());
        assert!(parse_keyword("0x", true).is_err());
    }
}
