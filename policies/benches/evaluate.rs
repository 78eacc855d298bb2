//! Cost of evaluating an allowed action: the open policy (no rules) and a
//! 20-rule policy whose rules all miss, measured in the same run, so the
//! ratio says what the rules add. Prints percentiles; asserts nothing.
//!
//!     cargo bench -p cubicle-policy

use std::hint::black_box;
use std::time::{Duration, Instant};

use cubicle_policy::subject::BrowserContext;
use cubicle_policy::{BrowserState, Context, Focus, Policy, PolicySet, Subject};

/// Twenty rules that an ordinary click on an ordinary page does not match.
fn twenty_rules() -> String {
    let mut doc = String::from("default = \"allow\"\n");
    for i in 0..20 {
        let rule = match i % 5 {
            0 => format!(
                "subject = \"action\"\naction = [\"type\"]\nfocus = [\"password\"]\nreason = \"r{i}\""
            ),
            1 => format!("subject = \"action\"\nhost = [\"*.bank{i}.example\"]"),
            2 => format!("subject = \"action\"\nkeys = [\"ctrl+alt+f{i}\"]"),
            3 => format!("subject = \"action\"\nregion = [0, 0, {i}, {i}]"),
            _ => format!("subject = \"exec\"\ncommand = [\"sudo{i} *\"]"),
        };
        doc.push_str(&format!("\n[[rule]]\n{rule}\ndecision = \"confirm\"\n"));
    }
    doc
}

fn p50(policy: &Policy, subject: &Subject, context: &Context<'_>, runs: usize) -> Duration {
    let mut samples = Vec::with_capacity(runs);
    for _ in 0..runs {
        let start = Instant::now();
        for _ in 0..100 {
            black_box(policy.evaluate(black_box(subject), context));
        }
        samples.push(start.elapsed() / 100);
    }
    samples.sort();
    samples[runs / 2]
}

fn main() {
    let open = PolicySet::shipped()
        .and_then(|s| s.get("open"))
        .expect("the shipped open policy parses");
    let twenty =
        Policy::parse("bench.toml", "bench", &twenty_rules()).expect("bench policy parses");
    assert_eq!(twenty.rules.len(), 20);
    let click = Subject::Action {
        name: "left_click".into(),
        point: Some((640, 400)),
        keys: None,
        text: None,
    };
    let page = BrowserContext::at("https://www.example.org/search?q=x", Focus::Text);
    let context = Context {
        browser: BrowserState::Known(&page),
    };
    let runs = 2000;
    // Warm up both, then measure alternately so both see the same machine.
    p50(&open, &click, &context, 100);
    p50(&twenty, &click, &context, 100);
    let base = p50(&open, &click, &context, runs);
    let rules = p50(&twenty, &click, &context, runs);
    println!("policy evaluation of an allowed click, p50 over {runs}x100 calls:");
    println!("  no rules (open):  {:>8.0} ns", base.as_nanos());
    println!("  20 rules:         {:>8.0} ns", rules.as_nanos());
    println!(
        "  ratio:            {:>8.2}x",
        rules.as_secs_f64() / base.as_secs_f64().max(1e-12)
    );
}
