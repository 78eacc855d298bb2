//! File names offered by servers, made safe to write in `~/Downloads`: no
//! directory parts, no `..`, no NUL, control or bidirectional-override
//! characters (a right-to-left override makes `evil<RLO>txt.exe` read as
//! `evilexe.txt`), no
//! leading dot (hidden files), at most 200 bytes with the extension kept.

/// Longest cleaned name, in bytes.
pub const MAX_NAME: usize = 200;

/// Characters that reorder or hide text.
fn is_bidi_or_invisible(c: char) -> bool {
    matches!(c,
        '\u{061C}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}'
        | '\u{2066}'..='\u{2069}' | '\u{FEFF}' | '\u{FFF9}'..='\u{FFFB}')
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
