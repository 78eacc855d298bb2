//! The arguments the microVM's kernel hands `cubicle-guest` as init: the
//! host (`cubicle-runtime`'s microvm backend) writes them after ` -- ` on
//! the guest kernel's command line, and the guest parses them as its argv.
//! Both ends use [`VmInit::words`], so the line cannot drift from the
//! parser (the guest's tests parse exactly these words).

/// What the host tells the guest's init.
#[derive(Debug, Clone, Copy)]
pub struct VmInit<'a> {
    /// The workspace id, set as the hostname.
    pub hostname: &'a str,
    /// Screen size, `WIDTHxHEIGHT`.
    pub geometry: &'a str,
    /// The Xvnc binary inside the image.
    pub xvnc: &'a str,
}

impl VmInit<'_> {
    /// The argv words, in order (no value may hold whitespace: the kernel
    /// splits its command line on it; the host checks before it builds).
    pub fn words(&self) -> Vec<String> {
        [
            "--vm",
            "--hostname",
            self.hostname,
            "--geometry",
            self.geometry,
            "--xvnc",
            self.xvnc,
        ]
        .map(str::to_owned)
        .to_vec()
    }
}
