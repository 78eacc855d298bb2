//! What a command will start, as far as it can be read without running it.
//!
//! An `exec` rule is a pattern over a command, and a shell line can always
//! be spelled around a pattern: `x=1 sudo id`, `env sudo id`, `"su"do id`,
//! `ls; sudo id`, `bash -c 'sudo id'`, `$X id`. So the policy does not
//! match the line as typed alone: [`parse`] splits a shell line into the
//! simple commands it runs (every command of a `;`, `&&`, `||`, `|` or `&`
//! list, and of the string given to `sh -c`, `bash -c` or `eval`), takes
//! quotes and backslashes off, and strips leading variable assignments,
//! reserved words (`if`, `then`, `!`, `{`, ...) and the wrappers that only
//! start another program (`env`, `command`, `exec`, `nice`, `nohup`,
//! `setsid`, `timeout`, `stdbuf`, `xargs`, `builtin`, `busybox`). A rule
//! then judges the argv each command starts.
//!
//! What cannot be known without running the line is kept as
//! [`Piece::Unknown`] (a variable's value, an unquoted glob, a command
//! substitution, a shell reading its program from stdin, a variable that
//! changes what runs such as `BASH_ENV`, `LD_PRELOAD` or `PATH`): a rule
//! that holds (deny, confirm) matches when it *could* match whatever the
//! unknown part turns out to be, and a rule that allows matches only what
//! it certainly matches. Reading stays pattern matching, and a program can
//! still do anything it likes once started (`python3 -c`, a script file):
//! rules that must hold are enforced where the effect happens (the
//! workspace has no `sudo` and no set-user-id programs, see the README).

/// One piece of a word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Piece {
    Char(char),
    /// Any run of characters (a variable's value, a glob, ...).
    Unknown,
}

/// One simple command, its words joined by single spaces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    pub pieces: Vec<Piece>,
}

impl Command {
    fn from_words(words: &[Vec<Piece>]) -> Self {
        let mut pieces = Vec::new();
        for (i, word) in words.iter().enumerate() {
            if i > 0 {
                pieces.push(Piece::Char(' '));
            }
            pieces.extend_from_slice(word);
        }
        Self { pieces }
    }

    /// A command nothing is known of: it could be anything.
    pub fn unknown() -> Self {
        Self {
            pieces: vec![Piece::Unknown],
        }
    }

    /// The command as text, when all of it is known.
    pub fn known(&self) -> Option<String> {
        self.pieces
            .iter()
            .map(|p| match p {
                Piece::Char(c) => Some(*c),
                Piece::Unknown => None,
            })
            .collect()
    }
}

/// Variables that change what a command runs (a script sourced first, a
/// library loaded, where programs are found): set on a command, they make
/// it unknown.
const CHANGES_WHAT_RUNS: [&str; 12] = [
    "BASH_ENV",
    "ENV",
    "PATH",
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "LD_AUDIT",
    "SHELLOPTS",
    "BASHOPTS",
    "PS4",
    "PROMPT_COMMAND",
    "IFS",
    "GCONV_PATH",
];

/// Whether setting variable `name` changes what a command runs.
pub fn changes_what_runs(name: &str) -> bool {
    CHANGES_WHAT_RUNS.contains(&name) || name.starts_with("BASH_FUNC_")
}

/// Shells, whose `-c` string is parsed in turn.
const SHELLS: [&str; 7] = ["sh", "bash", "dash", "zsh", "ksh", "rbash", "mksh"];
/// Words the shell reads as syntax, not as a program to run.
const RESERVED: [&str; 14] = [
    "!", "{", "}", "if", "then", "else", "elif", "fi", "do", "done", "while", "until", "time",
    "coproc",
];
/// How deep `sh -c` and `eval` strings are followed before giving up.
const MAX_DEPTH: usize = 4;

/// The commands a shell line runs (`command` given), or an argv runs
/// (started directly, without a shell), with `env` the names of the
/// variables the request sets.
pub fn commands(argv: &[String], line: Option<&str>, env: &[String]) -> Vec<Command> {
    if env.iter().any(|name| changes_what_runs(name)) {
        return vec![Command::unknown()];
    }
    match line {
        Some(line) => parse(line, 0),
        None => {
            let words = argv
                .iter()
                .map(|w| w.chars().map(Piece::Char).collect())
                .collect();
            simple(words, false, 0)
        }
    }
}

