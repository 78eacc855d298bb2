//! Wildcard patterns for rules: `*` matches any run of characters
//! (slashes and dots included), `?` exactly one; everything else matches
//! itself. One meaning everywhere (URLs, paths, command lines, CDP
//! methods), so `"/home/user/.ssh/*"` covers the whole tree below it.

use std::fmt;

use crate::command_line::Piece;

/// A compiled pattern.
#[derive(Clone, PartialEq, Eq)]
pub struct Glob {
    source: String,
    pattern: Vec<char>,
    /// Hosts compare without case.
    fold_case: bool,
}

impl fmt::Debug for Glob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.source)
    }
}

impl Glob {
    pub fn new(source: &str) -> Self {
        Self {
            source: source.to_owned(),
            pattern: source.chars().collect(),
            fold_case: false,
        }
    }

    /// A pattern that ignores ASCII case (host names).
    pub fn folded(source: &str) -> Self {
        let lower = source.to_ascii_lowercase();
        Self {
            pattern: lower.chars().collect(),
            source: lower,
            fold_case: true,
        }
    }

    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// Whether `text` matches the whole pattern. Iterative with one
    /// backtrack point, so linear in practice and never exponential.
    pub fn matches(&self, text: &str) -> bool {
        let pattern = &self.pattern;
        let norm = |c: char| {
            if self.fold_case {
                c.to_ascii_lowercase()
            } else {
                c
            }
        };
        let text: Vec<char> = text.chars().map(norm).collect();
        let (mut p, mut t) = (0, 0);
        let mut star: Option<(usize, usize)> = None;
        while t < text.len() {
            match pattern.get(p) {
                Some('*') => {
                    star = Some((p, t));
                    p += 1;
                }
                Some(&c) if c == '?' || c == text[t] => {
                    p += 1;
                    t += 1;
                }
                _ => match star {
                    Some((sp, st)) => {
                        p = sp + 1;
                        t = st + 1;
                        star = Some((sp, st + 1));
                    }
                    None => return false,
                },
            }
        }
        pattern[p..].iter().all(|&c| c == '*')
    }
}

impl Glob {
    /// Whether some text matches both this pattern and `pieces`, where a
    /// [`Piece::Unknown`] stands for any run of characters: whether the
    /// pattern could match a command whose unknown parts turn out to be
    /// anything at all. Dynamic programming over both, `O(len × len)`.
    pub fn could_match(&self, pieces: &[Piece]) -> bool {
        let (n, m) = (self.pattern.len(), pieces.len());
        let norm = |c: char| {
            if self.fold_case {
                c.to_ascii_lowercase()
            } else {
                c
            }
        };
        // reach[i][j]: the first i pattern characters and j pieces can
        // produce the same text.
        let mut reach = vec![vec![false; m + 1]; n + 1];
        reach[0][0] = true;
        for i in 0..=n {
            for j in 0..=m {
                if !reach[i][j] {
                    continue;
                }
                let p = self.pattern.get(i).copied();
                let q = pieces.get(j).copied();
                // A star or an unknown run may stand for nothing.
                if p == Some('*') {
                    reach[i + 1][j] = true;
                }
                if q == Some(Piece::Unknown) {
                    reach[i][j + 1] = true;
                }
                match (p, q) {
                    (Some('*'), Some(Piece::Char(_))) => reach[i][j + 1] = true,
                    (Some(_), Some(Piece::Unknown)) if p != Some('*') => reach[i + 1][j] = true,
                    (Some('?'), Some(Piece::Char(_))) => reach[i + 1][j + 1] = true,
                    (Some(a), Some(Piece::Char(b))) if a == norm(b) => reach[i + 1][j + 1] = true,
                    _ => {}
                }
            }
        }
        reach[n][m]
    }
}

/// Whether any of `globs` matches `text`.
pub fn any(globs: &[Glob], text: &str) -> bool {
    globs.iter().any(|g| g.matches(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards() {
        let cases: &[(&str, &str, bool)] = &[
            ("*", "", true),
            ("*", "anything/at/all", true),
            ("sudo *", "sudo rm -rf /", true),
            ("sudo *", "sudoedit x", false),
            ("/home/user/.ssh/*", "/home/user/.ssh/keys/id_rsa", true),
            ("/home/user/.ssh/*", "/home/user/.sshx", false),
            (
                "https://*.bank.example/*",
                "https://www.bank.example/login",
                true,
            ),
            (
                "https://*.bank.example/*",
                "https://bank.example.evil/x",
                false,
            ),
            ("Input.*", "Input.insertText", true),
            ("Input.*", "InputX", false),
            ("a?c", "abc", true),
            ("a?c", "ac", false),
            ("*a*a*a*a*b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", false),
            ("exact", "exact", true),
            ("exact", "exactly", false),
        ];
        for (pattern, text, expected) in cases {
            assert_eq!(
                Glob::new(pattern).matches(text),
                *expected,
                "{pattern} vs {text}"
            );
        }
        assert!(Glob::folded("*.Bank.example").matches("WWW.bank.EXAMPLE"));
    }

    fn pieces(text: &str) -> Vec<Piece> {
        text.chars()
            .map(|c| {
                if c == '%' {
                    Piece::Unknown
                } else {
                    Piece::Char(c)
                }
            })
            .collect()
    }

    #[test]
    fn could_match_an_unknown_part() {
        let cases: &[(&str, &str, bool)] = &[
            ("sudo *", "% id", true),
            ("sudo *", "echo %", false),
            ("rm -rf /", "rm -rf /%", true),
            ("rm -rf /", "rm -rf %", true),
            ("rm -rf /", "rm -f %", false),
            ("mkfs*", "echo %", false),
            ("a*b", "a%", true),
            ("a?c", "a%c", true),
            ("abc", "abc", true),
            ("abc", "abd", false),
            ("*", "%", true),
            ("x", "", false),
            ("*x*", "%", true),
        ];
        for (pattern, text, expected) in cases {
            assert_eq!(
                Glob::new(pattern).could_match(&pieces(text)),
                *expected,
                "{pattern} vs {text}"
            );
        }
        assert!(!Glob::new("*.Bank.example").matches("www.bank.example"));
    }
}
