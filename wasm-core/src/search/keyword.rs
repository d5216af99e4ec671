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
    // Positions in errors are the input's, before trimming and the prefix.
    let trimmed = text.trim();
    let mut skip = text.len() - text.trim_start().len();
    let t = match trimmed
        .strip_prefix("0x")
        .or_else(|| trimmed.strip_prefix("0X"))
    {
        Some(rest) => {
            skip += 2;
            rest
        }
        None => trimmed,
    };
    let mut out = Vec::with_capacity(t.len() / 2);
    let mut high: Option<u8> = None;
    for (pos, c) in t.char_indices() {
        let position = skip + pos;
        if c.is_ascii_whitespace() || c == ':' || c == '-' {
            if high.is_some() {
                return Err(SearchError::BadHex { position });
            }
            continue;
        }
        let v = c.to_digit(16).ok_or(SearchError::BadHex { position })? as u8;
        match high.take() {
            None => high = Some(v),
            Some(h) => out.push(h << 4 | v),
        }
    }
    if high.is_some() {
        return Err(SearchError::BadHex {
            position: skip + t.len(),
        });
    }
    if out.is_empty() {
        return Err(SearchError::EmptyKeyword(0));
    }
    Ok(out)
}

/// What the user reads when keyword number `n` (1-based) of a query is refused: hex
/// positions counted from 1 in that keyword's line.
pub fn keyword_error(n: usize, e: &SearchError) -> String {
    match e {
        SearchError::BadHex { position } => {
            format!("keyword {n}: invalid hex at character {}", position + 1)
        }
        // Its own index is the one [`parse_keyword`] gives any keyword: 0.
        SearchError::EmptyKeyword(_) => format!("keyword {n} is empty"),
        other => format!("keyword {n}: {other}"),
    }
}

/// The keywords of a query typed one per line, as the Search tab's box holds them: lines
/// split at `\n` with a trailing `\r` dropped, empty lines ignored (with `hex`, blank ones
/// too), each line parsed by [`parse_keyword`]. The page's workers and the server's `POST
/// search` both read a query through this. An error names its keyword's number (1-based,
/// among the lines kept).
pub fn parse_keyword_lines(text: &str, hex: bool) -> Result<Vec<Vec<u8>>, (usize, SearchError)> {
    let mut keywords = Vec::new();
    for line in text.split('\n') {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.is_empty() || (hex && line.trim().is_empty()) {
            continue;
        }
        let n = keywords.len() + 1;
        keywords.push(parse_keyword(line, hex).map_err(|e| (n, e))?);
    }
    Ok(keywords)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines() {
        assert_eq!(
            parse_keyword_lines("a b\r\n\n  \nc\n", false).unwrap(),
            vec![b"a b".to_vec(), b"  ".to_vec(), b"c".to_vec()]
        );
        assert_eq!(
            parse_keyword_lines("de ad\n  \n\r\n0x01\r", true).unwrap(),
            vec![vec![0xde, 0xad], vec![1]]
        );
        assert!(parse_keyword_lines("\n\r\n", false).unwrap().is_empty());
        assert_eq!(
            parse_keyword_lines("00\n\nzz", true).unwrap_err(),
            (2, SearchError::BadHex { position: 0 })
        );
    }

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
        // Positions are the input's: after leading blanks and the prefix, at the odd end.
        assert_eq!(
            parse_keyword("  0x1", true),
            Err(SearchError::BadHex { position: 5 })
        );
        assert_eq!(
            parse_keyword(" de zz", true),
            Err(SearchError::BadHex { position: 4 })
        );
        assert_eq!(
            keyword_error(3, &SearchError::BadHex { position: 4 }),
            "keyword 3: invalid hex at character 5"
        );
        // Separators only: no byte, named by its own number.
        let (n, e) = parse_keyword_lines("00\n::", true).unwrap_err();
        assert_eq!(keyword_error(n, &e), "keyword 2 is empty");
    }
}
