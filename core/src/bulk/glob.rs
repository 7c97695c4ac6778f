//! Glob-style matching of key names, as the server's `SCAN ... MATCH` does it
//! (`stringmatchlen` with case-sensitive comparison): `*`, `?`, `[abc]`, `[^abc]`,
//! `[a-z]` and `\x` escapes, on raw bytes.
//!
//! RL.SWEEP scans without MATCH (so that it can count every key it visits) and applies
//! the pattern itself; the integration tests compare this function with the server's
//! own MATCH on random patterns. The odd corners are kept as the server has them: an
//! unterminated `[` class ends at the end of the pattern, a trailing `\` matches a
//! literal `\`, reversed ranges (`[z-a]`) are swapped, and range bounds compare as
//! signed bytes (as C's `char` on x86). A pattern that nests more than 1000 `*` matches
//! nothing (the server's guard against abusive patterns, which also keeps the
//! recursion depth bounded).

use crate::limits::GLOB_MAX_NESTING as MAX_NESTING;

/// Whether `key` matches the glob `pattern`.
pub fn matches(pattern: &[u8], key: &[u8]) -> bool {
    let mut give_up = false;
    match_from(pattern, 0, key, 0, &mut give_up, 0)
}

/// Whether `pattern` selects every key (SCAN treats a lone `*` as no pattern, so it
/// also matches the empty key name).
pub fn matches_everything(pattern: &[u8]) -> bool {
    pattern == b"*"
}