/// The simple commands of shell line `line`.
pub fn parse(line: &str, depth: usize) -> Vec<Command> {
    if depth > MAX_DEPTH {
        return vec![Command::unknown()];
    }
    match Lexer::new(line).run() {
        Some((lists, substituted)) => lists
            .into_iter()
            .flat_map(|(words, stdin)| simple(words, stdin, depth))
            // What `$(...)` runs is a command of the line too; its output
            // is an unknown part of the word it stands in.
            .chain(substituted.iter().flat_map(|inner| parse(inner, depth + 1)))
            .collect(),
        None => vec![Command::unknown()],
    }
}

fn literal(word: &[Piece]) -> Option<String> {
    Command {
        pieces: word.to_vec(),
    }
    .known()
}

fn basename(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

/// `NAME=` at the start of a word: the name.
fn assignment(word: &[Piece]) -> Option<String> {
    let mut name = String::new();
    for piece in word {
        match piece {
            Piece::Char('=') if !name.is_empty() => return Some(name),
            Piece::Char(c) if c.is_ascii_alphanumeric() || *c == '_' => {
                if name.is_empty() && c.is_ascii_digit() {
                    return None;
                }
                name.push(*c);
            }
            _ => return None,
        }
    }
    None
}

/// One simple command's words, wrappers stripped; `stdin` says whether its
/// standard input is given in the line (a pipe, a here-document, a file).
fn simple(mut words: Vec<Vec<Piece>>, stdin: bool, depth: usize) -> Vec<Command> {
    loop {
        let Some(first) = words.first() else {
            return Vec::new();
        };
        if let Some(name) = assignment(first) {
            if changes_what_runs(&name) {
                return vec![Command::unknown()];
            }
            words.remove(0);
            continue;
        }
        let Some(program) = literal(first) else {
            // `$X args`: the program itself is unknown.
            return vec![Command::unknown()];
        };
        let name = basename(&program).to_owned();
        if RESERVED.contains(&program.as_str()) {
            words.remove(0);
            continue;
        }
        let rest = &words[1..];
        let skip = match name.as_str() {
            "env" => match env_options(rest) {
                Some(n) => n,
                None => return vec![Command::unknown()],
            },
            "command" | "builtin" | "nohup" | "busybox" => flags(rest, &[]),
            "exec" => flags(rest, &["-a"]),
            "nice" => flags(rest, &["-n"]),
            "setsid" | "stdbuf" => flags(rest, &["-i", "-o", "-e"]),
            "ionice" => flags(rest, &["-c", "-n", "-p", "-P", "-u"]),
            "timeout" => {
                let n = flags(rest, &["-s", "-k", "--signal", "--kill-after"]);
                // The duration.
                n + usize::from(rest.len() > n)
            }
            "xargs" => flags(
                rest,
                &["-I", "-n", "-P", "-L", "-d", "-E", "-s", "-a", "-i", "-l"],
            ),
            "eval" => {
                let joined: Option<Vec<String>> = rest.iter().map(|w| literal(w)).collect();
                return match joined {
                    Some(words) => parse(&words.join(" "), depth + 1),
                    None => vec![Command::unknown()],
                };
            }
            shell if SHELLS.contains(&shell) => return shell_command(&words, stdin, depth),
            _ => return vec![Command::from_words(&words)],
        };
        words.drain(..=skip.min(words.len() - 1));
        if words.is_empty() {
            return Vec::new();
        }
    }
}

/// How many words after `env` are its options and assignments; `None`
/// when they make the command unreadable (`-S` splits a string into a new
/// command line; a variable that changes what runs).
fn env_options(rest: &[Vec<Piece>]) -> Option<usize> {
    let mut n = 0;
    while let Some(word) = rest.get(n) {
        let text = literal(word)?;
        if let Some(name) = assignment(word) {
            if changes_what_runs(&name) {
                return None;
            }
        } else if text == "--" {
            return Some(n + 1);
        } else if text.starts_with("-S") || text.starts_with("--split-string") {
            return None;
        } else if ["-u", "-C", "--unset", "--chdir"].contains(&text.as_str()) {
            n += 1;
        } else if !text.starts_with('-') {
            return Some(n);
        }
        n += 1;
    }
    Some(n)
}

/// How many words are options (starting with `-`), counting the argument
/// of each option in `with_argument`; `--` ends them.
fn flags(rest: &[Vec<Piece>], with_argument: &[&str]) -> usize {
    let mut n = 0;
    while let Some(word) = rest.get(n) {
        let Some(text) = literal(word) else {
            return n;
        };
        if text == "--" {
            return n + 1;
        }
        if !text.starts_with('-') || text == "-" {
            return n;
        }
        if with_argument.contains(&text.as_str()) {
            n += 1;
        }
        n += 1;
    }
    n
}

/// A shell: its `-c` string parsed in turn; reading its program from stdin
/// (no operand, `-s`, or `-i`), it is unknown.
fn shell_command(words: &[Vec<Piece>], stdin: bool, depth: usize) -> Vec<Command> {
    let _ = stdin;
    let mut i = 1;
    let mut run_string = false;
    while let Some(word) = words.get(i) {
        let Some(text) = literal(word) else {
            return vec![Command::unknown()];
        };
        if text == "--" {
            i += 1;
            break;
        }
        if text.starts_with("--") {
            // --rcfile, --init-file and the like read more code.
            if ["--rcfile", "--init-file"].contains(&text.as_str()) {
                return vec![Command::unknown()];
            }
            i += 1;
            continue;
        }
        if !(text.starts_with('-') || text.starts_with('+')) || text.len() < 2 {
            break;
        }
        let cluster = &text[1..];
        if cluster.contains('s') || cluster.contains('i') {
            return vec![Command::unknown()];
        }
        if cluster.contains('c') {
            run_string = true;
        }
        // `-o option` takes its argument.
        if cluster.ends_with('o') || cluster.ends_with('O') {
            i += 1;
        }
        i += 1;
    }
    match (run_string, words.get(i)) {
        (true, Some(string)) => match literal(string) {
            Some(string) => parse(&string, depth + 1),
            None => vec![Command::unknown()],
        },
        // `sh -c` with nothing to run, or `sh` reading its program from
        // stdin (a pipe, a here-document, the request's stdin).
        (true, None) | (false, None) => vec![Command::unknown()],
        // `bash script.sh`: the script is not read; the command is judged as written.
        (false, Some(_)) => vec![Command::from_words(words)],
    }
}

/// Splits a line into simple commands, each its words and whether its
/// stdin is given in the line. `None` for what it does not read (command
/// substitution, subshells, process substitution, `case`, unbalanced
/// quotes).
struct Lexer<'a> {
    chars: std::iter::Peekable<std::str::Chars<'a>>,
    commands: Vec<(Vec<Vec<Piece>>, bool)>,
    words: Vec<Vec<Piece>>,
    word: Option<Vec<Piece>>,
    /// Whether the current command's stdin comes from the line.
    stdin: bool,
    /// Here-document delimiters waiting for the end of the line.
    heredocs: Vec<String>,
    /// The lines of `$(...)` substitutions, judged as commands of their own.
    substituted: Vec<String>,
}

