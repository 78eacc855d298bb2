//! File names offered by servers, made safe to write in `~/Downloads`: no
//! directory parts, no `..`, no NUL or control characters, no character
//! that is invisible or reorders text (a right-to-left override makes
//! `evil<RLO>txt.exe` read as `evilexe.txt`; zero-width and joiner
//! characters, U+2028/U+2029 line and paragraph separators, tag characters,
//! variation selectors, invisible fillers, private-use characters: every
//! character of Unicode's format category and the like), every kind of
//! space made a plain space, no leading dot (hidden files), at most 200
//! bytes with the extension kept.

/// Longest cleaned name, in bytes.
pub const MAX_NAME: usize = 200;

/// Characters that reorder, hide or break text: Unicode's format
/// characters (category Cf, Unicode 16), line and paragraph separators,
/// invisible fillers and joiners, variation selectors, the tag plane, and
/// private-use characters.
fn is_bidi_or_invisible(c: char) -> bool {
    matches!(c,
        '\u{00AD}' | '\u{034F}' | '\u{0600}'..='\u{0605}' | '\u{061C}' | '\u{06DD}'
        | '\u{070F}' | '\u{0890}'..='\u{0891}' | '\u{08E2}' | '\u{115F}'..='\u{1160}'
        | '\u{17B4}'..='\u{17B5}' | '\u{180B}'..='\u{180F}' | '\u{200B}'..='\u{200F}'
        | '\u{2028}'..='\u{202E}' | '\u{2060}'..='\u{206F}' | '\u{3164}'
        | '\u{E000}'..='\u{F8FF}' | '\u{FE00}'..='\u{FE0F}' | '\u{FEFF}' | '\u{FFA0}'
        | '\u{FFF0}'..='\u{FFFB}' | '\u{110BD}' | '\u{110CD}' | '\u{13430}'..='\u{1345F}'
        | '\u{1BCA0}'..='\u{1BCA3}' | '\u{1D173}'..='\u{1D17A}' | '\u{E0000}'..='\u{E0FFF}'
        | '\u{F0000}'..='\u{10FFFF}')
}

/// The name a download is released under.
pub fn clean(offered: &str) -> String {
    // Only the last path component, whichever separator the server used.
    let last = offered.rsplit(['/', '\\']).next().unwrap_or_default();
    let mut name: String = last
        .chars()
        .filter(|&c| !c.is_control() && !is_bidi_or_invisible(c))
        .map(|c| {
            if matches!(c, ':' | '*' | '?' | '"' | '<' | '>' | '|') {
                '_'
            } else if c.is_whitespace() {
                ' '
            } else {
                c
            }
        })
        .collect();
    while name.contains("..") {
        name = name.replace("..", ".");
    }
    let name = name
        .trim()
        .trim_start_matches(['.', ' '])
        .trim_end_matches(['.', ' ']);
    let name = if name.is_empty() { "download" } else { name };
    shorten(name)
}

/// Cuts `name` to [`MAX_NAME`] bytes on a character boundary, keeping a
/// short extension.
fn shorten(name: &str) -> String {
    if name.len() <= MAX_NAME {
        return name.to_owned();
    }
    let ext = name
        .rsplit_once('.')
        .map(|(_, ext)| ext)
        .filter(|ext| !ext.is_empty() && ext.len() <= 16);
    let room = MAX_NAME - ext.map_or(0, |e| e.len() + 1);
    let mut stem_end = room;
    while !name.is_char_boundary(stem_end) {
        stem_end -= 1;
    }
    match ext {
        Some(ext) => format!("{}.{ext}", &name[..stem_end]),
        None => name[..stem_end].to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_names_are_cleaned() {
        assert_eq!(clean("report.pdf"), "report.pdf");
        assert_eq!(clean("../../etc/passwd"), "passwd");
        assert_eq!(clean("..\\..\\win.ini"), "win.ini");
        assert_eq!(clean("a/b/.."), "download");
        assert_eq!(clean(".."), "download");
        assert_eq!(clean(".bashrc"), "bashrc");
        assert_eq!(clean("a..b.txt"), "a.b.txt");
        assert_eq!(clean("nul\0byte.txt"), "nulbyte.txt");
        assert_eq!(clean("tab\tand\nnewline"), "tabandnewline");
        assert_eq!(clean("evil\u{202E}fdp.exe"), "evilfdp.exe");
        assert_eq!(clean("\u{2066}x\u{2069}.zip"), "x.zip");
        assert_eq!(clean("con:fig?.txt"), "con_fig_.txt");
        assert_eq!(clean(""), "download");
        assert_eq!(clean("   "), "download");
    }

    #[test]
    fn invisible_and_format_characters_go() {
        assert_eq!(clean("a\u{2028}b.txt"), "ab.txt", "line separator");
        assert_eq!(clean("a\u{2029}b.txt"), "ab.txt", "paragraph separator");
        assert_eq!(clean("a\u{2060}b.txt"), "ab.txt", "word joiner");
        assert_eq!(
            clean("in\u{E0069}\u{E0067}voice.pdf"),
            "invoice.pdf",
            "tags"
        );
        assert_eq!(clean("x\u{E0001}.txt"), "x.txt");
        assert_eq!(clean("a\u{00AD}b\u{180E}c\u{FE0F}.txt"), "abc.txt");
        assert_eq!(
            clean("a\u{3164}\u{115F}b.txt"),
            "ab.txt",
            "invisible fillers"
        );
        assert_eq!(clean("a\u{200D}\u{FEFF}b.txt"), "ab.txt");
        assert_eq!(clean("a\u{E000}b.txt"), "ab.txt", "private use");
        assert_eq!(
            clean("a\u{00A0}b\u{3000}c.txt"),
            "a b c.txt",
            "spaces are plain"
        );
        assert_eq!(clean("\u{2066}\u{2069}"), "download");
        assert_eq!(
            clean("naïve résumé.pdf"),
            "naïve résumé.pdf",
            "letters stay"
        );
        assert_eq!(clean("日本語.txt"), "日本語.txt");
    }

    #[test]
    fn long_names_keep_their_extension_and_characters() {
        let long = format!("{}.tar.gz", "a".repeat(1000));
        let cleaned = clean(&long);
        assert_eq!(cleaned.len(), MAX_NAME);
        assert!(cleaned.ends_with(".gz"), "{cleaned}");
        let wide = "é".repeat(500);
        let cleaned = clean(&wide);
        assert!(cleaned.len() <= MAX_NAME);
        assert!(cleaned.chars().all(|c| c == 'é'));
    }
}
