//! The quarantine's shipped YARA rules (`rules/*.yar` beside this crate),
//! by file name, as text. The policy decides what happens to a held
//! download; these rules are what the scanner reports to it. The runtime
//! compiles them (`yara-x`); a deployment may add its own directory.

/// The shipped rule files, by name.
pub const SHIPPED: &[(&str, &str)] = &[
    ("eicar.yar", include_str!("../rules/eicar.yar")),
    ("executables.yar", include_str!("../rules/executables.yar")),
    (
        "office_macros.yar",
        include_str!("../rules/office_macros.yar"),
    ),
    ("scripts.yar", include_str!("../rules/scripts.yar")),
    (
        "encrypted_archives.yar",
        include_str!("../rules/encrypted_archives.yar"),
    ),
];