impl<'a> Lexer<'a> {
    fn new(line: &'a str) -> Self {
        Self {
            chars: line.chars().peekable(),
            commands: Vec::new(),
            words: Vec::new(),
            word: None,
            stdin: false,
            heredocs: Vec::new(),
            substituted: Vec::new(),
        }
    }

    fn push(&mut self, piece: Piece) {
        self.word.get_or_insert_with(Vec::new).push(piece);
    }

    fn end_word(&mut self) {
        if let Some(word) = self.word.take() {
            self.words.push(word);
        }
    }

    fn end_command(&mut self, piped: bool) {
        self.end_word();
        let words = std::mem::take(&mut self.words);
        if !words.is_empty() {
            self.commands.push((words, self.stdin));
        }
        self.stdin = piped;
    }

    #[allow(clippy::type_complexity)]
    fn run(mut self) -> Option<(Vec<(Vec<Vec<Piece>>, bool)>, Vec<String>)> {
        while let Some(c) = self.chars.next() {
            match c {
                ' ' | '\t' => self.end_word(),
                '\n' => {
                    self.end_command(false);
                    self.skip_heredocs()?;
                }
                ';' => self.end_command(false),
                '|' => {
                    let or = self.chars.next_if_eq(&'|').is_some();
                    self.chars.next_if_eq(&'&');
                    self.end_command(!or);
                }
                '&' => {
                    if self.chars.peek() == Some(&'>') {
                        self.chars.next();
                        self.redirect('>')?;
                    } else {
                        self.chars.next_if_eq(&'&');
                        self.end_command(false);
                    }
                }
                '<' | '>' => {
                    // A leading number is the descriptor, not a word.
                    if self.word.as_ref().is_some_and(|w| {
                        w.iter()
                            .all(|p| matches!(p, Piece::Char(d) if d.is_ascii_digit()))
                    }) {
                        self.word = None;
                    } else {
                        self.end_word();
                    }
                    self.redirect(c)?;
                }
                '(' | ')' | '`' => return None,
                '#' if self.word.is_none() => while self.chars.next_if(|c| *c != '\n').is_some() {},
                '\'' => {
                    self.push_empty();
                    loop {
                        match self.chars.next()? {
                            '\'' => break,
                            c => self.push(Piece::Char(c)),
                        }
                    }
                }
                '"' => self.double_quoted()?,
                '\\' => match self.chars.next() {
                    Some('\n') => {}
                    Some(c) => self.push(Piece::Char(c)),
                    None => self.push(Piece::Char('\\')),
                },
                '$' => self.dollar()?,
                // `[ -e x ]`: the test command, a word of its own.
                '[' if self.word.is_none()
                    && matches!(self.chars.peek(), Some(' ' | '\t' | '[')) =>
                {
                    self.push(Piece::Char('['))
                }
                '*' | '?' | '[' => self.push(Piece::Unknown),
                c => self.push(Piece::Char(c)),
            }
        }
        if !self.heredocs.is_empty() {
            return None;
        }
        self.end_command(false);
        Some((self.commands, self.substituted))
    }