/// `pattern` with every run of `*` (outside `[...]` classes and escapes) made one `*`:
/// the same keys match, and the matcher no longer walks a long run for every key it
/// tries (a pattern of four million `*` took seconds per SCAN chunk).
pub fn collapse_stars(pattern: &[u8]) -> Vec<u8> {
    let n = pattern.len();
    let mut out = Vec::with_capacity(n);
    let mut i = 0;
    while i < n {
        match pattern[i] {
            b'*' => {
                out.push(b'*');
                while i < n && pattern[i] == b'*' {
                    i += 1;
                }
            }
            b'\\' => {
                let end = (i + 2).min(n);
                out.extend_from_slice(&pattern[i..end]);
                i = end;
            }
            b'[' => {
                // The class as the matcher reads it: an optional `^`, then escapes (two
                // bytes), ranges `a-z` (three, even when the last is `]`), single bytes,
                // up to `]` or the end of the pattern.
                let start = i;
                i += 1;
                if i < n && pattern[i] == b'^' {
                    i += 1;
                }
                while i < n {
                    let left = n - i;
                    if pattern[i] == b'\\' && left >= 2 {
                        i += 2;
                    } else if pattern[i] == b']' {
                        i += 1;
                        break;
                    } else if left >= 3 && pattern[i + 1] == b'-' {
                        i += 3;
                    } else {
                        i += 1;
                    }
                }
                out.extend_from_slice(&pattern[start..i]);
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    out
}

/// The byte at `i`, or 0 past the end (the server's patterns are NUL-terminated and
/// its matcher reads that terminator in a few places).
fn at(b: &[u8], i: usize) -> u8 {
    b.get(i).copied().unwrap_or(0)
}

/// Match `pattern[p..]` against `key[k..]`. `give_up` is set once a `*` found no
/// match for the rest of the pattern anywhere in the rest of the key: earlier `*`s
/// then cannot help either, which keeps the search polynomial.
fn match_from(
    pattern: &[u8],
    mut p: usize,
    key: &[u8],
    mut k: usize,
    give_up: &mut bool,
    nesting: u32,
) -> bool {
    if nesting > MAX_NESTING {
        return false;
    }
    let plen = pattern.len();
    while p < plen && k < key.len() {
        let c = key[k];
        match pattern[p] {
            b'*' => {
                while p < plen && at(pattern, p + 1) == b'*' {
                    p += 1;
                }
                if plen - p == 1 {
                    return true;
                }
                while k < key.len() {
                    if match_from(pattern, p + 1, key, k, give_up, nesting + 1) {
                        return true;
                    }
                    if *give_up {
                        return false;
                    }
                    k += 1;
                }
                *give_up = true;
                return false;
            }
            b'?' => k += 1,
            b'[' => {
                p += 1;
                let negate = at(pattern, p) == b'^';
                if negate {
                    p += 1;
                }
                let mut hit = false;
                loop {
                    let left = plen - p;
                    if at(pattern, p) == b'\\' && left >= 2 {
                        p += 1;
                        if at(pattern, p) == c {
                            hit = true;
                        }
                    } else if at(pattern, p) == b']' {
                        break;
                    } else if left == 0 {
                        // Unterminated class: it ends with the pattern.
                        p -= 1;
                        break;
                    } else if left >= 3 && at(pattern, p + 1) == b'-' {
                        let (mut lo, mut hi) = (at(pattern, p) as i8, at(pattern, p + 2) as i8);
                        if lo > hi {
                            std::mem::swap(&mut lo, &mut hi);
                        }
                        p += 2;
                        if (lo..=hi).contains(&(c as i8)) {
                            hit = true;
                        }
                    } else if at(pattern, p) == c {
                        hit = true;
                    }
                    p += 1;
                }
                if hit == negate {
                    return false;
                }
                k += 1;
            }
            b'\\' => {
                if plen - p >= 2 {
                    p += 1;
                }
                if at(pattern, p) != c {
                    return false;
                }
                k += 1;
            }
            literal => {
                if literal != c {
                    return false;
                }
                k += 1;
            }
        }
        p += 1;
        if k == key.len() {
            while at(pattern, p) == b'*' {
                p += 1;
            }
            break;
        }
    }
    p == plen && k == key.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn table() {
        let cases: &[(&[u8], &[u8], bool)] = &[
            (b"*", b"anything", true),
            (b"*", b"", false), // SCAN never asks: a lone `*` is no pattern there
            (b"", b"", true),
            (b"", b"a", false),
            (b"a", b"", false),
            (b"app:*", b"app:1", true),
            (b"app:*", b"app:", true),
            (b"app:*", b"ap", false),
            (b"app:*", b"xapp:1", false),
            (b"*:1", b"app:1", true),
            (b"*:1", b"app:12", false),
            (b"a*b*c", b"abc", true),
            (b"a*b*c", b"axxbyyc", true),
            (b"a*b*c", b"axxbyy", false),
            (b"a**b", b"ab", true),
            (b"h?llo", b"hello", true),
            (b"h?llo", b"hllo", false),
            (b"h[ae]llo", b"hallo", true),
            (b"h[ae]llo", b"hillo", false),
            (b"h[^e]llo", b"hallo", true),
            (b"h[^e]llo", b"hello", false),
            (b"h[a-b]llo", b"hbllo", true),
            (b"h[b-a]llo", b"hallo", true), // reversed range
            (b"h[a-b]llo", b"hcllo", false),
            (b"[\\]]", b"]", true),
            (b"[a\\-z]", b"-", true),
            (b"[a\\-z]", b"b", false),
            (b"\\*", b"*", true),
            (b"\\*", b"a", false),
            (b"a\\", b"a\\", true), // trailing backslash is literal
            (b"[abc", b"a", true),  // unterminated class
            (b"[abc", b"d", false),
            (b"[", b"a", false),
            (b"[^", b"a", true),
            (b"[]", b"a", false),
            (b"x*", b"x", true),
            (b"x**", b"x", true),
            (b"x?", b"x", false),
            (b"*a", b"\0a", true),
            (b"k\0*", b"k\0z", true),
            // Signed bytes: 0x80..0xff sort below ASCII in a range.
            (b"[\x80-\xff]", b"\xc3", true),
            (b"[\x00-\x7f]", b"\xc3", false),
            (b"[\xff-a]", b"\x05", true),
        ];
        for &(p, k, want) in cases {
            assert_eq!(
                matches(p, k),
                want,
                "{:?} ~ {:?}",
                String::from_utf8_lossy(p),
                String::from_utf8_lossy(k)
            );
        }
        assert!(matches_everything(b"*"));
        assert!(!matches_everything(b"**"));
    }

    #[test]
    fn runs_of_stars_collapse_outside_classes_and_escapes() {
        let cases: &[(&[u8], &[u8])] = &[
            (b"***", b"*"),
            (b"a**b***c", b"a*b*c"),
            (b"\\**", b"\\**"),
            (b"\\***", b"\\**"),
            (b"[**]**", b"[**]*"),
            (b"[\\]**]**", b"[\\]**]*"),
            (b"[a-]**]**", b"[a-]**]*"),
            (b"[**", b"[**"),
            (b"", b""),
        ];
        for (p, want) in cases {
            assert_eq!(
                collapse_stars(p),
                want.to_vec(),
                "{}",
                String::from_utf8_lossy(p)
            );
        }
        let huge = vec![b'*'; 4_000_000];
        assert_eq!(collapse_stars(&huge), b"*");
    }

    #[test]
    fn abusive_patterns_end_quickly_and_without_deep_recursion() {
        let key = vec![b'a'; 10_000];
        let mut pattern = b"*a".repeat(5_000);
        pattern.push(b'b');
        assert!(!matches(&pattern, &key));
        // Within the nesting limit the match is found.
        let mut ok = b"a*".repeat(900);
        ok.push(b'a');
        assert!(matches(&ok, &key));
        // Beyond it the matcher gives up.
        let deep = b"*a".repeat(2_000);
        assert!(!matches(&deep, &key));
    }

    /// A plain reference matcher for patterns without classes and escapes.
    fn simple(p: &[u8], k: &[u8]) -> bool {
        match (p.first(), k.first()) {
            (None, None) => true,
            (Some(b'*'), _) => simple(&p[1..], k) || (!k.is_empty() && simple(p, &k[1..])),
            (Some(b'?'), Some(_)) => simple(&p[1..], &k[1..]),
            (Some(a), Some(b)) if a == b => simple(&p[1..], &k[1..]),
            _ => false,
        }
    }

    proptest! {
        #[test]
        fn agrees_with_a_plain_matcher(
            p in "[ab*?]{0,8}",
            k in "[ab]{0,8}",
        ) {
            // The server's matcher never matches an empty key (the loop does not run)
            // unless the pattern is empty too.
            let want = if k.is_empty() { p.is_empty() } else { simple(p.as_bytes(), k.as_bytes()) };
            prop_assert_eq!(matches(p.as_bytes(), k.as_bytes()), want);
        }

        #[test]
        fn a_key_matches_itself_escaped(k in proptest::collection::vec(any::<u8>(), 1..20)) {
            let mut p = Vec::new();
            for b in &k {
                p.push(b'\\');
                p.push(*b);
            }
            prop_assert!(matches(&p, &k));
        }

        #[test]
        fn never_panics_on_special_characters(p in r"[\[\]^\\*?a-]{0,12}", k in r"[\[\]^\\*?a-]{0,12}") {
            // Debug builds check every index and subtraction: any slip panics here.
            let _ = matches(p.as_bytes(), k.as_bytes());
        }

        #[test]
        fn collapsing_runs_of_stars_matches_the_same_keys(
            p in r"[\[\]^\\*?ab-]{0,14}",
            k in "[ab*\\[\\]-]{0,8}",
        ) {
            let collapsed = collapse_stars(p.as_bytes());
            prop_assert!(collapsed.len() <= p.len());
            prop_assert_eq!(matches(&collapsed, k.as_bytes()), matches(p.as_bytes(), k.as_bytes()));
            prop_assert_eq!(collapse_stars(&collapsed), collapsed.clone(), "collapsing twice changes nothing");
        }

        #[test]
        fn never_panics(p in proptest::collection::vec(any::<u8>(), 0..24),
                        k in proptest::collection::vec(any::<u8>(), 0..24)) {
            let _ = matches(&p, &k);
        }
    }
}