    /// An empty quoted word (`''`) is still a word.
    fn push_empty(&mut self) {
        self.word.get_or_insert_with(Vec::new);
    }

    fn double_quoted(&mut self) -> Option<()> {
        self.push_empty();
        loop {
            match self.chars.next()? {
                '"' => return Some(()),
                '\\' => match self.chars.next()? {
                    '\n' => {}
                    c @ ('$' | '`' | '"' | '\\') => self.push(Piece::Char(c)),
                    c => {
                        self.push(Piece::Char('\\'));
                        self.push(Piece::Char(c));
                    }
                },
                '`' => return None,
                '$' => self.dollar()?,
                c => self.push(Piece::Char(c)),
            }
        }
    }

    /// After `$`: a parameter (unknown), `$'...'` (unknown), or a lone `$`.
    fn dollar(&mut self) -> Option<()> {
        match self.chars.peek().copied() {
            Some('(') => {
                self.chars.next();
                let inner = self.balanced()?;
                match inner.strip_prefix('(').and_then(|i| i.strip_suffix(')')) {
                    // `$((...))`: arithmetic, a number, unless it hides a
                    // command of its own.
                    Some(arithmetic) if !arithmetic.contains(['$', '`']) => {}
                    Some(_) => return None,
                    None => self.substituted.push(inner),
                }
                self.push(Piece::Unknown);
                Some(())
            }
            Some('{') => {
                while self.chars.next()? != '}' {}
                self.push(Piece::Unknown);
                Some(())
            }
            Some('\'') => {
                self.chars.next();
                loop {
                    match self.chars.next()? {
                        '\\' => {
                            self.chars.next()?;
                        }
                        '\'' => break,
                        _ => {}
                    }
                }
                self.push(Piece::Unknown);
                Some(())
            }
            Some(c) if c.is_ascii_alphabetic() || c == '_' => {
                while self
                    .chars
                    .next_if(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .is_some()
                {}
                self.push(Piece::Unknown);
                Some(())
            }
            Some(c) if c.is_ascii_digit() || "@*#?-$!".contains(c) => {
                self.chars.next();
                self.push(Piece::Unknown);
                Some(())
            }
            _ => {
                self.push(Piece::Char('$'));
                Some(())
            }
        }
    }

    /// The text up to the `)` that closes an already read `(`, quotes
    /// respected (without the closing `)`); `None` if it never closes.
    fn balanced(&mut self) -> Option<String> {
        let mut text = String::new();
        let mut depth = 1usize;
        loop {
            let c = self.chars.next()?;
            match c {
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth == 0 {
                        return Some(text);
                    }
                }
                '\\' => {
                    text.push(c);
                    text.push(self.chars.next()?);
                    continue;
                }
                '\'' | '"' => {
                    text.push(c);
                    loop {
                        let q = self.chars.next()?;
                        text.push(q);
                        if q == c {
                            break;
                        }
                    }
                    continue;
                }
                _ => {}
            }
            text.push(c);
        }
    }

    /// A redirection after its first character `first`: the operator, then
    /// its target word, which is not part of the command.
    fn redirect(&mut self, first: char) -> Option<()> {
        let mut op = String::from(first);
        while let Some(c) = self
            .chars
            .next_if(|c| matches!(c, '<' | '>' | '&' | '|' | '-'))
        {
            op.push(c);
        }
        if self.chars.peek() == Some(&'(') {
            // Process substitution.
            return None;
        }
        if first == '<' {
            self.stdin = true;
        }
        while self.chars.next_if(|c| *c == ' ' || *c == '\t').is_some() {}
        // The target, read as a word and dropped.
        let saved = (self.word.take(), std::mem::take(&mut self.words));
        let mut target = String::new();
        while let Some(c) = self.chars.peek().copied() {
            if matches!(c, ' ' | '\t' | '\n' | ';' | '|' | '&' | '<' | '>') {
                break;
            }
            self.chars.next();
            match c {
                '\'' => loop {
                    match self.chars.next()? {
                        '\'' => break,
                        c => target.push(c),
                    }
                },
                '"' => loop {
                    match self.chars.next()? {
                        '"' => break,
                        '`' => return None,
                        '$' if self.chars.peek() == Some(&'(') => return None,
                        c => target.push(c),
                    }
                },
                '(' | ')' | '`' => return None,
                '$' if self.chars.peek() == Some(&'(') => return None,
                '\\' => target.push(self.chars.next()?),
                c => target.push(c),
            }
        }
        (self.word, self.words) = saved;
        if op.starts_with("<<") && !op.starts_with("<<<") {
            self.heredocs.push(target);
        }
        Some(())
    }

    /// Skips the bodies of the here-documents named on the line just ended.
    fn skip_heredocs(&mut self) -> Option<()> {
        for delimiter in std::mem::take(&mut self.heredocs) {
            loop {
                let mut line = String::new();
                loop {
                    match self.chars.next() {
                        Some('\n') => break,
                        Some(c) => line.push(c),
                        None if line.trim_start_matches('\t') == delimiter => return Some(()),
                        None => return None,
                    }
                }
                if line.trim_start_matches('\t') == delimiter {
                    break;
                }
            }
        }
        Some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(commands: &[Command]) -> Vec<String> {
        commands
            .iter()
            .map(|c| {
                c.pieces
                    .iter()
                    .map(|p| match p {
                        Piece::Char(c) => c.to_string(),
                        Piece::Unknown => "<?>".into(),
                    })
                    .collect()
            })
            .collect()
    }

    fn line(text: &str) -> Vec<String> {
        shown(&parse(text, 0))
    }

    #[test]
    fn lists_pipes_and_wrappers_are_taken_apart() {
        let cases: &[(&str, &[&str])] = &[
            ("ls -l", &["ls -l"]),
            ("x=1 sudo id", &["sudo id"]),
            ("env sudo id", &["sudo id"]),
            ("env -i A=1 -u B sudo id", &["sudo id"]),
            ("/usr/bin/env sudo id", &["sudo id"]),
            ("command -p sudo id", &["sudo id"]),
            ("exec -a x sudo id", &["sudo id"]),
            ("nice -n 5 nohup sudo id", &["sudo id"]),
            ("timeout -s KILL 5 sudo id", &["sudo id"]),
            ("ls; sudo id", &["ls", "sudo id"]),
            ("true && sudo id || false", &["true", "sudo id", "false"]),
            ("echo x | sudo tee /etc/x", &["echo x", "sudo tee /etc/x"]),
            ("sleep 1 & sudo id", &["sleep 1", "sudo id"]),
            ("\"su\"do id", &["sudo id"]),
            ("s\\udo id", &["sudo id"]),
            ("'sudo' id", &["sudo id"]),
            ("bash -c 'sudo id'", &["sudo id"]),
            ("sh -ec \"ls; sudo id\"", &["ls", "sudo id"]),
            ("eval sudo id", &["sudo id"]),
            ("if true; then sudo id; fi", &["true", "sudo id"]),
            ("{ sudo id; }", &["sudo id"]),
            ("! sudo id", &["sudo id"]),
            ("sudo id >/tmp/out 2>&1 </dev/null", &["sudo id"]),
            (">/tmp/out sudo id", &["sudo id"]),
            ("echo 'a;b|c'", &["echo a;b|c"]),
            ("ls # sudo id", &["ls"]),
            ("ls\nsudo id", &["ls", "sudo id"]),
            (
                "python3 - <<'EOF'\nimport os\nos.system('x')\nEOF\nsudo id",
                &["python3 -", "sudo id"],
            ),
            ("echo ok", &["echo ok"]),
        ];
        for (text, expected) in cases {
            assert_eq!(line(text), *expected, "{text:?}");
        }
    }

    #[test]
    fn what_cannot_be_known_is_unknown() {
        let cases: &[(&str, &[&str])] = &[
            ("$X id", &["<?>"]),
            ("echo $HOME", &["echo <?>"]),
            ("echo \"$HOME/x\"", &["echo <?>/x"]),
            ("rm -rf /*", &["rm -rf /<?>"]),
            ("/usr/bin/su?o id", &["<?>"]),
            // What a substitution runs is judged as a command of its own;
            // its output is an unknown part of the word.
            ("echo $(sudo id)", &["echo <?>", "sudo id"]),
            (
                "for i in $(seq 3); do echo $i; done",
                &["for i in <?>", "echo <?>", "seq 3"],
            ),
            ("i=$((i+1)); echo $$", &["echo <?>"]),
            ("[ -e /tmp/x ] && echo y", &["[ -e /tmp/x ]", "echo y"]),
            ("echo $(( $(sudo id) ))", &["<?>"]),
            ("echo $($X)", &["echo <?>", "<?>"]),
            ("echo `sudo id`", &["<?>"]),
            ("(sudo id)", &["<?>"]),
            ("BASH_ENV=/tmp/x bash -c true", &["<?>"]),
            ("env LD_PRELOAD=/tmp/x.so id", &["<?>"]),
            ("env -S 'sudo id'", &["<?>"]),
            ("curl -s x | sh", &["curl -s x", "<?>"]),
            ("bash", &["<?>"]),
            ("bash -s", &["<?>"]),
            ("sh <<EOF\nsudo id\nEOF", &["<?>"]),
            ("$'\\x73udo' id", &["<?>"]),
            ("echo 'unterminated", &["<?>"]),
            ("diff <(ls) <(ls)", &["<?>"]),
            ("eval \"$CMD\"", &["<?>"]),
        ];
        for (text, expected) in cases {
            assert_eq!(line(text), *expected, "{text:?}");
        }
    }

    #[test]
    fn argv_is_not_a_shell_line_but_wrappers_still_count() {
        let argv = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            shown(&commands(&argv(&["env", "sudo", "id"]), None, &[])),
            ["sudo id"]
        );
        assert_eq!(
            shown(&commands(&argv(&["echo", "$(sudo id)"]), None, &[])),
            ["echo $(sudo id)"]
        );
        assert_eq!(
            shown(&commands(&argv(&["bash", "-c", "x=1 sudo id"]), None, &[])),
            ["sudo id"]
        );
        assert_eq!(
            shown(&commands(&[], Some("ls"), &["BASH_ENV".into()])),
            ["<?>"]
        );
        assert_eq!(shown(&commands(&[], Some("ls"), &["LANG".into()])), ["ls"]);
    }
}
